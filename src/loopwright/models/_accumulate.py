"""Accumulate a model's stream events into one response (one fresh accumulator per step).

This runs for every event of every step, so it is written for speed: containers are created only
when a response needs them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from loopwright.messages import AssistantMessage, Thinking, ToolCall, Usage
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
        _ADD[type(event)](self, event)

    def _add_text(self, event: TextDelta) -> None:
        self._text.append(event.text)

    def _add_args(self, event: ToolCallArgsDelta) -> None:
        calls = self._calls
        if calls is None:
            calls = self._calls = {}
        entry = calls.get(event.index)
        if entry is None:  # arguments before the call's start: the start fills id and name
            entry = calls[event.index] = ["", ""]
        entry.append(event.delta)

    def _add_call(self, event: ToolCallStart) -> None:
        calls = self._calls
        if calls is None:
            calls = self._calls = {}
        entry = calls.get(event.index)
        if entry is None:
            calls[event.index] = [event.id, event.name]
        else:
            entry[0], entry[1] = event.id, event.name

    def _add_usage(self, event: UsageUpdate) -> None:
        self.usage = event.usage

    def _add_finish(self, event: StreamFinish) -> None:
        self.finish = event.reason
        self.raw_finish = event.raw_reason
        if event.model:
            self.model = event.model

    def _add_thinking(self, event: ThinkingDelta) -> None:
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
    def streamed(self) -> bool:
        """Whether any text or thinking has arrived (what a consumer may already have shown)."""
        return bool(self._text) or bool(self._thinking)

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

    def _finish_reason(self, calls: tuple[ToolCall, ...]) -> FinishReason:
        finish = self.finish
        if calls:
            return "tool_calls" if finish is None or finish == "stop" else finish
        return "stop" if finish is None else finish

    def response(self) -> ModelResponse:
        calls = self.tool_calls()
        return ModelResponse(
            content=self.text,
            tool_calls=calls,
            thinking=self.thinking(),
            usage=self.usage,
            finish_reason=self._finish_reason(calls),
            raw_finish_reason=self.raw_finish,
            model=self.model,
        )

    def message(self, *, model: str, run_id: str, timestamp: str) -> AssistantMessage:
        """The step as the assistant message the transcript records (no intermediate response).
        Thinking blocks are tagged with the provider of ``model`` (the part before ``:``)."""
        # This runs once per step: the common cases (no thinking, one piece of text or none) are
        # handled inline rather than through the helper methods.
        calls = self.tool_calls() if self._calls else ()
        thinking: tuple[Thinking, ...] = ()
        if self._thinking:
            thinking = self.thinking()
            provider = model.partition(":")[0] if ":" in model else None
            for t in thinking:
                t.provider = provider
        text = self._text
        finish = self.finish
        if calls:
            finish = "tool_calls" if finish is None or finish == "stop" else finish
        elif finish is None:
            finish = "stop"
        return AssistantMessage(
            content=(text[0] if len(text) == 1 else "".join(text)),
            tool_calls=calls,
            thinking=thinking,
            model=self.model or model,
            usage=self.usage,
            finish_reason=finish,
            run_id=run_id,
            timestamp=timestamp,
        )


_ADD: dict[type[Any], Callable[[StepAccumulator, Any], None]] = {
    TextDelta: StepAccumulator._add_text,
    ToolCallArgsDelta: StepAccumulator._add_args,
    ToolCallStart: StepAccumulator._add_call,
    UsageUpdate: StepAccumulator._add_usage,
    StreamFinish: StepAccumulator._add_finish,
    ThinkingDelta: StepAccumulator._add_thinking,
}


async def complete_from_stream(events: AsyncIterator[ModelEvent]) -> ModelResponse:
    """Drain a model's event stream into one response; the default ``complete()`` of a provider."""
    acc = StepAccumulator()
    async for event in events:
        acc.add(event)
    return acc.response()
