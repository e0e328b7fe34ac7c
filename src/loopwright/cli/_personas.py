"""``loopwright personas``: who the agent is on each server and platform."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table

from loopwright.cli._errors import reported
from loopwright.cli._options import JsonOpt, WorkspaceOpt
from loopwright.cli._term import Terminal, json_text, text
from loopwright.cli._users import DbOpt, with_database
from loopwright.errors import InputError

if TYPE_CHECKING:
    from loopwright.platforms import PersonaInfo
    from loopwright.sql import Database

__all__ = ["personas_app"]

personas_app = typer.Typer(
    name="personas",
    help="List, create and edit personas (server → platform → default).",
    no_args_is_help=True,
)

NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The persona's name.")]
SystemOpt = Annotated[str | None, typer.Option("--system", metavar="TEXT", help="The system prompt.")]
SystemFileOpt = Annotated[
    Path | None, typer.Option("--system-file", metavar="FILE", help="Read the system prompt from a file.")
]
PlatformOpt = Annotated[
    str | None, typer.Option("--platform", metavar="PLATFORM", help="Only on this platform.")
]
ServerOpt = Annotated[
    str | None, typer.Option("--server", metavar="ID", help="Only on this server (needs --platform).")
]
ModulesOpt = Annotated[
    str | None,
    typer.Option(
        "--modules", metavar="A,B", help="Tool groups on offer, comma-separated ('all': every tool)."
    ),
]
ModelOpt = Annotated[str | None, typer.Option("--model", metavar="SPEC", help="The persona's model.")]
MaxTokensOpt = Annotated[
    int | None, typer.Option("--max-tokens", metavar="N", min=1, help="Most output tokens per model call.")
]
_CLEARABLE = ("platform", "server", "modules", "model", "max-tokens")


@personas_app.command("list")
def list_command(
    ctx: typer.Context, workspace: WorkspaceOpt = Path("."), db: DbOpt = None, json_output: JsonOpt = False
) -> None:
    """List the personas and where each applies."""
    term: Terminal = ctx.obj
    with reported(term):
        from loopwright.platforms import list_personas

        personas = with_database(workspace, db, list_personas)
    if json_output:
        term.write_line(json_text([p.to_dict() for p in personas], indent=2))
        return
    if not personas:
        term.out.print(
            text("No personas: the service's own prompt and tools apply everywhere."), soft_wrap=True
        )
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in ("name", "applies to", "modules", "model", "max tokens", "prompt"):
        table.add_column(name, no_wrap=name != "prompt", overflow="ellipsis")
    for p in personas:
        table.add_row(
            text(p.name),
            text(p.scope),
            text("all" if p.allowed_modules is None else ", ".join(p.allowed_modules) or "none"),
            text(p.default_model or "-"),
            "-" if p.max_tokens_per_request is None else f"{p.max_tokens_per_request:,}",
            text(p.system_prompt.splitlines()[0] if p.system_prompt else ""),
        )
    term.out.print(table)


@personas_app.command("create")
def create_command(
    ctx: typer.Context,
    name: NameArg,
    system: SystemOpt = None,
    system_file: SystemFileOpt = None,
    platform: PlatformOpt = None,
    server: ServerOpt = None,
    default: Annotated[
        bool, typer.Option("--default", help="The persona of every place without its own.")
    ] = False,
    modules: ModulesOpt = None,
    model: ModelOpt = None,
    max_tokens: MaxTokensOpt = None,
    workspace: WorkspaceOpt = Path("."),
    db: DbOpt = None,
) -> None:
    """Create a persona for a server (--platform and --server), a platform (--platform) or everywhere (--default)."""
    term: Terminal = ctx.obj
    with reported(term):
        prompt = _prompt(system, system_file) or ""

        async def work(database: Database) -> PersonaInfo:
            from loopwright.platforms import create_persona

            return await create_persona(
                database,
                name,
                system_prompt=prompt,
                platform=platform,
                platform_server_id=server,
                is_default=default,
                allowed_modules=_modules(modules),
                default_model=model,
                max_tokens_per_request=max_tokens,
            )

        persona = with_database(workspace, db, work)
    term.out.print(text(f"created persona {persona.name} ({persona.scope})"), soft_wrap=True)


@personas_app.command("edit")
def edit_command(
    ctx: typer.Context,
    name: NameArg,
    system: SystemOpt = None,
    system_file: SystemFileOpt = None,
    platform: PlatformOpt = None,
    server: ServerOpt = None,
    default: Annotated[
        bool | None, typer.Option("--default/--not-default", help="Make it (or stop it being) the default.")
    ] = None,
    modules: ModulesOpt = None,
    model: ModelOpt = None,
    max_tokens: MaxTokensOpt = None,
    clear: Annotated[
        list[str] | None,
        typer.Option(
            "--clear", metavar="FIELD", help=f"Unset a field: {', '.join(_CLEARABLE)} (repeatable)."
        ),
    ] = None,
    workspace: WorkspaceOpt = Path("."),
    db: DbOpt = None,
) -> None:
    """Change the given fields of a persona; the others stay. Running agents pick it up on the next message."""
    term: Terminal = ctx.obj
    with reported(term):
        cleared = set(clear or ())
        unknown = cleared - set(_CLEARABLE)
        if unknown:
            raise InputError(f"cannot clear {', '.join(sorted(unknown))}; clearable: {', '.join(_CLEARABLE)}")
        from loopwright.platforms import UNSET, edit_persona

        prompt = _prompt(system, system_file)
        changes: dict[str, Any] = {
            "system_prompt": UNSET if prompt is None else prompt,
            "platform": None if "platform" in cleared else (UNSET if platform is None else platform),
            "platform_server_id": None if "server" in cleared else (UNSET if server is None else server),
            "is_default": UNSET if default is None else default,
            "allowed_modules": None
            if "modules" in cleared
            else (UNSET if modules is None else _modules(modules)),
            "default_model": None if "model" in cleared else (UNSET if model is None else model),
            "max_tokens_per_request": None
            if "max-tokens" in cleared
            else (UNSET if max_tokens is None else max_tokens),
        }

        async def work(database: Database) -> PersonaInfo:
            return await edit_persona(database, name, **changes)

        persona = with_database(workspace, db, work)
    term.out.print(text(f"updated persona {persona.name} ({persona.scope})"), soft_wrap=True)


def _prompt(system: str | None, system_file: Path | None) -> str | None:
    if system is not None and system_file is not None:
        raise InputError("give the system prompt with --system or --system-file, not both")
    if system_file is not None:
        try:
            return system_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot read {str(system_file)!r}: {exc}") from None
    return system


def _modules(value: str | None) -> list[str] | None:
    if value is None or value.strip().lower() == "all":
        return None
    return [m.strip() for m in value.split(",") if m.strip()]
