"""``loopwright sessions list`` and ``loopwright sessions show``: what is stored in a workspace.

``--db URL`` works on the SQL session store instead of the workspace's files (``list``, ``show``,
``export``, ``import``), so ``export`` from one backend and ``import`` into the other moves a session
between them without loss.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from loopwright.agent import Agent
from loopwright.cli import _format
from loopwright.cli._errors import reported
from loopwright.cli._options import JsonOpt, ModelOpt, WorkspaceOpt, load_agent, open_store
from loopwright.cli._report import print_report
from loopwright.cli._term import Terminal, json_text, text
from loopwright.errors import InputError, NotFoundError
from loopwright.messages import AssistantMessage, ToolResultMessage, UserMessage
from loopwright.report import RunReport
from loopwright.sessions import (
    Entry,
    SessionInfo,
    SessionStore,
    encode_entry,
    export_session,
    import_session,
)

__all__ = ["sessions_app"]

T = TypeVar("T")

sessions_app = typer.Typer(
    name="sessions",
    help="List and inspect the sessions stored in a workspace.",
    no_args_is_help=True,
)

SqlOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="URL",
        help="Use the SQL session store at this database (postgresql://… or sqlite:///…), not the workspace's files.",
        show_default=False,
    ),
]

_TITLE_CHARS = 48
_WIDE = 120  # columns from which the title gets a column of its own
_RESULT_LINES = 8
_RESULT_CHARS = 800
_THINKING_CHARS = 300


async def _with_store(workspace: Path, db: str | None, work: Callable[[SessionStore], Awaitable[T]]) -> T:
    """Run ``work`` on the workspace's file store, or on the SQL store of ``db``."""
    if db is None:
        return await work(open_store(workspace))
    from loopwright.sessions.sql import SQLSessionStore  # SQLAlchemy loads only when asked for
    from loopwright.sql import Database

    database = Database(db)
    try:
        await database.migrate()
        return await work(SQLSessionStore(database))
    finally:
        await database.aclose()


@sessions_app.command("list")
def list_sessions(
    ctx: typer.Context, workspace: WorkspaceOpt = Path("."), db: SqlOpt = None, json_output: JsonOpt = False
) -> None:
    """List the sessions of a workspace, most recently updated first."""
    term: Terminal = ctx.obj
    with reported(term):
        infos = asyncio.run(_with_store(workspace, db, lambda store: store.list_sessions()))
    if json_output:
        term.write_line(json_text([info.to_dict() for info in infos], indent=2))
        return
    if not infos:
        term.out.print(
            text(f'No sessions yet. Start one: loopwright run -w {workspace} "hello"'), soft_wrap=True
        )
        return
    term.out.print(_sessions_table(infos, wide=term.out.width >= _WIDE))


@sessions_app.command("compact")
def compact_session(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The session to compact.")],
    workspace: WorkspaceOpt = Path("."),
    model: ModelOpt = None,
) -> None:
    """Summarise a session's older messages now; the originals stay in the transcript.

    The most recent messages are kept as they are. Undo it with `loopwright sessions uncompact ID`.
    """
    term: Terminal = ctx.obj
    with reported(term):
        agent = load_agent(workspace, model=model)
        result = asyncio.run(_close_after(agent, agent.compact(session_id)))
    term.out.print(
        text(
            f"compacted {session_id}: about {result.tokens_before:,} → {result.tokens_after:,} tokens in context"
        ),
        soft_wrap=True,
    )


@sessions_app.command("uncompact")
def uncompact_session(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The session to restore.")],
    workspace: WorkspaceOpt = Path("."),
) -> None:
    """Undo a session's latest compaction: its original messages come back into the context."""
    term: Terminal = ctx.obj
    with reported(term):
        agent = load_agent(workspace, model="test")  # no model call is made
        undone = asyncio.run(agent.uncompact(session_id))
    if undone is None:
        term.out.print(text(f"{session_id} has no compaction to undo"), soft_wrap=True)
    else:
        term.out.print(text(f"undid compaction {undone} of {session_id}"), soft_wrap=True)


