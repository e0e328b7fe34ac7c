"""Anthropic Messages responses read as loopwright values: the SSE stream and the JSON message.

:class:`SSEStream` hands over each server-sent event as ``(event, data)`` text, and :class:`StreamState`
turns the parsed events into model events. Blocks are tracked by their content-block index: text and
thinking blocks interleave with tool calls, so tool calls get their own running index, and thinking
and redacted-thinking blocks their own ordinal. Server tools (``server_tool_use``, web search and other
``*_tool_result`` blocks) run at Anthropic and are never surfaced as our tool calls; the text around
them is kept; text blocks that a server tool (or thinking) separates are joined as paragraphs, with a
blank line, while adjacent text blocks (split around citations) are joined as they are. The event type
is read from each payload's ``type`` (some servers send no ``event:`` lines).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, Literal, cast

import anthropic
import httpx2
from anthropic import AsyncStream

from loopwright.messages import Thinking, ToolCall, Usage
from loopwright.models.base import (
    FinishReason,
    ModelEvent,
    ModelResponse,
    StreamFinish,
    TextDelta,
    ThinkingDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    UsageUpdate,
)

__all__ = ["SSEStream", "StreamState", "finish_reason", "parse_message"]

STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
    "pause_turn": "other",
}
_DRAIN_SECONDS = 0.1
_EMPTY_ARGS = "{}"
_PARAGRAPH = "\n\n"
_NO_TEXT, _TEXT_LAST, _TEXT_BEFORE = 0, 1, 2
"""Where text stands in a response: none yet, the last block was text, another block came after it."""


class SSEStream(AsyncStream[tuple[str | None, str]]):
    """The SDK's stream, yielding each event's ``(event, data)`` text.

    The SDK's own event handling is bypassed: it drops events without an ``event:`` line and parses
    every payload into pydantic models. After ``message_stop`` the rest of the body is drained briefly,
    so an HTTP/1.1 connection goes back to the pool even if the server is slow to end the body.
    """

    def events(self) -> AsyncGenerator[tuple[str | None, str], None]:
        """The event iterator; closing it closes the response."""
        return cast(AsyncGenerator[tuple[str | None, str], None], self._iterator)

    async def __stream__(self) -> AsyncIterator[tuple[str | None, str]]:
        # Unlike OpenAI's, the Anthropic SDK's stream lets transport errors through as they are: they
        # become the SDK's own connection and timeout errors here.
        request = self.response.request
        events = self._iter_events()
        try:
            async for sse in events:
                data = sse.data
                yield sse.event, data
                if '"message_stop"' in data:
                    try:
                        async with asyncio.timeout(_DRAIN_SECONDS):
                            async for _ in events:
                                pass
                    except (TimeoutError, httpx2.HTTPError):
                        pass
                    return
        except httpx2.TimeoutException as exc:
            raise anthropic.APITimeoutError(request=request) from exc
        except httpx2.RequestError as exc:
            raise anthropic.APIConnectionError(
                message=str(exc) or type(exc).__name__, request=request
            ) from exc
        finally:
            await self.response.aclose()


def finish_reason(raw: str | None, has_calls: bool) -> FinishReason:
    if raw is None:
        return "tool_calls" if has_calls else "stop"
    return STOP_REASONS.get(raw, "other")


def _count(usage: Mapping[str, Any], key: str) -> int | None:
    value = usage.get(key)
    return value if type(value) is int else None


_BlockKind = Literal["text", "thinking", "tool", "other"]
"""``other``: server tools and their results, and block types this version does not know."""


class _Block:
    """One content block of the response: its kind, and its tool index or thinking ordinal."""

    __slots__ = ("args", "input", "kind", "number")

    def __init__(self, kind: _BlockKind, number: int = 0, input: Any = None) -> None:
        self.kind = kind
        self.number = number
        self.input = input
        self.args = False


class StreamState:
    """Turns Anthropic stream events (parsed JSON payloads) into model events, one response at a time."""

    __slots__ = (
        "blocks",
        "cache_read",
        "cache_write",
        "done",
        "input_tokens",
        "model",
        "output_tokens",
        "stop_reason",
        "text",
        "text_space",
        "thinking_blocks",
        "tool_calls",
    )

    def __init__(self) -> None:
        self.blocks: dict[Any, _Block] = {}
        self.tool_calls = 0
        self.thinking_blocks = 0
        self.model: str | None = None
        self.stop_reason: str | None = None
        self.input_tokens = self.output_tokens = self.cache_read = self.cache_write = 0
        self.text = _NO_TEXT
        self.text_space = False
        self.done = False

    def feed(self, kind: Any, payload: dict[str, Any]) -> list[ModelEvent]:
        if kind == "content_block_delta":
            return self._delta(payload)
        if kind == "content_block_start":
            return self._start(payload)
        if kind == "content_block_stop":
            return self._stop(payload)
        if kind == "message_start":
            message = payload.get("message")
            if isinstance(message, dict):
                if isinstance(message.get("model"), str):
                    self.model = message["model"]
                usage = message.get("usage")
                if isinstance(usage, dict):
                    return [self._usage(usage)]
            return []
        if kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                self.stop_reason = delta["stop_reason"]
            usage = payload.get("usage")
            return [self._usage(usage)] if isinstance(usage, dict) else []
        if kind == "message_stop":
            self.done = True
        return []  # ping, and event types this version does not know

    def _usage(self, usage: Mapping[str, Any]) -> UsageUpdate:
        """Usage from ``message_start`` or (cumulative, so it replaces) ``message_delta``."""
        if (n := _count(usage, "input_tokens")) is not None:
            self.input_tokens = n
        if (n := _count(usage, "output_tokens")) is not None:
            self.output_tokens = n
        if (n := _count(usage, "cache_read_input_tokens")) is not None:
            self.cache_read = n
        if (n := _count(usage, "cache_creation_input_tokens")) is not None:
            self.cache_write = n
        return UsageUpdate(
            Usage(
                input_tokens=self.input_tokens,
                output_tokens=self.output_tokens,
                cache_read_tokens=self.cache_read,
                cache_write_tokens=self.cache_write,
                requests=1,
            )
        )

    def _text(self, text: str) -> TextDelta:
        """A text delta; the first of a text block that follows other blocks starts a paragraph."""
        if self.text == _TEXT_BEFORE and not self.text_space and not text[0].isspace():
            text = _PARAGRAPH + text
        self.text = _TEXT_LAST
        self.text_space = text[-1].isspace()
        return TextDelta(text)

    def _start(self, payload: dict[str, Any]) -> list[ModelEvent]:
        block = payload.get("content_block")
        if not isinstance(block, dict):
            return []
        index = payload.get("index")
        kind = block.get("type")
        if kind == "text":
            self.blocks[index] = _Block("text")
            text = block.get("text")
            return [self._text(text)] if isinstance(text, str) and text else []
        if self.text == _TEXT_LAST:
            self.text = _TEXT_BEFORE
        if kind == "thinking" or kind == "redacted_thinking":
            number = self.thinking_blocks
            self.thinking_blocks += 1
            self.blocks[index] = _Block("thinking", number)
            if kind == "redacted_thinking":
                return [ThinkingDelta(redacted=str(block.get("data") or ""), block=number)]
            text, signature = block.get("thinking"), block.get("signature")
            if (isinstance(text, str) and text) or (isinstance(signature, str) and signature):
                return [ThinkingDelta(text=text or "", signature=signature or None, block=number)]
            return []
        if kind == "tool_use":
            number = self.tool_calls
            self.tool_calls += 1
            self.blocks[index] = _Block("tool", number, block.get("input"))
            call_id = block.get("id")
            return [ToolCallStart(number, str(call_id or f"toolu_{number}"), str(block.get("name") or ""))]
        self.blocks[index] = _Block("other")  # server tools and their results run at Anthropic
        return []

    def _delta(self, payload: dict[str, Any]) -> list[ModelEvent]:
        delta = payload.get("delta")
        if not isinstance(delta, dict):
            return []
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text")
            return [self._text(text)] if isinstance(text, str) and text else []
        block = self.blocks.get(payload.get("index"))
        if kind == "input_json_delta":
            if block is None or block.kind != "tool":
                return []
            part = delta.get("partial_json")
            if not isinstance(part, str) or not part:
                return []
            block.args = True
            return [ToolCallArgsDelta(block.number, part)]
        if kind == "thinking_delta" or kind == "signature_delta":
            if block is None or block.kind != "thinking":
                block = self.blocks[payload.get("index")] = _Block("thinking", self.thinking_blocks)
                self.thinking_blocks += 1
            if kind == "thinking_delta":
                text = delta.get("thinking")
                return (
                    [ThinkingDelta(text=text, block=block.number)] if isinstance(text, str) and text else []
                )
            signature = delta.get("signature")
            if isinstance(signature, str) and signature:
                return [ThinkingDelta(signature=signature, block=block.number)]
        return []  # citations_delta and delta types this version does not know

    def _stop(self, payload: dict[str, Any]) -> list[ModelEvent]:
        block = self.blocks.get(payload.get("index"))
        if block is None or block.kind != "tool" or block.args:
            return []
        return [self._whole_input(block)]

    @staticmethod
    def _whole_input(block: _Block) -> ToolCallArgsDelta:
        """A tool call that streamed no arguments: its start's ``input``, or ``{}``."""
        block.args = True
        value = block.input
        return ToolCallArgsDelta(
            block.number, json.dumps(value) if isinstance(value, dict) and value else _EMPTY_ARGS
        )

    def end(self) -> list[ModelEvent]:
        """The closing events: arguments of calls still without any, then the finish."""
        out: list[ModelEvent] = [
            self._whole_input(b) for b in self.blocks.values() if b.kind == "tool" and not b.args
        ]
        reason = finish_reason(self.stop_reason, self.tool_calls > 0)
        out.append(StreamFinish(reason, raw_reason=self.stop_reason, model=self.model))
        return out


