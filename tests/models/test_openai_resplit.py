"""Chunk boundaries must not matter: every recorded stream, re-split at random byte offsets, parses the same.

The ReplayServer sends each piece as its own HTTP chunk, so the client really receives the body in those
pieces (checked in test_replay_server.py), including 1-byte pieces that cut through UTF-8 sequences,
``data:`` prefixes and the blank-line separators.
"""

from __future__ import annotations

import json

import pytest

from loopwright.testing import ReplayResponse
from tests.models._shared import (
    CHAT_PREFIXES,
    ModelFactory,
    check_one_byte_pieces,
    check_random_splits,
    has_events,
    recording_names,
    replay_all,
    streaming_recordings,
)

STREAMS = streaming_recordings(recording_names(*CHAT_PREFIXES))
ONE_BYTE_FILES = (
    "openai-chat-stream-single-tool-two-turn.json",
    "openrouter-chat-stream-kimi-quirks-missing-arguments-key.json",
    "openrouter-chat-stream-kimi-quirks-repeated-args.json",
)


def test_there_are_streams_to_split() -> None:
    assert len(STREAMS) >= 7


@pytest.mark.parametrize("name", STREAMS)
async def test_random_splits_parse_identically(name: str, make_model: ModelFactory) -> None:
    baseline = await check_random_splits(name, make_model)
    assert any(has_events(r) for r in baseline) or name.startswith("openai-chat-stream-error")


@pytest.mark.parametrize("name", ONE_BYTE_FILES)
async def test_one_byte_pieces_parse_identically(name: str, make_model: ModelFactory) -> None:
    await check_one_byte_pieces(name, make_model)


async def test_multibyte_text_split_inside_characters(make_model: ModelFactory) -> None:
    text = "Grüße aus Köln — 東京 🚀"
    chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
    body = f"data: {json.dumps(chunk, ensure_ascii=False)}\n\ndata: [DONE]\n\n".encode()
    results = await replay_all([ReplayResponse.sse(body).resplit(piece_size=1)], make_model)
    events = results[0]
    assert isinstance(events, list)
    assert "".join(e.text for e in events if e.type == "text") == text
