"""Options shared by several commands, and building the agent they name."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from loopwright.agent import Agent
from loopwright.errors import ConfigError
from loopwright.models.base import Model
from loopwright.sessions import FileSessionStore
from loopwright.workspace import Workspace

__all__ = ["JsonOpt", "ModelOpt", "SessionOpt", "WorkspaceOpt", "load_agent", "open_store"]

WorkspaceOpt = Annotated[
    Path,
    typer.Option(
        "--workspace",
        "-w",
        metavar="DIR",
        help="The agent's folder (holding AGENT.md); the current folder by default.",
        file_okay=False,
        show_default=False,
    ),
]
SessionOpt = Annotated[
    str | None,
    typer.Option("--session", "-s", help="Session id to continue (or to create with this id).", metavar="ID"),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="Model spec overriding AGENT.md and LOOPWRIGHT_MODEL: test, openai:MODEL, openai-compatible:MODEL.",
        metavar="SPEC",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", metavar="", help="Print JSON instead of formatted text.")]


def load_agent(
    workspace: Path, *, model: Model | str | None = None, config: dict[str, Any] | None = None
) -> Agent:
    """The agent ``workspace/AGENT.md`` defines; flags given on the command line win over it."""
    return Agent.from_workspace(workspace, model=model, config=config or None)


def open_store(workspace: Path) -> FileSessionStore:
    """The session store of ``workspace``, for reading sessions (AGENT.md need not be valid)."""
    ws = Workspace(workspace)
    if not ws.root.is_dir():
        state = "is not a folder" if ws.root.exists() else "does not exist"
        raise ConfigError(f"workspace {str(ws.root)!r} {state}")
    if not ws.agent_md.exists() and not ws.sessions_dir.is_dir():
        raise ConfigError(
            f"{str(ws.root)!r} is not a loopwright workspace (no AGENT.md); "
            f"run `loopwright init {ws.root}` to make one"
        )
    return FileSessionStore(ws.sessions_dir)
