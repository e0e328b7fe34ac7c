"""Helpers the provider tests share, so each provider's test files state only what is provider-specific.

- recordings: where the shared provider recordings live, loading them and reading their requests;
- turns: sending one request (streamed or not), checking tool calls and common error fields;
- streams: serving one SSE body through a ReplayServer and collecting the events into a response;
- chunk boundaries: replaying recorded responses re-split at random offsets or into 1-byte pieces;
- failures: the ModelError a request raises, HTTP status tables and their common assertions.

Tests pass models around as a ``ServedModel``: a callable that builds the model under test bound to a
ReplayServer (the ``make_model``, ``make_anthropic_model`` and ``make_responses_model`` fixtures).
"""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loopwright.errors import ModelError
from loopwright.messages import AssistantMessage, UserMessage
from loopwright.models._accumulate import StepAccumulator, complete_from_stream
from loopwright.models.anthropic import AnthropicModel
from loopwright.models.base import Model, ModelEvent, ModelRequest, ModelResponse
from loopwright.models.openai import OpenAIModel, ProviderHTTPError
from loopwright.models.openai_responses import OpenAIResponsesModel
from loopwright.testing import ReplayResponse, ReplayServer, recording_responses

RECORDINGS = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "provider-recordings"
"""The provider recordings shared between loopwright's implementations (``shared/`` beside the repo)."""

HELLO = ModelRequest(system="", messages=[UserMessage(content="Hello")])
"""The request tests send when only the response matters."""

CHAT_PREFIXES = ("openai-chat-", "openrouter-chat-", "groq-chat-")
"""The recordings of Chat Completions exchanges (OpenAI and OpenAI-compatible servers)."""

ModelFactory = Callable[..., OpenAIModel]
"""The ``make_model`` fixture: ``make_model(server, model="gpt-4o", **options)``."""

AnthropicFactory = Callable[..., AnthropicModel]
"""The ``make_anthropic_model`` fixture: ``make_anthropic_model(server, model="claude-test", **options)``."""

ResponsesFactory = Callable[..., OpenAIResponsesModel]
"""The ``make_responses_model`` fixture: ``make_responses_model(server, model="gpt-5")``."""

ServedModel = Callable[[ReplayServer], Model]
"""Builds the model under test, bound to a ReplayServer."""


# --- recordings ----------------------------------------------------------------------------------


def recording_names(*prefixes: str) -> list[str]:
    """Sorted names of the recordings whose names start with one of ``prefixes``.

    Fails loudly when the shared folder is missing or holds none of them, so a missing checkout
    cannot pass as zero parametrized tests.
    """
    if not RECORDINGS.is_dir():
        raise FileNotFoundError(
            f"provider recordings not found at {str(RECORDINGS)!r}: clone the shared/ folder beside the repo"
        )
    names = sorted(p.name for p in RECORDINGS.glob("*.json") if p.name.startswith(prefixes))
    if not names:
        raise FileNotFoundError(f"no recordings starting with {prefixes} in {str(RECORDINGS)!r}")
    return names


def load_recording(name: str) -> dict[str, Any]:
    """One recording file, parsed."""
    data: dict[str, Any] = json.loads((RECORDINGS / name).read_text(encoding="utf-8"))
    return data


def streaming_recordings(names: list[str]) -> list[str]:
    """Those of ``names`` whose recording is of streamed responses."""
    return [name for name in names if load_recording(name)["streaming"]]


def answered_interactions(recording: dict[str, Any]) -> list[dict[str, Any]]:
    """The interactions of a recording that got a response (a status), in order."""
    interactions: list[dict[str, Any]] = recording["interactions"]
    return [i for i in interactions if i["response"].get("status") is not None]


def request_json(interaction: dict[str, Any]) -> dict[str, Any] | None:
    """The recorded request body of one interaction as JSON, or None when it was not recorded."""
    request = interaction.get("request")
    if not request:
        return None
    if request.get("body_json") is not None:
        body: dict[str, Any] = request["body_json"]
        return body
    if request.get("body_text"):
        parsed: dict[str, Any] = json.loads(request["body_text"])
        return parsed
    return None


