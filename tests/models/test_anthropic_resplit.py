"""Chunk boundaries must not matter: every recorded Anthropic stream, re-split at random byte offsets, parses
the same. The ReplayServer sends each piece as its own HTTP chunk, so the client really receives the body in
those pieces, including 1-byte pieces that cut through UTF-8 sequences, ``event:``/``data:`` prefixes and the
blank-line separators.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator

import pytest

from loopwright.errors import ModelError
from loopwright.messages import UserMessage
from loopwright.models.anthropic import AnthropicModel
from loopwright.models.base import ModelEvent, ModelRequest
from loopwright.testing._server import ReplayResponse, ReplayServer, recording_responses
from tests.models.test_anthropic_stream import (
    RECORDINGS,
    AnthropicFactory,
    anthropic_models,
    anthropic_recordings,
)

SEEDS = (1, 2, 3, 5, 8, 13)
ONE_BYTE_FILES = (
    "anthropic-stream-thinking-then-tool-use-two-turn.json",
    "anthropic-stream-tool-use-split-input-json.json",
)
REQUEST = ModelRequest(system="", messages=[UserMessage(content="Hello")])


@pytest.fixture
async def make_model(ssl_context: ssl.SSLContext) -> AsyncIterator[AnthropicFactory]:
    async with anthropic_models(ssl_context) as make:
        yield make


def streaming_recordings() -> list[str]:
    return [
        name
        for name in anthropic_recordings()
        if json.loads((RECORDINGS / name).read_text(encoding="utf-8"))["streaming"]
    ]


Outcome = list[ModelEvent] | tuple[type[ModelError], str, bool]


async def outcome(model: AnthropicModel) -> Outcome:
    """Every event of one streamed response, or the error it raised."""
    events: list[ModelEvent] = []
    try:
        async for event in model.stream(REQUEST):
            events.append(event)
    except ModelError as exc:
        return type(exc), str(exc), exc.retryable
    return events


async def replay_all(responses: list[ReplayResponse], make_model: AnthropicFactory) -> list[Outcome]:
    with ReplayServer(responses) as server:
        model = make_model(server)
        results = [await outcome(model) for _ in responses]
        assert server.errors == []
    return results


def test_there_are_streams_to_split() -> None:
    assert len(streaming_recordings()) >= 8


@pytest.mark.parametrize("name", streaming_recordings())
async def test_random_splits_parse_identically(name: str, make_model: AnthropicFactory) -> None:
    originals = recording_responses(RECORDINGS / name)
    resplit = [r.resplit(seed) for seed in SEEDS for r in originals]
    assert all(len(r.pieces()) > 1 for r in resplit)
    results = await replay_all(originals + resplit, make_model)
    baseline, rest = results[: len(originals)], results[len(originals) :]
    assert any(isinstance(r, list) and r for r in baseline) or "error" in name
    for number, result in enumerate(rest):
        assert result == baseline[number % len(originals)], f"seed {SEEDS[number // len(originals)]}"


@pytest.mark.parametrize("name", ONE_BYTE_FILES)
async def test_one_byte_pieces_parse_identically(name: str, make_model: AnthropicFactory) -> None:
    originals = recording_responses(RECORDINGS / name)
    single_bytes = [r.resplit(piece_size=1) for r in originals]
    assert [len(r.pieces()) for r in single_bytes] == [len(r.body) for r in originals]
    results = await replay_all(originals + single_bytes, make_model)
    assert results[len(originals) :] == results[: len(originals)]
