"""The Starlette application: routes, the console's static files, the gateway's lifespan."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from loopwright.gateway._errors import ApiError
from loopwright.gateway._gateway import Gateway
from loopwright.gateway._http import error_response, rpc_endpoint, sse_endpoint
from loopwright.gateway._openai import chat_completions, list_models
from loopwright.gateway._ws import ws_endpoint

__all__ = ["create_app"]

CONSOLE = Path(__file__).parent / "console"

_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


async def _console(request: Request) -> Response:
    return FileResponse(CONSOLE / "index.html", headers=_SECURITY_HEADERS)


async def _not_found(request: Request, exc: Exception) -> Response:
    return error_response(ApiError(404, f"no route {request.url.path!r}"))


async def _method_not_allowed(request: Request, exc: Exception) -> Response:
    return JSONResponse(
        {
            "error": ApiError(
                405, f"{request.method} is not allowed on {request.url.path!r}", code="method_not_allowed"
            ).to_dict()
        },
        status_code=405,
    )


def create_app(gateway: Gateway) -> Starlette:
    """The ASGI app serving ``gateway``; its lifespan starts and drains the gateway."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with gateway.running():
            yield

    app = Starlette(
        routes=[
            Route("/", _console),
            Mount("/console", StaticFiles(directory=CONSOLE), name="console"),
            Route("/api/events", sse_endpoint, methods=["GET"]),
            Route("/api/{method}", rpc_endpoint, methods=["POST"]),
            WebSocketRoute("/ws", ws_endpoint),
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        ],
        exception_handlers={404: _not_found, 405: _method_not_allowed},
        lifespan=lifespan,
    )
    app.state.gateway = gateway
    return app
