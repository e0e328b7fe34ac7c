"""Running a gateway under uvicorn: ``serve`` (signals, graceful drain) and ``ServerThread`` (tests,
examples, benchmarks: a real server on an ephemeral loopback port, in a background thread).

On SIGTERM or Ctrl-C the server does not stop at once: the gateway drains first (new messages get
503, running runs get the grace period, then are stopped with reason ``stopped``, waiting ones are
put back in the durable queue), and only then does uvicorn close its connections. A second signal
cuts the grace period short.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

import uvicorn

from loopwright.gateway._app import create_app
from loopwright.gateway._config import check_bind
from loopwright.gateway._gateway import Gateway

__all__ = ["ServerThread", "serve"]


class _Server(uvicorn.Server):
    """uvicorn's server, with the gateway's drain between the signal and the shutdown."""

    def __init__(
        self, config: uvicorn.Config, gateway: Gateway, on_ready: Callable[[str], None] | None
    ) -> None:
        super().__init__(config)
        self.gateway = gateway
        self.on_ready = on_ready
        self.ready = threading.Event()
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        if sockets is None:
            # Bound before the app starts, so the gateway (and its gateway_start hook) knows its port.
            sockets = [self.config.bind_socket()]
        self.gateway.address = (self.config.host, sockets[0].getsockname()[1])
        await super().serve(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit:
            return
        port = self.gateway.address[1] if self.gateway.address else self.config.port
        host = self.config.host
        self.url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
        if self.on_ready is not None:
            self.on_ready(self.url)
        self.ready.set()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Unlike uvicorn, do not re-raise the signal afterwards: a drained gateway exits with 0.
        loop = self._loop
        if loop is None or not self.started:
            self.should_exit = True
            return
        loop.call_soon_threadsafe(self._drain_then_exit)

    def _drain_then_exit(self) -> None:
        gateway = self.gateway
        if gateway.draining:
            gateway.hurry()
            return
        task = gateway.begin_drain()
        task.add_done_callback(lambda _: setattr(self, "should_exit", True))


def _uvicorn_config(gateway: Gateway, host: str, port: int, log_level: str) -> uvicorn.Config:
    return uvicorn.Config(
        create_app(gateway),
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,  # request lines are not needed, and nothing sensitive should leave
        ws_max_size=gateway.config.max_body_bytes,
        ws_per_message_deflate=False,  # small JSON frames: compressing them costs more CPU than it saves
        lifespan="on",
        timeout_graceful_shutdown=5,
        server_header=False,
    )


def serve(
    gateway: Gateway,
    *,
    log_level: str = "warning",
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``gateway`` on its configured address until SIGTERM / Ctrl-C, then drain and return."""
    check_bind(gateway.config)
    server = _Server(
        _uvicorn_config(gateway, gateway.config.host, gateway.config.port, log_level), gateway, on_ready
    )
    server.run()


class ServerThread:
    """A real gateway server on ``127.0.0.1`` and a free port, in a background thread.

    >>> with ServerThread(Gateway(Agent("test"))) as server:   # doctest: +SKIP
    ...     httpx.post(f"{server.url}/api/health")
    """

    def __init__(
        self, gateway: Gateway, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"
    ):
        check_bind(gateway.config)
        self.gateway = gateway
        self._server = _Server(_uvicorn_config(gateway, host, port, log_level), gateway, None)
        self._thread = threading.Thread(target=self._run, name="loopwright-gateway", daemon=True)
        self._error: BaseException | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def ws_url(self) -> str:
        return "ws" + self.url[len("http") :] + "/ws"

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported to the thread that started us
            self._error = exc
        finally:
            self._server.ready.set()

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        await self._server.serve()

    def start(self) -> ServerThread:
        self._thread.start()
        self._server.ready.wait(60)
        if self._error is not None or not self._server.url:
            self.stop()
            raise RuntimeError(f"the gateway did not start: {self._error!r}")
        return self

    def call(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on the server's event loop thread."""
        assert self.loop is not None
        self.loop.call_soon_threadsafe(fn)

    def drain(self) -> None:
        """Begin a graceful shutdown, as SIGTERM would; returns once new messages are refused."""
        begun = threading.Event()

        def begin() -> None:
            self._server._drain_then_exit()
            begun.set()

        self.call(begin)
        begun.wait(30)

    def stop(self, timeout: float = 60) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object | TracebackType | None) -> None:
        self.stop()
