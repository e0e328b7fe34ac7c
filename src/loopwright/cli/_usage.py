"""``loopwright usage``: tokens and cost of the chat platforms, by user, model, month or conversation."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table

from loopwright.cli._errors import reported
from loopwright.cli._options import JsonOpt, WorkspaceOpt
from loopwright.cli._term import Terminal, json_text, text
from loopwright.cli._users import DbOpt, with_database

if TYPE_CHECKING:
    from loopwright.platforms import UsageRow
    from loopwright.sql import Database

__all__ = ["usage"]


def usage(
    ctx: typer.Context,
    by: Annotated[
        str, typer.Option("--by", metavar="GROUP", help="Group by user, model, month or conversation.")
    ] = "user",
    user: Annotated[
        str | None, typer.Option("--user", metavar="USER", help="Only this user (id or PLATFORM:ID).")
    ] = None,
    month: Annotated[
        str | None, typer.Option("--month", metavar="YYYY-MM", help="Only this month (UTC).")
    ] = None,
    workspace: WorkspaceOpt = Path("."),
    db: DbOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Report the tokens and cost of every model call made for chat-platform users."""
    term: Terminal = ctx.obj

    async def work(database: Database) -> list[UsageRow]:
        from loopwright.platforms import find_user, usage_report

        user_id = (await find_user(database, user)).id if user is not None else None
        return await usage_report(database, by=by, user_id=user_id, month=month)

    with reported(term):
        rows = with_database(workspace, db, work)
    if json_output:
        term.write_line(json_text([r.to_dict() for r in rows], indent=2))
        return
    if not rows:
        term.out.print(text("No model calls recorded."), soft_wrap=True)
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column(by, no_wrap=True)
    for name in ("calls", "input", "output", "total", "cost"):
        table.add_column(name, justify="right", no_wrap=True)
    for r in rows:
        label = r.key if r.label == r.key else f"{r.label} ({r.key})"
        cost = "unknown" if r.cost_usd is None else f"${r.cost_usd:,.4f}"
        table.add_row(
            text(label),
            f"{r.calls:,}",
            f"{r.input_tokens:,}",
            f"{r.output_tokens:,}",
            f"{r.total_tokens:,}",
            cost,
        )
    term.out.print(table)
