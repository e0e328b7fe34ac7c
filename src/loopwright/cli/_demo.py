"""``loopwright demo``: a whole run, offline, in a throwaway workspace, in about a second."""

from __future__ import annotations

import asyncio
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.rule import Rule
from rich.text import Text

from loopwright.cli._errors import EXIT_RUN_FAILED, reported
from loopwright.cli._options import load_agent
from loopwright.cli._render import LiveRenderer
from loopwright.cli._report import print_report
from loopwright.cli._run import report_outcome, stream_run
from loopwright.cli._term import Terminal, text
from loopwright.report import RunReport
from loopwright.sessions import FileSessionStore
from loopwright.testing import TestModel
from loopwright.workspace import init_workspace

__all__ = ["demo", "demo_model"]

MESSAGE = "Look around this folder, tick off the first item on my todo list and leave me a note."

_README = """\
# Garden planner

A small folder for trying loopwright. The agent can read, list, search, edit and write
the files here, but never leave this folder or touch its own transcripts.
"""
_TODO = """\
# Todo

- [ ] try loopwright
- [ ] write a tool of my own in tools/
- [ ] point AGENT.md at a real model
"""
_NOTE = """\
# Notes from the demo agent

- This folder holds README.md and todo.md.
- I ticked off "try loopwright" in todo.md.
"""
FILES = {"README.md": _README, "todo.md": _TODO}


def demo_model() -> TestModel:
    """The offline test model, with arguments that make sense for the demo workspace's files."""
    return TestModel(
        args={
            "read_file": {"path": "README.md"},
            "list_files": {"path": "."},
            "search_files": {"pattern": r"\[ \]", "path": "todo.md"},
            "edit_file": {
                "path": "todo.md",
                "old_text": "- [ ] try loopwright",
                "new_text": "- [x] try loopwright",
            },
            "write_file": {"path": "notes/demo.md", "content": _NOTE},
            "current_time": {},
            "memory_write": {"text": "The user tried loopwright with the demo workspace.", "where": "daily"},
            "memory_search": {"query": "loopwright demo"},
            "word_count": {"text": _README},
        },
        chunks=12,
    )


def demo(
    ctx: typer.Context,
    keep: Annotated[
        bool, typer.Option("--keep", metavar="", help="Keep the demo workspace and print where it is.")
    ] = False,
) -> None:
    """Run an agent offline in a temporary workspace: streaming, tool calls, transcript and report.

    Uses the built-in test model, so it needs no API key and finishes in about a second.
    """
    term: Terminal = ctx.obj
    with reported(term):
        root = Path(tempfile.mkdtemp(prefix="loopwright-demo-"))
        try:
            report = _run_demo(term, root)
        finally:
            if not keep:
                shutil.rmtree(root, ignore_errors=True)
        _print_next(term, root, report, keep=keep)
        if report_outcome(term, report):
            raise typer.Exit(EXIT_RUN_FAILED)


def _run_demo(term: Terminal, root: Path) -> RunReport:
    out = term.out
    init_workspace(root, name="demo-agent")
    for name, content in FILES.items():
        (root / name).write_text(content, encoding="utf-8")
    agent = load_agent(root, model=demo_model())

    out.print(
        Text.assemble(("loopwright demo", "bold"), (" · an offline agent on the built-in test model", "dim"))
    )
    out.print(Text.assemble(("workspace ", "dim"), text(str(root))), soft_wrap=True)
    out.print(Text.assemble(("tools     ", "dim"), text(", ".join(agent.tools))), soft_wrap=True)
    out.print()
    out.print(Text.assemble(("you › ", "bold green"), text(MESSAGE)), soft_wrap=True)
    out.print()
    live = LiveRenderer(out)
    report = asyncio.run(stream_run(agent, MESSAGE, None, live))
    live.print_footer(report)

    out.print()
    out.print(Rule("what was recorded", style="dim", align="left"))
    store = agent.store
    if isinstance(store, FileSessionStore):
        folder = store.session_dir(report.session_id)
        for label, path in (
            ("transcript", store.transcript_path(report.session_id)),
            ("report", folder / "runs" / f"{report.id}.json"),
        ):
            out.print(Text.assemble((f"{label:<11}", "bold"), text(str(path))), soft_wrap=True)
    out.print(Text("run report", style="bold"))
    print_report(out, report, heading=False)
    return report


def _print_next(term: Terminal, root: Path, report: RunReport, *, keep: bool) -> None:
    out = term.out
    out.print()
    folder = shlex.quote(str(root))
    if keep:
        out.print(Text.assemble(("Workspace kept at ", "bold"), text(str(root), "bold")), soft_wrap=True)
        lines = [
            f"loopwright sessions show {report.session_id} -w {folder} --runs",
            f"loopwright chat -w {folder}",
        ]
    else:
        out.print(text("The demo workspace was removed (keep it with: loopwright demo --keep).", "dim"))
        out.print("Make an agent of your own:", style="bold")
        lines = ["loopwright init my-agent", 'loopwright run -w my-agent "What files are here?"']
    for line in lines:
        out.print(text(f"  {line}"), soft_wrap=True)
