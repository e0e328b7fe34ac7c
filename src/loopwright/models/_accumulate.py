"""Accumulate a model's stream events into one response (one fresh accumulator per step).

This runs for every event of every step, so it is written for speed: containers are created only
when a response needs them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

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

__all__ = ["StepAccumulator", "complete_from_stream"]

_NO_USAGE = Usage()


class StepAccumulator:
    """Builds a :class:`ModelResponse` from stream events. Arguments are joined per call index."""

    __slots__ = ("_calls", "_text", "_thinking", "finish", "model", "raw_finish", "usage")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, list[str]] | None = None  # index -> [id, name, arg pieces...]
        self._thinking: dict[int, list[str]] | None = None
        self.usage = _NO_USAGE
        self.finish: FinishReason | None = None
        self.raw_finish: str | None = None
        self.model: str | None = None

    def add(self, event: ModelEvent) -> None:
        match event:
            case TextDelta():
                self._text.append(event.text)
            case ToolCallArgsDelta():
                calls = self._calls
                if calls is None:
                    calls = self._calls = {}
                entry = calls.get(event.index)
                if entry is None:  # arguments before the call's start: the start fills id and name
                    entry = calls[event.index] = ["", ""]
                entry.append(event.delta)
            case ToolCallStart():
                calls = self._calls
                if calls is None:
                    calls = self._calls = {}
                entry = calls.get(event.index)
                if entry is None:
                    calls[event.index] = [event.id, event.name]
                else:
                    entry[0], entry[1] = event.id, event.name
            case UsageUpdate():
                self.usage = event.usage
            case StreamFinish():
                self.finish = event.reason
                self.raw_finish = event.raw_reason
                if event.model:
                    self.model = event.model
            case ThinkingDelta():
                thinking = self._thinking
                if thinking is None:
                    thinking = self._thinking = {}
                parts = thinking.setdefault(event.block, ["", "", ""])
                parts[0] += event.text
                if event.signature:
                    parts[1] += event.signature
                if event.redacted:
                    parts[2] += event.redacted

    @property
    def text(self) -> str:
        text = self._text
        return text[0] if len(text) == 1 else "".join(text)

    def tool_calls(self) -> tuple[ToolCall, ...]:
        calls = self._calls
        if not calls:
            return ()
        out = []
        for index in sorted(calls) if len(calls) > 1 else calls:
            entry = calls[index]
            args = "".join(entry[2:]) if len(entry) != 3 else entry[2]
            out.append(ToolCall(id=entry[0], name=entry[1], arguments=args or "{}"))
        return tuple(out)

    def thinking(self) -> tuple[Thinking, ...]:
        blocks = self._thinking
        if not blocks:
            return ()
        return tuple(
            Thinking(text=t, signature=s or None, redacted=r or None)
            for t, s, r in (blocks[k] for k in sorted(blocks))
        )

    def response(self) -> ModelResponse:
        calls = self.tool_calls()
        finish = self.finish
        if calls:
            if finish is None or finish == "stop":
                finish = "tool_calls"
        elif finish is None:
            finish = "stop"
        return ModelResponse(
            content=self.text,
            tool_calls=calls,
            thinking=self.thinking() if self._thinking else (),
            usage=self.usage,
            finish_reason=finish,
            raw_finish_reason=self.raw_finish,
            model=self.model,
        )


async def complete_from_stream(events: AsyncIterator[ModelEvent]) -> ModelResponse:
    """Drain a model's event stream into one response; the default ``complete()`` of a provider."""
    acc = StepAccumulator()
    async for event in events:
        acc.add(event)
    return acc.response()
