"""``loopwright users``: the people of a chat-platform deployment, their levels and budgets.

Also the database option shared by ``users``, ``personas`` and ``usage``: ``--db URL`` (or
``LOOPWRIGHT_DATABASE_URL``), else the workspace's embedded SQLite file ``loopwright.db``.

SQLAlchemy and Alembic take most of a second to import, so these commands import the storage
modules when they run, never when ``loopwright`` starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich import box
from rich.table import Table

from loopwright.cli._errors import reported
from loopwright.cli._options import JsonOpt, WorkspaceOpt
from loopwright.cli._term import Terminal, json_text, text
from loopwright.errors import ConfigError, InputError

if TYPE_CHECKING:
    from loopwright.platforms import UserInfo
    from loopwright.sql import Database

__all__ = ["DbOpt", "users_app", "with_database"]

T = TypeVar("T")

DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="URL",
        envvar="LOOPWRIGHT_DATABASE_URL",
        help="Database URL (postgresql://… or sqlite:///…); default: loopwright.db in the workspace.",
        show_default=False,
    ),
]
UserArg = Annotated[
    str, typer.Argument(metavar="USER", help="A user id, or PLATFORM:PLATFORM_USER_ID (discord:1234).")
]

users_app = typer.Typer(
    name="users", help="List users and change their permission level and budget.", no_args_is_help=True
)


def open_database(workspace: Path, db: str | None) -> Database:
    """The database a command works on: ``--db``, else the workspace's SQLite file."""
    from loopwright.sql import DEFAULT_DB_FILE, Database

    if db:
        return Database(db)
    root = workspace.expanduser()
    if not root.is_dir():
        raise ConfigError(f"workspace {str(root)!r} does not exist; pass --db URL or -w DIR")
    return Database(root.resolve() / DEFAULT_DB_FILE)


def with_database(workspace: Path, db: str | None, work: Callable[[Database], Awaitable[T]]) -> T:
    """Open (and migrate) the database, run ``work`` on it, close it."""

    async def main() -> T:
        database = open_database(workspace, db)
        try:
            await database.migrate()
            return await work(database)
        finally:
            await database.aclose()

    return asyncio.run(main())


def _budget(user: UserInfo) -> str:
    if user.token_budget_monthly is None:
        return f"{user.tokens_used_this_month:,} / unlimited"
    return f"{user.tokens_used_this_month:,} / {user.token_budget_monthly:,}"


@users_app.command("list")
def list_command(
    ctx: typer.Context, workspace: WorkspaceOpt = Path("."), db: DbOpt = None, json_output: JsonOpt = False
) -> None:
    """List every user: level, tokens used this month of the budget, platform identities."""
    term: Terminal = ctx.obj
    with reported(term):
        from loopwright.platforms import list_users

        users = with_database(workspace, db, list_users)
    if json_output:
        term.write_line(json_text([u.to_dict() for u in users], indent=2))
        return
    if not users:
        term.out.print(text("No users yet: they appear with their first message."), soft_wrap=True)
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("id", no_wrap=True)
    table.add_column("level", no_wrap=True)
    table.add_column("tokens/budget", justify="right", no_wrap=True)
    table.add_column("name and platforms")
    for u in users:
        links = " ".join(f"{k.platform}:{k.platform_user_id}" for k in u.links)
        table.add_row(text(u.id), u.permission_level, _budget(u), text(f"{u.display_name} {links}"))
    term.out.print(table)


