"""A small real MCP server (the `mcp` SDK's MCPServer) for tests and the docs example.

    python demo_server.py stdio
    python demo_server.py http      # prints "PORT <n>" once it listens on 127.0.0.1

Over HTTP, when DEMO_TOKEN is set, every request must carry "Authorization: Bearer $DEMO_TOKEN".
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys

from mcp.server.mcpserver import Image, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("demo")

# The smallest valid PNG (1x1 pixel), for the image-content case.
_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


@server.tool(annotations=ToolAnnotations(idempotent_hint=True, read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Repeat the text."""
    return " ".join([text] * times)


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ValueError(message)


@server.tool()
async def sleep(seconds: float) -> str:
    """Wait, then answer."""
    await asyncio.sleep(seconds)
    return "slept"


@server.tool()
def show_env() -> str:
    """The names and values of the server's environment, as JSON."""
    return json.dumps(dict(os.environ), sort_keys=True)


@server.tool()
def crash(code: int) -> str:
    """Exit the server process at once."""
    sys.stderr.write(f"demo server: crashing with code {code} on request\n")
    sys.stderr.flush()
    os._exit(code)


@server.tool()
def picture() -> Image:
    """A tiny PNG."""
    return Image(data=_PNG, format="png")


@server.tool(name="dotted.name")
def dotted() -> str:
    """A tool whose name has a dot."""
    return "dotted"


def _serve_http() -> None:
    import uvicorn
    from starlette.responses import PlainTextResponse
    from starlette.types import ASGIApp, Receive, Scope, Send

    app = server.streamable_http_app()
    token = os.environ.get("DEMO_TOKEN")

    def guarded(inner: ASGIApp) -> ASGIApp:
        async def check(scope: Scope, receive: Receive, send: Send) -> None:
            if token and scope["type"] == "http":
                headers = dict(scope["headers"])
                if headers.get(b"authorization") != f"Bearer {token}".encode():
                    await PlainTextResponse("missing or wrong token", status_code=401)(scope, receive, send)
                    return
            await inner(scope, receive, send)

        return check

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(os.environ.get("DEMO_PORT", "0"))))
    sock.listen(64)
    print(f"PORT {sock.getsockname()[1]}", flush=True)  # connections queue in the backlog from now on
    config = uvicorn.Config(guarded(app), log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:
        _serve_http()
    else:
        server.run("stdio")
