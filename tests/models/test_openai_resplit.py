"""Chunk boundaries must not matter: every recorded stream, re-split at random byte offsets, parses the same.

The ReplayServer sends each piece as its own HTTP chunk, so the client really receives the body in those
pieces (checked in test_replay_server.py), including 1-byte pieces that cut through UTF-8 sequences,
``data:`` prefixes and the blank-line separators.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from loopwright.errors import ModelError
from loopwright.messages import UserMessage
from loopwright.models.base import ModelEvent, ModelRequest
from loopwright.models.openai import OpenAIModel
from loopwright.testing._server import ReplayResponse, ReplayServer, recording_responses

ModelFactory = Callable[..., OpenAIModel]

RECORDINGS = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "provider-recordings"
CHAT_PREFIXES = ("openai-chat-", "openrouter-chat-", "groq-chat-")
SEEDS = (1, 2, 3, 5, 8, 13)
ONE_BYTE_FILES = (
    "openai-chat-stream-single-tool-two-turn.json",
    "openrouter-chat-stream-kimi-quirks-missing-arguments-key.json",
    "openrouter-chat-stream-kimi-quirks-repeated-args.json",
)
REQUEST = ModelRequest(system="", messages=[UserMessage(content="Hello")])


def streaming_recordings() -> list[str]:
    if not RECORDINGS.is_dir():
        raise FileNotFoundError(f"provider recordings not found at {str(RECORDINGS)!r}")
    chat = [p for p in sorted(RECORDINGS.glob("*.json")) if p.name.startswith(CHAT_PREFIXES)]
    return [p.name for p in chat if json.loads(p.read_text(encoding="utf-8"))["streaming"]]


Outcome = list[ModelEvent] | tuple[type[ModelError], str, bool]


async def outcome(model: OpenAIModel) -> Outcome:
    """Every event of one streamed response, or the error it raised."""
    events: list[ModelEvent] = []
    try:
        async for event in model.stream(REQUEST):
            events.append(event)
    except ModelError as exc:
        return type(exc), str(exc), exc.retryable
    return events


async def replay_all(responses: list[ReplayResponse], model_factory: ModelFactory) -> list[Outcome]:
    with ReplayServer(responses) as server:
        model = model_factory(server)
        results = [await outcome(model) for _ in responses]
        assert server.errors == []
    return results


def test_there_are_streams_to_split() -> None:
    assert len(streaming_recordings()) >= 7


@pytest.mark.parametrize("name", streaming_recordings())
async def test_random_splits_parse_identically(name: str, make_model: ModelFactory) -> None:
    originals = recording_responses(RECORDINGS / name)
    resplit = [r.resplit(seed) for seed in SEEDS for r in originals]
    assert all(len(r.pieces()) > 1 for r in resplit)
    results = await replay_all(originals + resplit, make_model)
    baseline, rest = results[: len(originals)], results[len(originals) :]
    assert any(isinstance(r, list) and r for r in baseline) or name.startswith("openai-chat-stream-error")
    for number, result in enumerate(rest):
        assert result == baseline[number % len(originals)], f"seed {SEEDS[number // len(originals)]}"


@pytest.mark.parametrize("name", ONE_BYTE_FILES)
async def test_one_byte_pieces_parse_identically(name: str, make_model: ModelFactory) -> None:
    originals = recording_responses(RECORDINGS / name)
    single_bytes = [r.resplit(piece_size=1) for r in originals]
    assert [len(r.pieces()) for r in single_bytes] == [len(r.body) for r in originals]
    results = await replay_all(originals + single_bytes, make_model)
    assert results[len(originals) :] == results[: len(originals)]


async def test_multibyte_text_split_inside_characters(make_model: ModelFactory) -> None:
    text = "Grüße aus Köln — 東京 🚀"
    chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
    body = f"data: {json.dumps(chunk, ensure_ascii=False)}\n\ndata: [DONE]\n\n".encode()
    results = await replay_all([ReplayResponse.sse(body).resplit(piece_size=1)], make_model)
    events = results[0]
    assert isinstance(events, list)
    assert "".join(e.text for e in events if e.type == "text") == text