@dataclass(frozen=True)
class Digest:
    """Stands for a long string: equal to a string with this start, length and SHA-256 prefix."""

    head: str
    length: int
    sha256: str

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Digest):
            return (self.head, self.length, self.sha256) == (other.head, other.length, other.sha256)
        if not isinstance(other, str):
            return NotImplemented
        digest = hashlib.sha256(other.encode()).hexdigest()
        return other.startswith(self.head) and len(other) == self.length and digest.startswith(self.sha256)

    def __hash__(self) -> int:
        return hash((self.head, self.length, self.sha256))


# --- turns ---------------------------------------------------------------------------------------


async def run_turn(model: Model, request: ModelRequest, streaming: bool) -> ModelResponse:
    """One response: streamed and collected with ``complete_from_stream``, or from ``complete()``."""
    if streaming:
        return await complete_from_stream(model.stream(request))
    return await model.complete(request)


def assistant_turn(response: ModelResponse) -> AssistantMessage:
    """The history entry for ``response``, as the agent loop records it."""
    return AssistantMessage(
        content=response.content,
        tool_calls=response.tool_calls,
        thinking=response.thinking,
        model=response.model,
    )


def check_calls(response: ModelResponse, expected: list[tuple[str, str, Any]]) -> None:
    """The response's tool calls are ``expected``: (id, name, parsed arguments) in order."""
    assert [(c.id, c.name) for c in response.tool_calls] == [(i, n) for i, n, _ in expected]
    assert [json.loads(c.arguments) for c in response.tool_calls] == [a for _, _, a in expected]


@dataclass(frozen=True)
class Err:
    """A turn of a recording expected to fail."""

    type: type[ModelError]
    status: int | None
    retryable: bool
    says: str
    """A fragment of the error's message."""
    code: str | None = None
    retry_after: float | None = None


def check_error(error: ModelError, expected: Err, provider: str, model: str) -> None:
    """What every provider's error must get right: its type, status, retryability, text, and the
    provider and model it names (also at the start of its message). Codes and retry hints are checked
    by each provider's tests, as far as that provider reports them."""
    assert type(error) is expected.type
    assert (error.status, error.retryable) == (expected.status, expected.retryable)
    assert expected.says in str(error)
    assert (error.provider, error.model) == (provider, model)
    assert str(error).startswith(f"{provider} model {model!r} failed")


# --- streams -------------------------------------------------------------------------------------


async def stream_events(
    model_for: ServedModel, body: bytes, request: ModelRequest = HELLO
) -> list[ModelEvent]:
    """Every event of streaming ``request`` while the server answers with the SSE ``body``."""
    with ReplayServer([ReplayResponse.sse(body)]) as server:
        model = model_for(server)
        events = [event async for event in model.stream(request)]
        assert server.errors == []
    return events


def accumulate(events: list[ModelEvent]) -> ModelResponse:
    """The response that ``events`` add up to."""
    acc = StepAccumulator()
    for event in events:
        acc.add(event)
    return acc.response()


# --- chunk boundaries ----------------------------------------------------------------------------

SEEDS = (1, 2, 3, 5, 8, 13)
"""The random re-splits each recorded stream is replayed with."""

Outcome = list[ModelEvent] | tuple[type[ModelError], str, bool]
"""Every event of one streamed response, or the type, text and retryability of the error it raised."""


async def outcome(model: Model, request: ModelRequest = HELLO) -> Outcome:
    """Every event of one streamed response, or the error it raised."""
    events: list[ModelEvent] = []
    try:
        async for event in model.stream(request):
            events.append(event)
    except ModelError as exc:
        return type(exc), str(exc), exc.retryable
    return events


async def replay_all(responses: list[ReplayResponse], model_for: ServedModel) -> list[Outcome]:
    """The outcome of each of ``responses``, served in order to one model."""
    with ReplayServer(responses) as server:
        model = model_for(server)
        results = [await outcome(model) for _ in responses]
        assert server.errors == []
    return results


def has_events(outcome: Outcome) -> bool:
    """The outcome is a stream with at least one event (not an error, not empty)."""
    return isinstance(outcome, list) and bool(outcome)