async def _close_after(agent: Agent, work: Awaitable[T]) -> T:
    try:
        return await work
    finally:
        await agent.aclose()


@sessions_app.command("export")
def export_command(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The session to export.")],
    workspace: WorkspaceOpt = Path("."),
    db: SqlOpt = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write here instead of standard output."),
    ] = None,
) -> None:
    """Write a session (metadata, every transcript entry, run reports) as one JSON snapshot."""
    term: Terminal = ctx.obj
    with reported(term):
        snapshot = asyncio.run(_with_store(workspace, db, lambda store: export_session(store, session_id)))
    data = json.dumps(snapshot, ensure_ascii=False, indent=2)
    if output is None:
        term.write_line(data)
    else:
        output.write_text(data + "\n", encoding="utf-8")
        term.out.print(text(f"exported {session_id} to {output}"), soft_wrap=True)


@sessions_app.command("import")
def import_command(
    ctx: typer.Context,
    source: Annotated[Path, typer.Argument(metavar="FILE", help="A snapshot written by `sessions export`.")],
    workspace: WorkspaceOpt = Path("."),
    db: SqlOpt = None,
    session_id: Annotated[
        str | None, typer.Option("--id", metavar="ID", help="Import under this id (default: the snapshot's).")
    ] = None,
) -> None:
    """Create a session from a snapshot; an existing session is never overwritten."""
    term: Terminal = ctx.obj
    with reported(term):
        try:
            snapshot = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read snapshot {str(source)!r}: {exc}") from None
        created = asyncio.run(
            _with_store(workspace, db, lambda store: import_session(store, snapshot, session_id=session_id))
        )
    term.out.print(text(f"imported {created}"), soft_wrap=True)


@sessions_app.command("show")
def show_session(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The session to show.", show_default=False)],
    workspace: WorkspaceOpt = Path("."),
    db: SqlOpt = None,
    runs: Annotated[bool, typer.Option("--runs", metavar="", help="Also show each run's report.")] = False,
    json_output: JsonOpt = False,
) -> None:
    """Show a session's transcript: messages, tool calls with their arguments, and tool results.

    Error results are marked with a cross; results loopwright wrote itself (a call that never ran
    because its run stopped or failed) are marked synthetic.
    """
    term: Terminal = ctx.obj
    with reported(term):
        info, entries, warnings, reports = asyncio.run(
            _with_store(workspace, db, lambda store: _load(store, session_id))
        )
    for warning in warnings:
        term.err.print(text(f"warning: {warning}", "yellow"), soft_wrap=True)
    if json_output:
        document: dict[str, object] = {
            "session": info.to_dict(),
            "transcript": [json.loads(encode_entry(entry)) for entry in entries],
        }
        if runs:
            document["runs"] = [report.to_dict() for report in reports]
        term.write_line(json_text(document, indent=2))
        return
    out = term.out
    _print_info(out, info)
    for entry in entries:
        out.print()
        _print_entry(out, entry)
    if runs:
        out.print()
        out.print(f"Runs ({len(reports)})", style="bold")
        for report in reports:
            out.print()
            print_report(out, report)


