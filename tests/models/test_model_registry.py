"""resolve_model: every spec form and every way a spec can be wrong."""

from __future__ import annotations

import pytest

from loopwright.errors import ConfigError
from loopwright.models._registry import KNOWN_FORMS, resolve_model
from loopwright.models.base import Model
from loopwright.models.openai import OpenAIModel
from loopwright.testing import TestModel


async def test_model_instance_passes_through() -> None:
    model = TestModel()
    assert resolve_model(model) is model
    assert isinstance(model, Model)


def test_test_spec() -> None:
    model = resolve_model("test")
    assert isinstance(model, TestModel)
    assert model.name == "test"


async def test_openai_spec_with_explicit_key_and_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env.example/v1")
    model = resolve_model("openai:gpt-4o", api_key="sk-1", base_url="http://127.0.0.1:8000/v1")
    assert isinstance(model, OpenAIModel)
    try:
        assert (model.name, model.provider, model.model) == ("openai:gpt-4o", "openai", "gpt-4o")
        assert str(model.client.base_url) == "http://127.0.0.1:8000/v1/"
        assert model.client.api_key == "sk-1"
        assert model.client.max_retries == 0
    finally:
        await model.aclose()


async def test_openai_spec_reads_the_sdk_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env.example/v1")
    model = resolve_model("openai:gpt-4o-mini")
    assert isinstance(model, OpenAIModel)
    try:
        assert str(model.client.base_url) == "http://env.example/v1/"
        assert model.client.api_key == "sk-env"
    finally:
        await model.aclose()


@pytest.mark.usefixtures("no_openai_env")
def test_openai_spec_without_any_key() -> None:
    with pytest.raises(ConfigError, match=r"openai model 'gpt-4o'.*OPENAI_API_KEY"):
        resolve_model("openai:gpt-4o")


@pytest.mark.usefixtures("no_openai_env")
async def test_openai_compatible_with_base_url_argument() -> None:
    model = resolve_model("openai-compatible:llama3.1:8b", base_url="http://127.0.0.1:11434/v1")
    assert isinstance(model, OpenAIModel)
    try:
        assert model.name == "openai-compatible:llama3.1:8b"
        assert (model.provider, model.model) == ("openai-compatible", "llama3.1:8b")
        assert str(model.client.base_url) == "http://127.0.0.1:11434/v1/"
        assert model.client.api_key == "not-needed"
    finally:
        await model.aclose()


async def test_openai_compatible_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPWRIGHT_BASE_URL", "http://127.0.0.1:8001/v1")
    model = resolve_model("openai-compatible:qwen", api_key="k")
    assert isinstance(model, OpenAIModel)
    try:
        assert str(model.client.base_url) == "http://127.0.0.1:8001/v1/"
        assert model.client.api_key == "k"
    finally:
        await model.aclose()


async def test_base_url_argument_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPWRIGHT_BASE_URL", "http://127.0.0.1:1/v1")
    model = resolve_model("openai-compatible:qwen", base_url="http://127.0.0.1:2/v1")
    assert isinstance(model, OpenAIModel)
    try:
        assert str(model.client.base_url) == "http://127.0.0.1:2/v1/"
    finally:
        await model.aclose()


def test_openai_compatible_without_base_url() -> None:
    with pytest.raises(ConfigError, match=r"needs the server's base URL.*base_url=.*LOOPWRIGHT_BASE_URL"):
        resolve_model("openai-compatible:llama3")


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("mistral:large", "unknown model 'mistral:large'"),
        ("gpt-4o", "unknown model 'gpt-4o'"),
        ("", "unknown model ''"),
        ("openai:", "names no model after 'openai:'"),
        ("openai:   ", "names no model after 'openai:'"),
        ("openai-compatible:", "names no model after 'openai-compatible:'"),
    ],
)
def test_bad_specs_list_the_known_forms(spec: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_model(spec)
    message = str(caught.value)
    assert problem in message
    for form in KNOWN_FORMS:
        assert repr(form) in message


def test_known_forms() -> None:
    assert KNOWN_FORMS == (
        "test",
        "openai:MODEL",
        "openai-compatible:MODEL",
        "openai-responses:MODEL",
        "anthropic:MODEL",
        "ollama:MODEL",
    )


def test_ollama_shortcut_points_at_the_local_server(monkeypatch: pytest.MonkeyPatch) -> None:
    model = resolve_model("ollama:llama3.1")
    assert model.name == "ollama:llama3.1"
    assert str(model.client.base_url) == "http://127.0.0.1:11434/v1/"  # type: ignore[attr-defined]
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box:8080")
    assert str(resolve_model("ollama:qwen").client.base_url) == "http://gpu-box:8080/v1/"  # type: ignore[attr-defined]


def test_not_a_spec_nor_a_model() -> None:
    with pytest.raises(ConfigError, match=r"not 'int'"):
        resolve_model(42)  # type: ignore[arg-type]
