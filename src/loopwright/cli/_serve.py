"""``loopwright serve``: the gateway in front of the workspace's agent."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from loopwright.agent import Agent
from loopwright.cli._errors import reported
from loopwright.cli._options import ModelOpt, WorkspaceOpt, load_agent
from loopwright.cli._term import Terminal, text
from loopwright.errors import ConfigError
from loopwright.gateway import DEFAULT_PORT, Gateway, GatewayConfig, check_bind
from loopwright.gateway import serve as serve_gateway

if TYPE_CHECKING:
    from loopwright.scaleout import ScaleOut

__all__ = ["serve"]


def serve(
    ctx: typer.Context,
    workspace: WorkspaceOpt = Path("."),
    host: Annotated[
        str, typer.Option(help="Address to listen on. Anything but loopback needs a token.", metavar="ADDR")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0: any free port).", metavar="PORT")] = DEFAULT_PORT,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="LOOPWRIGHT_GATEWAY_TOKEN",
            help="Bearer token every request must carry (prefer the environment variable).",
            metavar="TOKEN",
            show_default=False,
        ),
    ] = None,
    grace: Annotated[
        float,
        typer.Option(help="Seconds running runs get on SIGTERM before they are stopped.", metavar="SECONDS"),
    ] = 30.0,
    allow_origin: Annotated[
        list[str] | None,
        typer.Option(help="Another origin whose pages may use the WebSocket (repeatable).", metavar="ORIGIN"),
    ] = None,
    model: ModelOpt = None,
    database: Annotated[
        str | None,
        typer.Option(
            envvar="LOOPWRIGHT_DATABASE_URL",
            help="PostgreSQL URL shared by several gateways (sessions, run queue, events); "
            "'?schema=NAME' picks a schema. See docs/deploy.md.",
            metavar="URL",
            show_default=False,
        ),
    ] = None,
    concurrency: Annotated[
        int, typer.Option(help="With --database: runs this gateway executes at once.", metavar="N", min=1)
    ] = 16,
    lease: Annotated[
        float,
        typer.Option(
            help="With --database: seconds before a silent gateway's runs are taken over.",
            metavar="SECONDS",
            min=0.5,
        ),
    ] = 30.0,
) -> None:
    """Serve the workspace's agent: RPC, event streams, an OpenAI-compatible API and a web console.

    Listens on 127.0.0.1:8765 by default; open the address in a browser for the console. SIGTERM or
    Ctrl-C drains: new messages are refused, running runs get --grace seconds, messages not yet
    started run at the next start.
    """
    term: Terminal = ctx.obj
    with reported(term):
        config = GatewayConfig(
            host=host, port=port, token=token or None, grace=grace, allowed_origins=tuple(allow_origin or ())
        )
        check_bind(config)
        if database:
            agent, node = _scaled(
                workspace, model, database, concurrency=concurrency, lease=lease, grace=grace
            )
            gateway = Gateway({agent.name: agent}, config=config, scaleout=node)
        else:
            agent = load_agent(workspace, model=model)
            gateway = Gateway({agent.name: agent}, config=config)

        def ready(url: str) -> None:
            auth = "bearer token required" if config.token else "no token (loopback only)"
            term.out.print(
                text(f"loopwright gateway on {url} · agent {agent.name!r} · {auth}"), soft_wrap=True
            )
            term.out.file.flush()

        serve_gateway(gateway, on_ready=ready)
        term.out.print(text("gateway stopped"))


def _scaled(
    workspace: Path, model: ModelOpt, url: str, *, concurrency: int, lease: float, grace: float
) -> tuple[Agent, ScaleOut]:
    """The workspace's agent with its sessions and locks in PostgreSQL, and this gateway's node."""
    # imported here: SQLAlchemy and asyncpg load only for a gateway that uses a database
    from loopwright.lanes.postgres import PostgresSessionLocks
    from loopwright.scaleout import ScaleOut, migrate
    from loopwright.sessions.sql import SQLSessionStore
    from loopwright.sql import Database

    probe = Database(url)
    if probe.dialect != "postgresql":
        raise ConfigError(
            f"--database needs PostgreSQL (several gateways share it), not {probe.dialect}: "
            "give a postgresql:// URL, or leave it out to keep sessions in the workspace"
        )

    async def prepare() -> None:
        try:
            await migrate(probe)
        finally:
            await probe.aclose()

    asyncio.run(prepare())
    # Used from the server's event loop. A run holds at most one store connection at a time.
    db = Database(url, pool_size=min(5, concurrency), max_overflow=max(0, concurrency - 5))
    agent = Agent.from_workspace(
        workspace, model=model, store=SQLSessionStore(db), locks=PostgresSessionLocks(db)
    )
    node = ScaleOut(db, {agent.name: agent}, concurrency=concurrency, lease=lease, grace=grace)
    return agent, node
