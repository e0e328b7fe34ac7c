"""Model specs: turn ``"openai:gpt-4o"`` (or a ready :class:`Model`) into a model.

Forms: ``"test"`` (the scripted :class:`loopwright.testing.TestModel`), ``"openai:MODEL"`` and
``"openai-compatible:MODEL"`` (any server speaking OpenAI Chat Completions, at a base URL). A provider
is one entry in :data:`_PROVIDERS`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Sequence

from loopwright.errors import ConfigError, ModelError
from loopwright.models.base import Model, ModelEvent, ModelRequest, ModelResponse

__all__ = ["KNOWN_FORMS", "resolve_chain", "resolve_model"]

BASE_URL_ENV = "LOOPWRIGHT_BASE_URL"

_Factory = Callable[[str, str | None, str | None, float], Model]


def _openai(model: str, base_url: str | None, api_key: str | None, timeout: float) -> Model:
    from loopwright.models.openai import OpenAIModel

    return OpenAIModel(model, base_url=base_url, api_key=api_key, timeout=timeout)


def _openai_compatible(model: str, base_url: str | None, api_key: str | None, timeout: float) -> Model:
    from loopwright.models.openai import OpenAIModel

    url = base_url or os.environ.get(BASE_URL_ENV)
    if not url:
        raise ConfigError(
            f"model 'openai-compatible:{model}' needs the server's base URL: pass base_url=... "
            f"(for example 'http://localhost:8000/v1') or set {BASE_URL_ENV}"
        )
    return OpenAIModel(model, base_url=url, api_key=api_key, provider="openai-compatible", timeout=timeout)


def _openai_responses(model: str, base_url: str | None, api_key: str | None, timeout: float) -> Model:
    from loopwright.models.openai_responses import OpenAIResponsesModel

    return OpenAIResponsesModel(model, base_url=base_url, api_key=api_key, timeout=timeout)


def _anthropic(model: str, base_url: str | None, api_key: str | None, timeout: float) -> Model:
    from loopwright.models.anthropic import AnthropicModel

    return AnthropicModel(model, base_url=base_url, api_key=api_key, timeout=timeout)


OLLAMA_DEFAULT = "http://127.0.0.1:11434"


def _ollama(model: str, base_url: str | None, api_key: str | None, timeout: float) -> Model:
    """A local Ollama server through its OpenAI-compatible endpoint (``OLLAMA_HOST`` or port 11434)."""
    from loopwright.models.openai import OpenAIModel

    if base_url is None:
        host = os.environ.get("OLLAMA_HOST") or OLLAMA_DEFAULT
        if "://" not in host:
            host = f"http://{host}"
        base_url = host.rstrip("/") + "/v1"
    return OpenAIModel(
        model, base_url=base_url, api_key=api_key or "ollama", provider="ollama", timeout=timeout
    )


_PROVIDERS: dict[str, _Factory] = {
    "openai": _openai,
    "openai-compatible": _openai_compatible,
    "openai-responses": _openai_responses,
    "anthropic": _anthropic,
    "ollama": _ollama,
}

KNOWN_FORMS = ("test", *(f"{prefix}:MODEL" for prefix in _PROVIDERS))
"""The spec forms :func:`resolve_model` accepts, for messages and help text."""


def resolve_model(
    spec: str | Model, *, base_url: str | None = None, api_key: str | None = None, timeout: float = 300.0
) -> Model:
    """The model a spec names; a :class:`Model` instance is returned as it is.

    ``base_url`` and ``api_key`` override the provider's defaults (``OPENAI_BASE_URL`` /
    ``OPENAI_API_KEY`` for ``openai:``; ``openai-compatible:`` requires a base URL, from the argument
    or ``LOOPWRIGHT_BASE_URL``). Raises :class:`~loopwright.errors.ConfigError` for an unknown form.
    """
    if not isinstance(spec, str):
        if isinstance(spec, Model):
            return spec
        raise ConfigError(f"a model must be a model spec string or a Model, not {type(spec).__name__!r}")
    forms = ", ".join(repr(f) for f in KNOWN_FORMS)
    text = spec.strip()
    if text == "test":
        from loopwright.testing import TestModel

        return TestModel()
    prefix, colon, name = text.partition(":")
    factory = _PROVIDERS.get(prefix.strip()) if colon else None
    if factory is None:
        raise ConfigError(f"unknown model {spec!r}: use one of {forms}")
    if not name.strip():
        raise ConfigError(f"model {spec!r} names no model after {prefix.strip() + ':'!r}: use one of {forms}")
    return factory(name.strip(), base_url, api_key, timeout)


def resolve_chain(
    specs: str | Model | Sequence[str | Model],
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = 300.0,
) -> tuple[Model, ...]:
    """A model and its fallbacks, in order. A model of the chain that cannot be set up (a missing key,
    say) is kept as an unavailable entry that fails at once, so the chain moves on to the next; if none
    can be set up, the first one's :class:`~loopwright.errors.ConfigError` is raised."""
    items = [specs] if isinstance(specs, str) or not isinstance(specs, Sequence) else list(specs)
    if not items:
        raise ConfigError("an agent needs at least one model")
    chain: list[Model] = []
    errors: list[ConfigError] = []
    for item in items:
        try:
            chain.append(resolve_model(item, base_url=base_url, api_key=api_key, timeout=timeout))
        except ConfigError as exc:
            if len(items) == 1:
                raise
            errors.append(exc)
            chain.append(_Unavailable(str(item), str(exc)))
    if len(errors) == len(items):
        raise errors[0]
    return tuple(chain)


class _Unavailable:
    """A chain entry that could not be set up: every call fails at once (not retryable)."""

    def __init__(self, spec: str, reason: str) -> None:
        self._spec = spec
        self._reason = reason

    @property
    def name(self) -> str:
        return self._spec

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        raise ModelError(
            f"unavailable: {self._reason}", provider=self._spec.partition(":")[0], model=self._spec
        )
        yield  # pragma: no cover - makes this an async generator

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise ModelError(
            f"unavailable: {self._reason}", provider=self._spec.partition(":")[0], model=self._spec
        )
