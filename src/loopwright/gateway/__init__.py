"""The gateway: ``loopwright serve``. RPC over HTTP and WebSocket, event streams, an
OpenAI-compatible endpoint and a web console in front of one or more agents. See docs/gateway.md."""

from loopwright.gateway._app import create_app
from loopwright.gateway._config import DEFAULT_PORT, MAX_BODY_BYTES, GatewayConfig, check_bind
from loopwright.gateway._errors import ApiError
from loopwright.gateway._gateway import Gateway
from loopwright.gateway._server import ServerThread, serve

__all__ = [
    "DEFAULT_PORT",
    "MAX_BODY_BYTES",
    "ApiError",
    "Gateway",
    "GatewayConfig",
    "ServerThread",
    "check_bind",
    "create_app",
    "serve",
]
