"""``loopwright serve``: the gateway in front of the workspace's agent."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loopwright.cli._errors import reported
from loopwright.cli._options import ModelOpt, WorkspaceOpt, load_agent
from loopwright.cli._term import Terminal, text
from loopwright.gateway import DEFAULT_PORT, Gateway, GatewayConfig, check_bind
from loopwright.gateway import serve as serve_gateway

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
