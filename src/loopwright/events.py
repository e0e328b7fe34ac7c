"""Events a run emits, in order, on every path (success, failure, stop, timeout).

Each event is a slotted dataclass (a value: treat it as immutable) with a ``type`` discriminator. The specification's nine loop events
are the ones with a ``name`` (``loop:start`` … ``loop:error``); :meth:`payload` gives the
specification's payload. ``agent.stream()`` yields all of them; ``agent.on(...)`` subscribes to them.

A run's events come in this order::

    RunStarted (loop:start)
    ContextBuilt (loop:context)          ─┐ absent when INTAKE fails
    ExecuteStarted (loop:execute)         │
      StepStarted                         │ per model call
        TextChunk / ThinkingChunk* (stream:delta for text)
        ModelRetry, StepDiscarded, ModelFallback   when a model call fails and is retried
        LimitReached                               before the last, tool-less call of a run
        ToolCallStarted (tool:start) … ToolCallEnded (tool:end)
          ApprovalRequested … ApprovalResolved     inside a call the policy marks "ask"
      StepEnded                          ─┘
    RunFailed (loop:error)                 only when the run ended in an error
    PersistStarted (loop:persist)          absent when INTAKE fails before the session was locked
    RunEnded (loop:end)                    always last; carries the report
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from loopwright.approvals import ApprovalRequest
from loopwright.messages import Usage
from loopwright.report import RunReport

__all__ = [
    "ApprovalRequested",
    "ApprovalResolved",
    "CompactionEnded",
    "CompactionStarted",
    "ContextBuilt",
    "ExecuteStarted",
    "LimitReached",
    "ModelFallback",
    "ModelRetry",
    "PersistStarted",
    "RunEnded",
    "RunEvent",
    "RunFailed",
    "RunStarted",
    "StepDiscarded",
    "StepEnded",
    "StepStarted",
    "TextChunk",
    "ThinkingChunk",
    "ToolCallEnded",
    "ToolCallStarted",
]


@dataclass(slots=True, kw_only=True)
class RunStarted:
    name: ClassVar[str] = "loop:start"
    run_id: str
    session_id: str
    request_id: str | None = None
    """The durable queue's request id, for a run started by :meth:`Agent.submit`."""
    type: Literal["run_start"] = "run_start"

    def payload(self) -> dict[str, Any]:
        d = {"runId": self.run_id, "sessionId": self.session_id}
        if self.request_id is not None:
            d["requestId"] = self.request_id
        return d


@dataclass(slots=True, kw_only=True)
class ContextBuilt:
    name: ClassVar[str] = "loop:context"
    run_id: str
    token_estimate: int
    message_count: int
    type: Literal["context"] = "context"

    def payload(self) -> dict[str, Any]:
        return {"tokenEstimate": self.token_estimate}


@dataclass(slots=True, kw_only=True)
class ExecuteStarted:
    name: ClassVar[str] = "loop:execute"
    run_id: str
    tool_count: int
    type: Literal["execute"] = "execute"

    def payload(self) -> dict[str, Any]:
        return {"toolCount": self.tool_count}


@dataclass(slots=True, kw_only=True)
class StepStarted:
    name: ClassVar[str] = "step:start"
    run_id: str
    step: int
    type: Literal["step_start"] = "step_start"

    def payload(self) -> dict[str, Any]:
        return {"step": self.step}


@dataclass(slots=True, kw_only=True)
class TextChunk:
    name: ClassVar[str] = "stream:delta"
    run_id: str
    text: str
    type: Literal["text"] = "text"

    def payload(self) -> dict[str, Any]:
        return {"content": self.text}


@dataclass(slots=True, kw_only=True)
class ThinkingChunk:
    name: ClassVar[str] = "stream:thinking"
    run_id: str
    text: str
    type: Literal["thinking"] = "thinking"

    def payload(self) -> dict[str, Any]:
        return {"content": self.text}


@dataclass(slots=True, kw_only=True)
class ToolCallStarted:
    name: ClassVar[str] = "tool:start"
    run_id: str
    step: int
    call_id: str
    tool_name: str
    arguments: dict[str, Any] | str
    type: Literal["tool_call_start"] = "tool_call_start"

    def payload(self) -> dict[str, Any]:
        return {"toolName": self.tool_name, "toolCallId": self.call_id, "arguments": self.arguments}


@dataclass(slots=True, kw_only=True)
class ToolCallEnded:
    name: ClassVar[str] = "tool:end"
    run_id: str
    step: int
    call_id: str
    tool_name: str
    result: str
    is_error: bool
    latency_ms: float
    type: Literal["tool_call_end"] = "tool_call_end"

    def payload(self) -> dict[str, Any]:
        return {
            "toolName": self.tool_name,
            "toolCallId": self.call_id,
            "result": self.result,
            "isError": self.is_error,
            "duration": round(self.latency_ms, 3),
        }


@dataclass(slots=True, kw_only=True)
class StepEnded:
    name: ClassVar[str] = "step:end"
    run_id: str
    step: int
    usage: Usage
    latency_ms: float
    finish_reason: str
    type: Literal["step_end"] = "step_end"

    def payload(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "usage": self.usage.to_dict(),
            "latencyMs": round(self.latency_ms, 3),
            "finishReason": self.finish_reason,
        }


