"""Model specs: turn ``"openai:gpt-4o"`` (or a ready :class:`Model`) into a model.

Forms: ``"test"`` (the scripted :class:`loopwright.testing.TestModel`), ``"openai:MODEL"`` and
``"openai-compatible:MODEL"`` (any server speaking OpenAI Chat Completions, at a base URL). A provider
is one entry in :data:`_PROVIDERS`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from loopwright.errors import ConfigError
from loopwright.models.base import Model

__all__ = ["KNOWN_FORMS", "resolve_model"]

BASE_URL_ENV = "LOOPWRIGHT_BASE_URL"

_Factory = Callable[[str, str | None, str | None], Model]


def _openai(model: str, base_url: str | None, api_key: str | None) -> Model:
    from loopwright.models.openai import OpenAIModel

    return OpenAIModel(model, base_url=base_url, api_key=api_key)


def _openai_compatible(model: str, base_url: str | None, api_key: str | None) -> Model:
    from loopwright.models.openai import OpenAIModel

    url = base_url or os.environ.get(BASE_URL_ENV)
    if not url:
        raise ConfigError(
            f"model 'openai-compatible:{model}' needs the server's base URL: pass base_url=... "
            f"(for example 'http://localhost:8000/v1') or set {BASE_URL_ENV}"
        )
    return OpenAIModel(model, base_url=url, api_key=api_key, provider="openai-compatible")


_PROVIDERS: dict[str, _Factory] = {
    "openai": _openai,
    "openai-compatible": _openai_compatible,
}

KNOWN_FORMS = ("test", *(f"{prefix}:MODEL" for prefix in _PROVIDERS))
"""The spec forms :func:`resolve_model` accepts, for messages and help text."""


def resolve_model(spec: str | Model, *, base_url: str | None = None, api_key: str | None = None) -> Model:
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
    return factory(name.strip(), base_url, api_key)
