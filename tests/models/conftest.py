"""Fixtures for provider tests: models bound to a ReplayServer, and an environment without OpenAI keys."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

import pytest
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from loopwright.models.openai import OpenAIModel
from loopwright.testing._server import ReplayServer


@pytest.fixture
def no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OpenAI key or base URL in the environment (tests/conftest.py sets both to block real requests)."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)


class ModelFactory(Protocol):
    def __call__(self, server: ReplayServer, model: str = ..., **options: Any) -> OpenAIModel: ...


@pytest.fixture(scope="session")
def ssl_context() -> ssl.SSLContext:
    """One TLS context for every test client: loading the CA bundle costs 50+ ms per client here."""
    return ssl.create_default_context()


@pytest.fixture
async def make_model(ssl_context: ssl.SSLContext) -> AsyncIterator[ModelFactory]:
    """Build OpenAIModels pointed at a ReplayServer; their HTTP clients are closed after the test.

    The client is built as OpenAIModel builds it (no SDK retries, the model's timeout), sharing one TLS
    context. Tests of OpenAIModel's own client set-up construct it directly.
    """
    models: list[OpenAIModel] = []

    def make(server: ReplayServer, model: str = "gpt-4o", **options: Any) -> OpenAIModel:
        timeout = options.pop("timeout", 600.0)
        client = AsyncOpenAI(
            api_key=options.pop("api_key", "test-key"),
            base_url=server.base_url,
            timeout=timeout,
            max_retries=0,
            http_client=DefaultAsyncHttpxClient(verify=ssl_context, timeout=timeout),
        )
        built = OpenAIModel(model, client=client, timeout=timeout, **options)
        models.append(built)
        return built

    yield make
    for built in models:
        await built.aclose()


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    """An empty ReplayServer: queue responses with ``server.add(...)``."""
    with ReplayServer() as replay:
        yield replay