async def check_random_splits(name: str, model_for: ServedModel) -> list[Outcome]:
    """Replay a recording's responses as recorded, then re-split at random offsets with each of SEEDS
    (every body in more than one piece): each re-split parses exactly as its original. Returns the
    outcomes of the originals, for the caller's own checks of them."""
    originals = recording_responses(RECORDINGS / name)
    resplit = [r.resplit(seed) for seed in SEEDS for r in originals]
    assert all(len(r.pieces()) > 1 for r in resplit)
    results = await replay_all(originals + resplit, model_for)
    baseline, rest = results[: len(originals)], results[len(originals) :]
    for number, result in enumerate(rest):
        assert result == baseline[number % len(originals)], f"seed {SEEDS[number // len(originals)]}"
    return baseline


async def check_one_byte_pieces(name: str, model_for: ServedModel) -> None:
    """A recording's responses sent one byte per HTTP chunk parse exactly as sent whole."""
    originals = recording_responses(RECORDINGS / name)
    single_bytes = [r.resplit(piece_size=1) for r in originals]
    assert [len(r.pieces()) for r in single_bytes] == [len(r.body) for r in originals]
    results = await replay_all(originals + single_bytes, model_for)
    assert results[len(originals) :] == results[: len(originals)]


# --- failures ------------------------------------------------------------------------------------


async def failure(model: Model, *, stream: bool = True, request: ModelRequest = HELLO) -> ModelError:
    """The ModelError that sending ``request`` raises, streamed (and collected) or through complete()."""
    with pytest.raises(ModelError) as caught:
        await run_turn(model, request, stream)
    return caught.value


async def events_then_failure(
    model: Model, request: ModelRequest = HELLO
) -> tuple[list[ModelEvent], ModelError]:
    """The events a stream yields before it fails, and the ModelError it fails with."""
    seen: list[ModelEvent] = []
    with pytest.raises(ModelError) as caught:
        async for event in model.stream(request):
            seen.append(event)
    return seen, caught.value


async def served_failure(
    model_for: ServedModel, response: ReplayResponse, *, stream: bool = True
) -> ModelError:
    """The ModelError a model raises when the server answers with ``response``."""
    with ReplayServer([response]) as server:
        return await failure(model_for(server), stream=stream)


async def stream_failure(model_for: ServedModel, body: bytes) -> ModelError:
    """The ModelError a streamed request raises when the server answers 200 with the SSE ``body``."""
    return await served_failure(model_for, ReplayResponse.sse(body))


def openai_error_body(message: str, type_: str = "invalid_request_error", code: Any = None) -> dict[str, Any]:
    """An OpenAI-style error envelope (Chat Completions and Responses alike)."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def unused_port() -> int:
    """A local port that nothing listens on (bound once, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def refused_failure(model: OpenAIModel | AnthropicModel) -> ModelError:
    """The ModelError of a request to a model whose server refuses the connection; closes the model."""
    try:
        return await failure(model)
    finally:
        await model.aclose()


RETRYABLE_BY_STATUS = {
    400: False,
    401: False,
    403: False,
    404: False,
    408: True,
    409: True,
    413: False,
    422: False,
    429: True,
    500: True,
    502: True,
    503: True,
    504: True,
    529: True,
}
"""Whether an HTTP error status is worth retrying, the same for every provider."""


async def check_openai_http_status(
    model_for: ServedModel, status: int, retryable: bool, *, stream: bool
) -> None:
    """An OpenAI-style error response with ``status`` (and code ``code_{status}``) becomes a
    ProviderHTTPError with that status, code, type and message, retryable as ``retryable`` says."""
    body = openai_error_body(f"provider says {status}", code=f"code_{status}")
    error = await served_failure(model_for, ReplayResponse.json_body(body, status=status), stream=stream)
    check_http_error(
        error, status=status, retryable=retryable, code=f"code_{status}", error_type="invalid_request_error"
    )


def check_http_error(error: ModelError, *, status: int, retryable: bool, code: str, error_type: str) -> None:
    """``error`` is the ProviderHTTPError of an error response with this status, code and type, whose
    message was ``provider says {status}``."""
    assert type(error) is ProviderHTTPError
    assert (error.status, error.retryable, error.code, error.error_type) == (
        status,
        retryable,
        code,
        error_type,
    )
    assert f"provider says {status}" in str(error)
