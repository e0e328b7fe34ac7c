"""Conversation messages: what a transcript holds and what a model is sent.

Three roles, each a slotted dataclass: :class:`UserMessage`, :class:`AssistantMessage` (text, thinking
blocks, tool calls) and :class:`ToolResultMessage` (one result per tool call, paired by id). Every
message may carry the ``run_id`` that wrote it and an ISO-8601 UTC ``timestamp``.

Messages are values: treat them as immutable. They are not ``frozen`` dataclasses only because
building a frozen dataclass costs about three times as much, and the loop builds several per step.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = [
    "AssistantMessage",
    "Message",
    "Thinking",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "now_iso",
]


_second_cache: list[Any] = [-1, ""]


def now_iso() -> str:
    """The current time as ISO 8601 UTC with milliseconds (``2026-11-22T10:15:00.123Z``), the
    transcript's timestamp format. Formats the date part once per second: this runs per entry."""
    now = time.time()
    second = int(now)
    cache = _second_cache
    if cache[0] != second:
        cache[0] = second
        cache[1] = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{cache[1]}.{int((now - second) * 1000):03d}Z"


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token counts of one model call, or a sum of several."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            requests=self.requests + other.requests,
        )

    @classmethod
    def total(cls, usages: Iterable[Usage]) -> Usage:
        """The sum of many, without building an intermediate value per addition."""
        i = o = cr = cw = r = 0
        for u in usages:
            i += u.input_tokens
            o += u.output_tokens
            cr += u.cache_read_tokens
            cw += u.cache_write_tokens
            r += u.requests
        return cls(input_tokens=i, output_tokens=o, cache_read_tokens=cr, cache_write_tokens=cw, requests=r)

    def to_dict(self) -> dict[str, int]:
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "cacheReadTokens": self.cache_read_tokens,
            "cacheWriteTokens": self.cache_write_tokens,
            "totalTokens": self.total_tokens,
            "requests": self.requests,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        return cls(
            input_tokens=int(data.get("inputTokens", 0)),
            output_tokens=int(data.get("outputTokens", 0)),
            cache_read_tokens=int(data.get("cacheReadTokens", 0)),
            cache_write_tokens=int(data.get("cacheWriteTokens", 0)),
            requests=int(data.get("requests", 0)),
        )


@dataclass(slots=True, kw_only=True)
class ToolCall:
    """A tool invocation requested by the model. ``arguments`` is the raw JSON text the model sent."""

    id: str
    name: str
    arguments: str = "{}"


@dataclass(slots=True, kw_only=True)
class Thinking:
    """A reasoning block. ``signature`` / ``redacted`` carry what a provider needs echoed back."""

    text: str = ""
    signature: str | None = None
    redacted: str | None = None
    provider: str | None = None
    """Who produced it (``"anthropic"``, ``"openai-responses"``, …): signatures and encrypted
    reasoning only mean something to their own provider, which alone gets them back."""


@dataclass(slots=True, kw_only=True)
class UserMessage:
    content: str
    run_id: str | None = None
    timestamp: str | None = None
    meta: dict[str, Any] | None = None
    role: Literal["user"] = field(default="user", init=False)


@dataclass(slots=True, kw_only=True)
class AssistantMessage:
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    thinking: tuple[Thinking, ...] = ()
    model: str | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    run_id: str | None = None
    timestamp: str | None = None
    role: Literal["assistant"] = field(default="assistant", init=False)


@dataclass(slots=True, kw_only=True)
class ToolResultMessage:
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    synthetic: bool = False
    """True when loopwright wrote this result itself (the call never ran: stop, crash, skip)."""
    run_id: str | None = None
    timestamp: str | None = None
    role: Literal["tool"] = field(default="tool", init=False)


Message = UserMessage | AssistantMessage | ToolResultMessage