@users_app.command("show")
def show_command(
    ctx: typer.Context,
    user: UserArg,
    workspace: WorkspaceOpt = Path("."),
    db: DbOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Show a user: level, budget and when it renews, platform identities, usage by model."""
    term: Terminal = ctx.obj

    async def work(database: Database) -> tuple[UserInfo, list[dict[str, object]]]:
        from loopwright.platforms import find_user, usage_report

        found = await find_user(database, user)
        rows = await usage_report(database, by="model", user_id=found.id)
        return found, [r.to_dict() for r in rows]

    with reported(term):
        info, usage = with_database(workspace, db, work)
    if json_output:
        term.write_line(json_text({**info.to_dict(), "usageByModel": usage}, indent=2))
        return
    out = term.out
    out.print(text(f"user {info.id}", "bold"), soft_wrap=True)
    out.print(text(f"  name       {info.display_name}"), soft_wrap=True)
    out.print(text(f"  level      {info.permission_level}"), soft_wrap=True)
    out.print(
        text(f"  tokens     {_budget(info)} this month (renews {info.budget_reset_at:%Y-%m-%d} UTC)"),
        soft_wrap=True,
    )
    for link in info.links:
        name = f" ({link.platform_username})" if link.platform_username else ""
        out.print(text(f"  platform   {link.platform}:{link.platform_user_id}{name}"), soft_wrap=True)
    for row in usage:
        cost = "cost unknown" if row["costUsd"] is None else f"${row['costUsd']:.4f}"
        out.print(
            text(f"  model      {row['key']}: {row['calls']} calls, {row['totalTokens']:,} tokens, {cost}"),
            soft_wrap=True,
        )


@users_app.command("set-permission")
def set_permission_command(
    ctx: typer.Context,
    user: UserArg,
    level: Annotated[str, typer.Argument(metavar="LEVEL", help="guest, user, admin or owner.")],
    workspace: WorkspaceOpt = Path("."),
    db: DbOpt = None,
) -> None:
    """Set a user's permission level (guest < user < admin < owner): which tools they see."""
    term: Terminal = ctx.obj

    async def work(database: Database) -> UserInfo:
        from loopwright.platforms import find_user, set_permission

        return await set_permission(database, (await find_user(database, user)).id, level)

    with reported(term):
        info = with_database(workspace, db, work)
    term.out.print(text(f"{info.id} ({info.display_name}) is now {info.permission_level}"), soft_wrap=True)


@users_app.command("set-budget")
def set_budget_command(
    ctx: typer.Context,
    user: UserArg,
    tokens: Annotated[str, typer.Argument(metavar="TOKENS", help="Tokens per month, or 'unlimited'.")],
    workspace: WorkspaceOpt = Path("."),
    db: DbOpt = None,
) -> None:
    """Set a user's monthly token budget (input + output tokens of every model call)."""
    term: Terminal = ctx.obj
    with reported(term):
        budget = _parse_tokens(tokens)

        async def work(database: Database) -> UserInfo:
            from loopwright.platforms import find_user, set_budget

            return await set_budget(database, (await find_user(database, user)).id, budget)

        info = with_database(workspace, db, work)
    term.out.print(
        text(f"{info.id} ({info.display_name}): {_budget(info)} tokens this month"), soft_wrap=True
    )


@users_app.command("link")
def link_command(
    ctx: typer.Context,
    user: UserArg,
    identity: Annotated[str, typer.Argument(metavar="PLATFORM:ID", help="The identity to add (slack:U123).")],
    workspace: WorkspaceOpt = Path("."),
    db: DbOpt = None,
) -> None:
    """Link another platform identity to a user: one budget and level across platforms."""
    term: Terminal = ctx.obj
    with reported(term):
        platform, sep, platform_user_id = identity.partition(":")
        if not sep or not platform or not platform_user_id:
            raise InputError(f"identity {identity!r} must be PLATFORM:PLATFORM_USER_ID, e.g. slack:U123")

        async def work(database: Database) -> UserInfo:
            from loopwright.platforms import find_user, link_platform

            return await link_platform(
                database, (await find_user(database, user)).id, platform, platform_user_id
            )

        info = with_database(workspace, db, work)
    term.out.print(text(f"linked {identity} to {info.id} ({info.display_name})"), soft_wrap=True)


def _parse_tokens(value: str) -> int | None:
    if value.strip().lower() in ("unlimited", "none", "null"):
        return None
    try:
        tokens = int(value.replace(",", "").replace("_", ""))
    except ValueError:
        raise InputError(f"budget {value!r} is not a number of tokens or 'unlimited'") from None
    if tokens < 0:
        raise InputError(f"budget {value!r} is negative")
    return tokens
