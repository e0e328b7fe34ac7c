from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

import httpx
import pytest

from loopwright import Agent
from loopwright.gateway import Gateway, GatewayConfig, ServerThread
from tests.gateway.support import Gate, agents

MakeServer = Callable[..., ServerThread]


@pytest.fixture
def gate() -> Iterator[Gate]:
    gate = Gate()
    yield gate
    gate.open()


@pytest.fixture
def make_server(gate: Gate) -> Iterator[MakeServer]:
    started: list[ServerThread] = []

    def make(config: GatewayConfig | None = None, served: dict[str, Agent] | None = None) -> ServerThread:
        gateway = Gateway(served or agents(gate), config=config or GatewayConfig(grace=5))
        server = ServerThread(gateway).start()
        started.append(server)
        return server

    yield make
    gate.open()
    for server in started:
        server.stop()


@pytest.fixture
def server(make_server: MakeServer) -> ServerThread:
    return make_server()


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        yield client