def _sessions_table(infos: list[SessionInfo], *, wide: bool) -> Table:
    """One row per session; on a narrow terminal the title goes under the id (ids are never cut)."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("id" if wide else "id / title", no_wrap=True)
    if wide:
        table.add_column("title", no_wrap=True, overflow="ellipsis", max_width=_TITLE_CHARS)
    table.add_column("updated", no_wrap=True)
    for name in ("messages" if wide else "msgs", "runs", "tokens"):
        table.add_column(name, justify="right", no_wrap=True)
    # Under the id, a title may be as wide as the widest id (a generated id has 36 characters).
    room = _TITLE_CHARS if wide else max(36, *(len(info.id) for info in infos))
    for info in infos:
        title = text(_format.shorten(info.title, room), "dim")
        ident = text(info.id, "bold")
        cells = [ident, title] if wide else [Text.assemble(ident, "\n", title)]
        table.add_row(
            *cells,
            _format.local_time(info.updated_at),
            f"{info.message_count:,}",
            f"{info.run_count:,}",
            f"{info.usage.total_tokens:,}",
        )
    return table


async def _load(
    store: SessionStore, session_id: str
) -> tuple[SessionInfo, list[Entry], list[str], list[RunReport]]:
    info = await store.get(session_id)
    if info is None:
        raise NotFoundError("session", session_id)
    loaded = await store.load(session_id)
    reports = await store.list_reports(session_id)
    return info, loaded.entries, loaded.warnings, reports


def _print_info(out: Console, info: SessionInfo) -> None:
    out.print(Text.assemble(("session ", "bold"), text(info.id, "bold")), soft_wrap=True)
    if info.title:
        out.print(Text.assemble("  ", text(info.title, "italic")), soft_wrap=True)
    figures = (
        f"agent {info.agent}",
        f"created {_format.local_time(info.created_at)}",
        f"updated {_format.local_time(info.updated_at)}",
        _format.count(info.message_count, "message"),
        _format.count(info.run_count, "run"),
        _format.count(info.usage.total_tokens, "token"),
    )
    line = text("  " + " · ".join(figures), "dim")
    if info.terminated:
        line.append(" · terminated", "red")
    out.print(line, soft_wrap=True)


def _print_entry(out: Console, entry: Entry) -> None:
    when = f" · {_format.local_time(entry.timestamp)}" if entry.timestamp else ""
    if isinstance(entry, UserMessage):
        out.print(Text.assemble(("user", "bold green"), (when, "dim")))
        _body(out, entry.content)
    elif isinstance(entry, AssistantMessage):
        model = f" · {entry.model}" if entry.model else ""
        out.print(Text.assemble(("assistant", "bold magenta"), text(model + when, "dim")))
        for block in entry.thinking:
            if block.text:
                _body(out, "thinking: " + _format.shorten(block.text, _THINKING_CHARS), "dim italic")
        if entry.content:
            _body(out, entry.content)
        for call in entry.tool_calls:
            line = Text.assemble(("→ ", "cyan"), text(call.name, "bold cyan"), " ")
            line.append_text(text(_format.arguments(_arguments(call.arguments)), "dim"))
            line.append_text(text(f"  {call.id}", "dim"))
            _body(out, line)
        if entry.finish_reason in ("stopped", "timeout", "error"):
            out.print(text(f"  (cut short: {entry.finish_reason})", "yellow"))
    elif isinstance(entry, ToolResultMessage):
        _print_result(out, entry, when)
    else:
        out.print(text(f"· {entry.type} record{when}", "dim"))


def _print_result(out: Console, entry: ToolResultMessage, when: str) -> None:
    line = Text.assemble(
        ("tool ", "bold cyan"), text(entry.name, "bold cyan"), text(f" · {entry.tool_call_id}", "dim")
    )
    line.append(" ✗ error" if entry.is_error else " ✓", "red" if entry.is_error else "green")
    if entry.synthetic and entry.content.startswith("in doubt"):
        line.append(" (synthetic: cut off while running, its effect unknown)", "yellow")
    elif entry.synthetic:
        line.append(" (synthetic: the call never ran)", "yellow")
    line.append(when, "dim")
    out.print(line, soft_wrap=True)
    lines = entry.content.splitlines() or [""]
    shown = "\n".join(lines[:_RESULT_LINES])
    if len(shown) > _RESULT_CHARS:
        shown = shown[:_RESULT_CHARS] + "…"
    _body(out, shown, "red" if entry.is_error else "")
    if len(lines) > _RESULT_LINES:
        out.print(text(f"  … {len(lines) - _RESULT_LINES} more lines", "dim"))


def _body(out: Console, content: str | Text, style: str = "") -> None:
    """``content`` indented by two spaces, wrapped to the console (no padding after the text)."""
    body = text(content, style) if isinstance(content, str) else content
    for line in body.wrap(out, max(20, out.width - 2)):
        line.rstrip()
        out.print(Text.assemble("  ", line), soft_wrap=True)


def _arguments(raw: str) -> dict[str, object] | str:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return raw
    return value if isinstance(value, dict) else raw