def _message_usage(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage(requests=1)
    return Usage(
        input_tokens=_count(usage, "input_tokens") or 0,
        output_tokens=_count(usage, "output_tokens") or 0,
        cache_read_tokens=_count(usage, "cache_read_input_tokens") or 0,
        cache_write_tokens=_count(usage, "cache_creation_input_tokens") or 0,
        requests=1,
    )


def parse_message(data: Mapping[str, Any]) -> ModelResponse:
    """A non-streamed Messages API response (``{"type": "message", "content": [...]}``)."""
    text: list[str] = []
    thinking: list[Thinking] = []
    calls: list[ToolCall] = []
    gap = False
    for block in data.get("content") or ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            piece = str(block.get("text") or "")
            if piece and gap and text and not text[-1][-1].isspace() and not piece[0].isspace():
                text.append(_PARAGRAPH)
            if piece:
                text.append(piece)
                gap = False
            continue
        gap = True
        if kind == "thinking":
            thinking.append(
                Thinking(text=str(block.get("thinking") or ""), signature=block.get("signature") or None)
            )
        elif kind == "redacted_thinking":
            thinking.append(Thinking(redacted=str(block.get("data") or "")))
        elif kind == "tool_use":
            value = block.get("input")
            calls.append(
                ToolCall(
                    id=str(block.get("id") or f"toolu_{len(calls)}"),
                    name=str(block.get("name") or ""),
                    arguments=json.dumps(value) if isinstance(value, dict) else _EMPTY_ARGS,
                )
            )
    raw = data.get("stop_reason")
    raw_reason = raw if isinstance(raw, str) else None
    model = data.get("model")
    return ModelResponse(
        content="".join(text),
        tool_calls=tuple(calls),
        thinking=tuple(thinking),
        usage=_message_usage(data.get("usage")),
        finish_reason=finish_reason(raw_reason, bool(calls)),
        raw_finish_reason=raw_reason,
        model=model if isinstance(model, str) else None,
    )
