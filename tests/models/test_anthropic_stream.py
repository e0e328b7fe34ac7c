"""AnthropicModel: stream events beyond the recordings, and the SSE builders the other Anthropic tests share.

The builders make Anthropic Messages SSE bodies (``event:`` + ``data:`` lines, as the API sends them).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwright.messages import Thinking, ToolCall, Usage
from loopwright.models._anthropic_stream import StreamState
from loopwright.models.base import (
    ModelEvent,
    StreamFinish,
    TextDelta,
    ThinkingDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    UsageUpdate,
)
from loopwright.testing import ReplayResponse, ReplayServer
from tests.models._shared import HELLO, AnthropicFactory, accumulate, stream_events

# --- Anthropic SSE bodies ------------------------------------------------------------------------


def sse(*payloads: dict[str, Any], event_lines: bool = True) -> bytes:
    """An SSE body: one event per payload, named after its ``type`` unless ``event_lines`` is off."""
    events = [
        (f"event: {p['type']}\n" if event_lines else "") + f"data: {json.dumps(p, ensure_ascii=False)}"
        for p in payloads
    ]
    return ("\n\n".join(events) + "\n\n").encode()


def message_start(
    input_tokens: int = 10, *, cache_read: int = 0, cache_write: int = 0, model: str = "claude-test"
) -> dict[str, Any]:
    usage = {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": cache_read,
        "output_tokens": 1,
    }
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": []}
    return {"type": "message_start", "message": {**message, "stop_reason": None, "usage": usage}}


def message_end(
    stop_reason: str | None = "end_turn", output_tokens: int = 5, **usage: int
) -> list[dict[str, Any]]:
    delta = {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None}}
    return [{**delta, "usage": {"output_tokens": output_tokens, **usage}}, {"type": "message_stop"}]


def text_block(index: int, *pieces: str) -> list[dict[str, Any]]:
    start = {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
    deltas = [
        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}
        for p in pieces
    ]
    return [start, *deltas, {"type": "content_block_stop", "index": index}]


def thinking_block(index: int, *pieces: str, signature: str = "sig") -> list[dict[str, Any]]:
    block = {"type": "thinking", "thinking": "", "signature": ""}
    start = {"type": "content_block_start", "index": index, "content_block": block}
    deltas = [
        {"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": p}}
        for p in pieces
    ]
    signed = {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "signature_delta", "signature": signature},
    }
    return [start, *deltas, signed, {"type": "content_block_stop", "index": index}]


def redacted_block(index: int, data: str) -> list[dict[str, Any]]:
    block = {"type": "redacted_thinking", "data": data}
    return [
        {"type": "content_block_start", "index": index, "content_block": block},
        {"type": "content_block_stop", "index": index},
    ]


def tool_block(
    index: int,
    call_id: str,
    name: str,
    *parts: str,
    kind: str = "tool_use",
    input: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    block = {"type": kind, "id": call_id, "name": name, "input": input or {}}
    start = {"type": "content_block_start", "index": index, "content_block": block}
    deltas = [
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": p},
        }
        for p in parts
    ]
    return [start, *deltas, {"type": "content_block_stop", "index": index}]


def server_result_block(index: int, tool_use_id: str) -> list[dict[str, Any]]:
    block = {
        "type": "web_search_tool_result",
        "tool_use_id": tool_use_id,
        "content": [{"type": "web_search_result"}],
    }
    return [
        {"type": "content_block_start", "index": index, "content_block": block},
        {"type": "content_block_stop", "index": index},
    ]


def stream_body(*blocks: list[dict[str, Any]], stop_reason: str | None = "end_turn", **options: Any) -> bytes:
    payloads = [message_start(), *(p for block in blocks for p in block), *message_end(stop_reason)]
    return sse(*payloads, **options)


# --- stream events -------------------------------------------------------------------------------


async def test_event_order_for_text_thinking_and_tool_calls(make_anthropic_model: AnthropicFactory) -> None:
    body = stream_body(
        thinking_block(0, "Let me ", "check.", signature="sig-1"),
        text_block(1, "Checking", "..."),
        tool_block(2, "toolu_a", "get_weather", '{"city"', ': "Oslo"}'),
        stop_reason="tool_use",
    )
    events = await stream_events(make_anthropic_model, body)
    usage = Usage(input_tokens=10, output_tokens=1, requests=1)
    assert events == [
        UsageUpdate(usage),
        ThinkingDelta("Let me ", block=0),
        ThinkingDelta("check.", block=0),
        ThinkingDelta(signature="sig-1", block=0),
        TextDelta("Checking"),
        TextDelta("..."),
        ToolCallStart(0, "toolu_a", "get_weather"),
        ToolCallArgsDelta(0, '{"city"'),
        ToolCallArgsDelta(0, ': "Oslo"}'),
        UsageUpdate(Usage(input_tokens=10, output_tokens=5, requests=1)),
        StreamFinish("tool_calls", raw_reason="tool_use", model="claude-test"),
    ]


async def test_tool_indexes_run_over_tool_calls_only(make_anthropic_model: AnthropicFactory) -> None:
    body = stream_body(
        text_block(0, "First"),
        tool_block(1, "toolu_1", "a", '{"n": 1}'),
        thinking_block(2, "hmm"),
        tool_block(3, "toolu_2", "b", "", '{"n": 2}'),
        redacted_block(4, "opaque"),
        tool_block(5, "toolu_3", "c", ""),
        stop_reason="tool_use",
    )
    events = await stream_events(make_anthropic_model, body)
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert starts == [
        ToolCallStart(0, "toolu_1", "a"),
        ToolCallStart(1, "toolu_2", "b"),
        ToolCallStart(2, "toolu_3", "c"),
    ]
    blocks = [(e.block, e.text, e.signature, e.redacted) for e in events if isinstance(e, ThinkingDelta)]
    assert blocks == [(0, "hmm", None, None), (0, "", "sig", None), (1, "", None, "opaque")]
    response = accumulate(events)
    assert response.tool_calls == (
        ToolCall(id="toolu_1", name="a", arguments='{"n": 1}'),
        ToolCall(id="toolu_2", name="b", arguments='{"n": 2}'),
        ToolCall(id="toolu_3", name="c", arguments="{}"),
    )
    assert response.thinking == (Thinking(text="hmm", signature="sig"), Thinking(redacted="opaque"))


async def test_server_tools_are_not_our_tool_calls(make_anthropic_model: AnthropicFactory) -> None:
    body = stream_body(
        text_block(0, "Searching."),
        tool_block(1, "srvtoolu_1", "web_search", '{"query": ', '"x"}', kind="server_tool_use"),
        server_result_block(2, "srvtoolu_1"),
        text_block(3, "Found it", ": "),
        text_block(4, "cited text"),
        text_block(5, " and more."),
        tool_block(6, "toolu_9", "save", '{"ok": true}'),
        stop_reason="tool_use",
    )
    response = accumulate(await stream_events(make_anthropic_model, body))
    # Text a server tool separates becomes a paragraph; text split around citations joins as it is.
    assert response.content == "Searching.\n\nFound it: cited text and more."
    assert response.tool_calls == (ToolCall(id="toolu_9", name="save", arguments='{"ok": true}'),)


async def test_no_paragraph_break_where_whitespace_already_separates(
    make_anthropic_model: AnthropicFactory,
) -> None:
    body = stream_body(
        text_block(0, "Line one\n"),
        tool_block(1, "srvtoolu_1", "web_search", "{}", kind="server_tool_use"),
        text_block(2, "Line two"),
    )
    assert accumulate(await stream_events(make_anthropic_model, body)).content == "Line one\nLine two"


async def test_tool_input_given_whole_at_block_start(make_anthropic_model: AnthropicFactory) -> None:
    body = stream_body(tool_block(0, "toolu_1", "f", input={"path": "a.txt"}), stop_reason="tool_use")
    response = accumulate(await stream_events(make_anthropic_model, body))
    assert response.tool_calls == (ToolCall(id="toolu_1", name="f", arguments='{"path": "a.txt"}'),)


async def test_events_without_event_lines(make_anthropic_model: AnthropicFactory) -> None:
    body = stream_body(text_block(0, "plain"), event_lines=False)
    response = accumulate(await stream_events(make_anthropic_model, body))
    assert (response.content, response.finish_reason, response.raw_finish_reason) == (
        "plain",
        "stop",
        "end_turn",
    )


async def test_pings_unknown_events_and_citations_are_ignored(make_anthropic_model: AnthropicFactory) -> None:
    citation = {
        "type": "citations_delta",
        "citation": {"type": "web_search_result_location", "cited_text": "x"},
    }
    body = sse(
        message_start(),
        {"type": "ping"},
        *text_block(0, "a")[:2],
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0, "delta": citation},
        {"type": "some_future_event", "index": 0},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "future_delta", "x": 1}},
        *text_block(0, "b")[1:],
        *message_end(),
    )
    assert accumulate(await stream_events(make_anthropic_model, body)).content == "ab"


async def test_usage_with_cache_reads_and_writes(make_anthropic_model: AnthropicFactory) -> None:
    body = sse(
        message_start(12, cache_read=2048, cache_write=512),
        *text_block(0, "cached"),
        *message_end(output_tokens=7),
    )
    events = await stream_events(make_anthropic_model, body)
    usage = accumulate(events).usage
    assert usage == Usage(
        input_tokens=12, output_tokens=7, cache_read_tokens=2048, cache_write_tokens=512, requests=1
    )
    # The first usage event comes at message_start: a step cut short still knows its input tokens.
    assert events[0] == UsageUpdate(
        Usage(input_tokens=12, output_tokens=1, cache_read_tokens=2048, cache_write_tokens=512, requests=1)
    )


async def test_cumulative_usage_in_message_delta_replaces_the_start(
    make_anthropic_model: AnthropicFactory,
) -> None:
    # With server tools, message_delta carries the input of every internal iteration.
    body = sse(
        message_start(702),
        *text_block(0, "x"),
        *message_end(output_tokens=175, input_tokens=1591, cache_read_input_tokens=64),
    )
    usage = accumulate(await stream_events(make_anthropic_model, body)).usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (1591, 175, 64)


@pytest.mark.parametrize(
    ("raw", "mapped"),
    [
        ("end_turn", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("stop_sequence", "stop"),
        ("pause_turn", "other"),
        ("refusal", "content_filter"),
        ("model_context_window_exceeded", "length"),
        ("something_new", "other"),
    ],
)
async def test_stop_reasons(raw: str, mapped: str, make_anthropic_model: AnthropicFactory) -> None:
    events = await stream_events(make_anthropic_model, stream_body(text_block(0, "x"), stop_reason=raw))
    assert events[-1] == StreamFinish(mapped, raw_reason=raw, model="claude-test")  # type: ignore[arg-type]


async def test_no_stop_reason_with_calls_is_tool_calls(make_anthropic_model: AnthropicFactory) -> None:
    events = await stream_events(
        make_anthropic_model, stream_body(tool_block(0, "toolu_1", "f", "{}"), stop_reason=None)
    )
    assert events[-1] == StreamFinish("tool_calls", raw_reason=None, model="claude-test")


async def test_multibyte_text_in_one_byte_pieces(make_anthropic_model: AnthropicFactory) -> None:
    text = "Grüße aus Köln — 東京 🚀"
    body = stream_body(text_block(0, text[:7], text[7:]))
    with ReplayServer([ReplayResponse.sse(body).resplit(piece_size=1)]) as server:
        response = accumulate([e async for e in make_anthropic_model(server).stream(HELLO)])
    assert response.content == text


async def test_connection_is_reused_across_requests(make_anthropic_model: AnthropicFactory) -> None:
    body = stream_body(text_block(0, "again"))
    with ReplayServer(lambda request: ReplayResponse.sse(body)) as server:
        model = make_anthropic_model(server)
        for _ in range(4):
            assert accumulate([e async for e in model.stream(HELLO)]).content == "again"
        assert server.connections_opened == 1


# --- property: any interleaving of blocks accumulates to the blocks' content ------------------------

_piece = st.text(min_size=1, max_size=6)
_block = st.one_of(
    st.tuples(st.just("text"), st.lists(_piece, max_size=3)),
    st.tuples(st.just("thinking"), st.lists(_piece, max_size=3), _piece),
    st.tuples(st.just("redacted"), _piece),
    st.tuples(
        st.just("tool"),
        st.dictionaries(st.text(max_size=3), st.integers() | st.text(max_size=4), max_size=3),
        st.lists(st.integers(min_value=0, max_value=40), max_size=4),
    ),
    st.tuples(st.just("server"), _piece),
)


@given(blocks=st.lists(_block, max_size=8))
@settings(max_examples=300, deadline=None)
def test_any_block_sequence_accumulates_to_its_content(blocks: list[tuple[Any, ...]]) -> None:
    payloads: list[dict[str, Any]] = [message_start()]
    text, thinking, calls = "", [], []
    gap = False
    for index, block in enumerate(blocks):
        kind = block[0]
        if kind == "text":
            payloads += text_block(index, *block[1])
            joined = "".join(block[1])
            if joined and gap and text and not text[-1].isspace() and not joined[0].isspace():
                text += "\n\n"
            if joined:
                text, gap = text + joined, False
            continue
        gap = True
        if kind == "thinking":
            payloads += thinking_block(index, *block[1], signature=block[2])
            thinking.append(Thinking(text="".join(block[1]), signature=block[2]))
        elif kind == "redacted":
            payloads += redacted_block(index, block[1])
            thinking.append(Thinking(redacted=block[1]))
        elif kind == "tool":
            arguments = json.dumps(block[1]) if block[1] else ""
            cuts = sorted({min(c, len(arguments)) for c in block[2]})
            parts = [arguments[a:b] for a, b in zip([0, *cuts], [*cuts, len(arguments)], strict=True)]
            call_id = f"toolu_{index}"
            payloads += tool_block(index, call_id, f"f{index}", *parts)
            calls.append(ToolCall(id=call_id, name=f"f{index}", arguments=arguments or "{}"))
        else:
            payloads += tool_block(
                index, f"srvtoolu_{index}", "web_search", '{"q": "x"}', kind="server_tool_use"
            )
    payloads += message_end("tool_use" if calls else "end_turn")
    state = StreamState()
    events: list[ModelEvent] = []
    for payload in payloads:
        events += state.feed(payload["type"], payload)
    events += state.end()
    response = accumulate(events)
    assert response.content == text
    assert response.tool_calls == tuple(calls)
    assert response.thinking == tuple(thinking)
    assert response.finish_reason == ("tool_calls" if calls else "stop")
    starts = [e.index for e in events if isinstance(e, ToolCallStart)]
    assert starts == list(range(len(calls)))
