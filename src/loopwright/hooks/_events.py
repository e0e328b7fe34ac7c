"""What each hook receives. Handlers may change the fields documented as changeable."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loopwright.caller import Caller
from loopwright.messages import Message, Usage

if TYPE_CHECKING:
    from loopwright.report import RunReport

__all__ = [
    "AgentEnd",
    "AgentStart",
    "CompactionHook",
    "GatewayHook",
    "MessageHook",
    "ModelCallHook",
    "SessionHook",
    "ToolCallHook",
    "ToolResultHook",
]


@dataclass(slots=True, kw_only=True)
class MessageHook:
    """``message_received`` (``text`` is the user's message), ``message_sending`` (the reply, before it
    is returned: change ``text`` to change what the caller gets) and ``message_sent``."""

    session_id: str
    run_id: str
    text: str
    caller: Caller | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class SessionHook:
    """``session_start`` (a run created the session) and ``session_end`` (reset or deleted)."""

    session_id: str
    reason: str = ""
    caller: Caller | None = None


@dataclass(slots=True, kw_only=True)
class AgentStart:
    """``before_agent_start``: the context is built, no model was called yet. Append text to
    ``context`` to add it to this run's system prompt."""

    run_id: str
    session_id: str
    message: str
    system: str
    caller: Caller | None = None
    context: list[str] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class AgentEnd:
    """``agent_end``: the run is persisted; its report and final message list."""

    run_id: str
    session_id: str
    report: RunReport
    messages: list[Message]


@dataclass(slots=True, kw_only=True)
class ModelCallHook:
    """``before_model_call`` (``usage`` is None) and ``after_model_call``."""

    run_id: str
    session_id: str
    step: int
    model: str
    estimated_input_tokens: int
    max_output_tokens: int | None
    caller: Caller | None = None
    usage: Usage | None = None
    cost_usd: float | None = None


@dataclass(slots=True, kw_only=True)
class ToolCallHook:
    """``before_tool_call``: change ``arguments`` (a dict) to rewrite them, set ``skip`` to not run the
    tool (``result`` is then the result the model sees). ``after_tool_call``: ``result`` and
    ``is_error`` are the outcome; change ``result`` to override it."""

    run_id: str
    session_id: str
    step: int
    call_id: str
    tool: str
    arguments: dict[str, Any] | str
    caller: Caller | None = None
    skip: bool = False
    result: str | None = None
    is_error: bool = False


@dataclass(slots=True, kw_only=True)
class ToolResultHook:
    """``tool_result_persist``: the result about to be written to the transcript; change
    ``content`` to change what is stored and sent (handlers must be quick: it runs per call)."""

    run_id: str
    session_id: str
    call_id: str
    tool: str
    content: str
    is_error: bool


@dataclass(slots=True, kw_only=True)
class CompactionHook:
    """``before_compaction`` and ``after_compaction`` (with ``summary`` and ``tokens_after``)."""

    run_id: str
    session_id: str
    reason: str
    tokens_before: int
    summary: str | None = None
    tokens_after: int | None = None


@dataclass(slots=True, kw_only=True)
class GatewayHook:
    """``gateway_start`` / ``gateway_stop``."""

    host: str
    port: int
    agents: list[str] = field(default_factory=list)
