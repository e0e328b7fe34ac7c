"""Fixtures for provider tests: models bound to a ReplayServer, and an environment without OpenAI keys."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar

import anthropic
import openai
import pytest

from loopwright.models.anthropic import AnthropicModel
from loopwright.models.openai import OpenAIModel
from loopwright.models.openai_responses import OpenAIResponsesModel
from loopwright.testing import ReplayServer
from tests.models._shared import AnthropicFactory, ModelFactory, ResponsesFactory


@pytest.fixture
def no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OpenAI key or base URL in the environment (tests/conftest.py sets both to block real requests)."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def ssl_context() -> ssl.SSLContext:
    """One TLS context for every test client: loading the CA bundle costs 50+ ms per client here."""
    return ssl.create_default_context()


class Closable(Protocol):
    async def aclose(self) -> None: ...


M = TypeVar("M", bound=Closable)


@asynccontextmanager
async def closing_factory(build: Callable[..., M]) -> AsyncIterator[Callable[..., M]]:
    """``build``, wrapped so that every model it builds is closed on the way out."""
    models: list[M] = []

    def make(*args: Any, **options: Any) -> M:
        models.append(build(*args, **options))
        return models[-1]

    try:
        yield make
    finally:
        for built in models:
            await built.aclose()


def sdk_client(
    client_class: Callable[..., Any],
    http_client_class: Callable[..., Any],
    ssl_context: ssl.SSLContext,
    base_url: str,
    options: dict[str, Any],
) -> Any:
    """An SDK client built as the models build theirs (no SDK retries, the model's timeout), with the
    test key and the shared TLS context. Takes ``api_key`` and ``base_url`` out of the model's
    ``options`` and sets its ``timeout`` (600 s unless given)."""
    timeout = options.setdefault("timeout", 600.0)
    return client_class(
        api_key=options.pop("api_key", "test-key"),
        base_url=options.pop("base_url", base_url),
        timeout=timeout,
        max_retries=0,
        http_client=http_client_class(verify=ssl_context, timeout=timeout),
    )


@pytest.fixture
async def make_model(ssl_context: ssl.SSLContext) -> AsyncIterator[ModelFactory]:
    """Build OpenAIModels pointed at a ReplayServer; their HTTP clients are closed after the test.

    The client is built as OpenAIModel builds it (no SDK retries, the model's timeout), sharing one TLS
    context. Tests of OpenAIModel's own client set-up construct it directly.
    """

    def build(server: ReplayServer, model: str = "gpt-4o", **options: Any) -> OpenAIModel:
        sdk = openai.AsyncOpenAI, openai.DefaultAsyncHttpxClient
        return OpenAIModel(model, client=sdk_client(*sdk, ssl_context, server.base_url, options), **options)

    async with closing_factory(build) as make:
        yield make


@pytest.fixture
async def make_anthropic_model(ssl_context: ssl.SSLContext) -> AsyncIterator[AnthropicFactory]:
    """Build AnthropicModels pointed at a ReplayServer, as AnthropicModel builds its client (no SDK
    retries, the model's timeout), sharing one TLS context; their clients are closed after the test."""

    def build(server: ReplayServer, model: str = "claude-test", **options: Any) -> AnthropicModel:
        sdk = anthropic.AsyncAnthropic, anthropic.DefaultAsyncHttpxClient
        return AnthropicModel(model, client=sdk_client(*sdk, ssl_context, server.url, options), **options)

    async with closing_factory(build) as make:
        yield make


@pytest.fixture
def make_responses_model(make_model: ModelFactory) -> ResponsesFactory:
    """Build OpenAIResponsesModels pointed at a ReplayServer, on make_model's clients (closed after the test)."""

    def make(server: ReplayServer, model: str = "gpt-5") -> OpenAIResponsesModel:
        return OpenAIResponsesModel(model, client=make_model(server, model).client)

    return make


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    """An empty ReplayServer: queue responses with ``server.add(...)``."""
    with ReplayServer() as replay:
        yield replay