@dataclass(slots=True, kw_only=True)
class ModelRetry:
    """A model call failed with a retryable error and will be tried again after ``delay`` seconds."""

    name: ClassVar[str] = "model:retry"
    run_id: str
    step: int
    attempt: int
    delay: float
    model: str
    error: str
    status: int | None
    type: Literal["retry"] = "retry"

    def payload(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "attempt": self.attempt,
            "delay": self.delay,
            "model": self.model,
            "error": self.error,
            "status": self.status,
        }


@dataclass(slots=True, kw_only=True)
class StepDiscarded:
    """Text or thinking already streamed for ``step`` is void: the call failed and is being retried
    (or handed to another model). Consumers should drop what they showed of this step."""

    name: ClassVar[str] = "stream:discard"
    run_id: str
    step: int
    reason: str
    type: Literal["discard"] = "discard"

    def payload(self) -> dict[str, Any]:
        return {"step": self.step, "reason": self.reason}


@dataclass(slots=True, kw_only=True)
class ModelFallback:
    """``failed`` could not answer; the step goes to the next model of the chain."""

    name: ClassVar[str] = "model:fallback"
    run_id: str
    step: int
    failed: str
    next: str
    error: str
    type: Literal["fallback"] = "fallback"

    def payload(self) -> dict[str, Any]:
        return {"step": self.step, "from": self.failed, "to": self.next, "error": self.error}


@dataclass(slots=True, kw_only=True)
class LimitReached:
    """A run limit (or max_tool_iterations) was reached; the loop winds down."""

    name: ClassVar[str] = "loop:limit"
    run_id: str
    limit: str
    value: float
    maximum: float
    type: Literal["limit"] = "limit"

    def payload(self) -> dict[str, Any]:
        return {"limit": self.limit, "value": self.value, "max": self.maximum}


@dataclass(slots=True, kw_only=True)
class ApprovalRequested:
    """A tool call waits for a decision (see :mod:`loopwright.approvals`)."""

    name: ClassVar[str] = "approval:requested"
    run_id: str
    request: ApprovalRequest
    type: Literal["approval_requested"] = "approval_requested"

    def payload(self) -> dict[str, Any]:
        return self.request.to_dict()


@dataclass(slots=True, kw_only=True)
class ApprovalResolved:
    """A waiting call got its decision: ``by`` is ``approver``, ``api``, ``timeout`` or ``resume``."""

    name: ClassVar[str] = "approval:resolved"
    run_id: str
    call_id: str
    decision: str
    by: str
    type: Literal["approval_resolved"] = "approval_resolved"

    def payload(self) -> dict[str, Any]:
        return {"callId": self.call_id, "decision": self.decision, "by": self.by}


@dataclass(slots=True, kw_only=True)
class CompactionStarted:
    name: ClassVar[str] = "compaction:start"
    run_id: str
    reason: str
    tokens_before: int
    type: Literal["compaction_start"] = "compaction_start"

    def payload(self) -> dict[str, Any]:
        return {"reason": self.reason, "tokensBefore": self.tokens_before}


@dataclass(slots=True, kw_only=True)
class CompactionEnded:
    name: ClassVar[str] = "compaction:end"
    run_id: str
    compaction_id: str
    covered: int
    tokens_before: int
    tokens_after: int
    type: Literal["compaction_end"] = "compaction_end"

    def payload(self) -> dict[str, Any]:
        return {
            "compactionId": self.compaction_id,
            "covered": self.covered,
            "tokensBefore": self.tokens_before,
            "tokensAfter": self.tokens_after,
        }


@dataclass(slots=True, kw_only=True)
class RunFailed:
    name: ClassVar[str] = "loop:error"
    run_id: str
    error: str
    error_type: str
    type: Literal["error"] = "error"

    def payload(self) -> dict[str, Any]:
        return {"runId": self.run_id, "error": self.error, "errorType": self.error_type}


@dataclass(slots=True, kw_only=True)
class PersistStarted:
    name: ClassVar[str] = "loop:persist"
    run_id: str
    type: Literal["persist"] = "persist"

    def payload(self) -> dict[str, Any]:
        return {}


@dataclass(slots=True, kw_only=True)
class RunEnded:
    name: ClassVar[str] = "loop:end"
    run_id: str
    report: RunReport
    type: Literal["done"] = "done"

    @property
    def success(self) -> bool:
        """False when the run ended in an error (provider failure, timeout, storage failure)."""
        return self.report.error is None

    def payload(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "success": self.success,
            "duration": round(self.report.total_ms, 3),
            "reason": self.report.reason,
        }


RunEvent = (
    RunStarted
    | ContextBuilt
    | ExecuteStarted
    | StepStarted
    | TextChunk
    | ThinkingChunk
    | ToolCallStarted
    | ToolCallEnded
    | StepEnded
    | ModelRetry
    | StepDiscarded
    | ModelFallback
    | LimitReached
    | ApprovalRequested
    | ApprovalResolved
    | CompactionStarted
    | CompactionEnded
    | RunFailed
    | PersistStarted
    | RunEnded
)

#: The nine events the specification requires, by name.
SPEC_EVENT_NAMES = (
    "loop:start",
    "loop:context",
    "loop:execute",
    "tool:start",
    "tool:end",
    "stream:delta",
    "loop:persist",
    "loop:end",
    "loop:error",
)
