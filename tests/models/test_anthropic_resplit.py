"""Chunk boundaries must not matter: every recorded Anthropic stream, re-split at random byte offsets, parses
the same. The ReplayServer sends each piece as its own HTTP chunk, so the client really receives the body in
those pieces, including 1-byte pieces that cut through UTF-8 sequences, ``event:``/``data:`` prefixes and the
blank-line separators.
"""

from __future__ import annotations

import pytest

from tests.models._shared import (
    AnthropicFactory,
    check_one_byte_pieces,
    check_random_splits,
    has_events,
    recording_names,
    streaming_recordings,
)

STREAMS = streaming_recordings(recording_names("anthropic-"))
ONE_BYTE_FILES = (
    "anthropic-stream-thinking-then-tool-use-two-turn.json",
    "anthropic-stream-tool-use-split-input-json.json",
)


def test_there_are_streams_to_split() -> None:
    assert len(STREAMS) >= 8


@pytest.mark.parametrize("name", STREAMS)
async def test_random_splits_parse_identically(name: str, make_anthropic_model: AnthropicFactory) -> None:
    baseline = await check_random_splits(name, make_anthropic_model)
    assert any(has_events(r) for r in baseline) or "error" in name


@pytest.mark.parametrize("name", ONE_BYTE_FILES)
async def test_one_byte_pieces_parse_identically(name: str, make_anthropic_model: AnthropicFactory) -> None:
    await check_one_byte_pieces(name, make_anthropic_model)
