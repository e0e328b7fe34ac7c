"""``loopwright init``: create a workspace and say what to do next."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from loopwright.cli._errors import reported
from loopwright.cli._term import Terminal, text
from loopwright.workspace import Workspace, init_workspace

__all__ = ["init"]


def init(
    ctx: typer.Context,
    directory: Annotated[
        Path,
        typer.Argument(
            metavar="DIR", help="Folder to make into a workspace (created if missing).", show_default=False
        ),
    ],
    name: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="Agent name (default: the folder's name).", show_default=False),
    ] = None,
    model: Annotated[
        str, typer.Option("--model", "-m", help="Model spec written to AGENT.md.", metavar="SPEC")
    ] = "test",
    force: Annotated[bool, typer.Option("--force", metavar="", help="Replace an existing AGENT.md.")] = False,
) -> None:
    """Create a workspace: AGENT.md, MEMORY.md, an example tool and a sessions folder.

    The default model, 'test', runs offline: try the agent before choosing a real model.
    """
    term: Terminal = ctx.obj
    with reported(term):
        ws = Workspace(directory)
        files = {
            ws.agent_md: "agent definition: settings and system prompt",
            ws.memory_md: "durable notes, read into every run",
            ws.tools_dir / "example.py": "an example tool (example:word_count)",
            ws.sessions_dir: "transcripts and run reports",
        }
        existed = {path: path.exists() for path in files}
        init_workspace(directory, name=name, model=model, force=force)

    out = term.out
    out.print(Text.assemble("Created workspace ", text(str(ws.root), "bold")), soft_wrap=True)
    width = max(len(_shown(ws, path)) for path in files)
    for path, what in files.items():
        if not existed[path]:
            state = ("created", "green")
        elif path == ws.agent_md:
            state = ("replaced", "yellow")
        else:
            state = ("kept", "dim")
        out.print(
            Text.assemble(
                "  ", (f"{state[0]:<9}", state[1]), text(f"{_shown(ws, path):<{width}}  "), (what, "dim")
            ),
            soft_wrap=True,
        )
    folder = shlex.quote(str(directory))
    out.print()
    out.print("Next, try:", style="bold")
    out.print(text(f'  loopwright run -w {folder} "What files are in this folder?"'), soft_wrap=True)
    out.print(text(f"  loopwright chat -w {folder}"), soft_wrap=True)
    out.print(text(f"Edit {ws.agent_md.name} to change the model, tools and system prompt.", "dim"))


def _shown(ws: Workspace, path: Path) -> str:
    shown = path.relative_to(ws.root).as_posix()
    return shown + "/" if path == ws.sessions_dir else shown
