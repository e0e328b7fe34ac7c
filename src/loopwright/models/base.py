"""The model contract: what the loop sends a model and the stream of events it gets back.

A provider implements :class:`Model`. The loop always calls :meth:`Model.stream`; ``complete`` is the
same call accumulated into one :class:`ModelResponse` (see :func:`loopwright.models.complete_from_stream`).
Failures are raised as :class:`loopwright.errors.ModelError` with ``provider``, ``model``, ``status`` and
``retryable`` set, so the loop can decide on retries and fallbacks without knowing the provider.

Requests, responses and stream events are values (treat them as immutable); like messages they are
plain slotted dataclasses, because the loop builds several per step and frozen ones cost 3x more.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from loopwright.messages import Message, Thinking, ToolCall, Usage

__all__ = [
    "FinishReason",
    "Model",
    "ModelEvent",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "StreamFinish",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallArgsDelta",
    "ToolCallStart",
    "ToolDefinition",
    "UsageUpdate",
]

FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "error", "other"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """What a model is told about a tool: name, description and JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    max_tokens: int | None = None
    temperature: float | None = None
    parallel_tool_calls: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)


DEFAULT_SETTINGS = ModelSettings()


@dataclass(slots=True, kw_only=True)
class ModelRequest:
    """One model call: the composed system prompt, the conversation so far and the tools on offer."""

    system: str
    messages: Sequence[Message]
    stable_system: str = ""
    """The part at the start of ``system`` that is identical across runs (identity, scope, tools):
    providers with prompt caching put their cache breakpoint right after it."""
    tools: Sequence[ToolDefinition] = ()
    settings: ModelSettings = DEFAULT_SETTINGS
    run_id: str | None = None
    session_id: str | None = None


# --- stream events a provider yields -----------------------------------------------------------


@dataclass(slots=True)
class TextDelta:
    text: str
    type: Literal["text"] = "text"


@dataclass(slots=True)
class ThinkingDelta:
    """A piece of a reasoning block. ``block`` numbers the blocks within one response."""

    text: str = ""
    signature: str | None = None
    redacted: str | None = None
    block: int = 0
    type: Literal["thinking"] = "thinking"


@dataclass(slots=True)
class ToolCallStart:
    """A new tool call at position ``index`` of the response."""

    index: int
    id: str
    name: str
    type: Literal["tool_call_start"] = "tool_call_start"


@dataclass(slots=True)
class ToolCallArgsDelta:
    """A fragment of the JSON arguments of the tool call at ``index``."""

    index: int
    delta: str
    type: Literal["tool_call_args"] = "tool_call_args"


@dataclass(slots=True)
class UsageUpdate:
    usage: Usage
    type: Literal["usage"] = "usage"


@dataclass(slots=True)
class StreamFinish:
    reason: FinishReason
    raw_reason: str | None = None
    model: str | None = None
    type: Literal["finish"] = "finish"


ModelEvent = TextDelta | ThinkingDelta | ToolCallStart | ToolCallArgsDelta | UsageUpdate | StreamFinish


@dataclass(slots=True, kw_only=True)
class ModelResponse:
    """A complete model turn."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    thinking: tuple[Thinking, ...] = ()
    usage: Usage = Usage()
    finish_reason: FinishReason = "stop"
    raw_finish_reason: str | None = None
    model: str | None = None


@runtime_checkable
class Model(Protocol):
    """A model provider. ``name`` is how reports and transcripts name it (``"openai:gpt-4o"``)."""

    @property
    def name(self) -> str: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield the response as events; raise :class:`~loopwright.errors.ModelError` on failure."""
        ...

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The whole response at once."""
        ...
