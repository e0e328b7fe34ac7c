"""Run reports: what happened in a run, step by step and tool call by tool call.

The JSON form (``to_dict``) uses the specification's camelCase field names and is what
``sessions/<id>/runs/<runId>.json`` holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from loopwright.errors import RunError
from loopwright.messages import Usage

__all__ = ["RunReport", "StepKind", "StepReport", "StopReason", "ToolCallReport", "parse_arguments"]

StepKind = Literal["initial", "tool_followup", "compaction", "memory_flush"]
StopReason = Literal[
    "done", "stopped", "error", "guardrail", "max_steps", "timeout", "limit", "loop_detected"
]


def parse_arguments(raw: str) -> dict[str, Any] | str:
    """Tool-call arguments for display: the parsed object, or the raw text if it is not one."""
    try:
        value = json.loads(raw or "{}")
    except (ValueError, RecursionError):  # invalid, or nested deeper than the parser goes
        return raw
    return value if isinstance(value, dict) else raw


@dataclass(slots=True, kw_only=True)
class ToolCallReport:
    call_id: str
    tool_name: str
    arguments_json: str
    """The arguments as the model sent them (raw JSON text)."""
    result_size_bytes: int = 0
    latency_ms: float = 0.0
    skipped: bool = False
    error: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def arguments(self) -> dict[str, Any] | str:
        """The arguments parsed (the raw text when they are not a JSON object)."""
        return parse_arguments(self.arguments_json)

    def to_dict(self) -> dict[str, Any]:
        return {
            "callId": self.call_id,
            "toolName": self.tool_name,
            "arguments": self.arguments,
            "resultSizeBytes": self.result_size_bytes,
            "latencyMs": self.latency_ms,
            "skipped": self.skipped,
            "error": self.error,
            "metrics": self.metrics,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolCallReport:
        return cls(
            call_id=d["callId"],
            tool_name=d["toolName"],
            arguments_json=args if isinstance(args := d.get("arguments", {}), str) else json.dumps(args),
            result_size_bytes=d.get("resultSizeBytes", 0),
            latency_ms=d.get("latencyMs", 0.0),
            skipped=d.get("skipped", False),
            error=d.get("error"),
            metrics=d.get("metrics", {}),
        )


@dataclass(slots=True, kw_only=True)
class StepReport:
    index: int
    type: StepKind
    llm_latency_ms: float = 0.0
    usage: Usage = Usage()
    finish_reason: str = ""
    model: str | None = None
    cost_usd: float | None = None
    """What the call cost, from the price table; ``None`` when the model's price is unknown."""
    tool_calls: list[ToolCallReport] = field(default_factory=list)
    tool_total_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "type": self.type,
            "llmLatencyMs": self.llm_latency_ms,
            "usage": self.usage.to_dict(),
            "finishReason": self.finish_reason,
            "model": self.model,
            "costUsd": self.cost_usd,
            "toolCalls": [t.to_dict() for t in self.tool_calls],
            "toolTotalMs": self.tool_total_ms,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StepReport:
        return cls(
            index=d["index"],
            type=d["type"],
            llm_latency_ms=d.get("llmLatencyMs", 0.0),
            usage=Usage.from_dict(d.get("usage", {})),
            finish_reason=d.get("finishReason", ""),
            model=d.get("model"),
            cost_usd=d.get("costUsd"),
            tool_calls=[ToolCallReport.from_dict(t) for t in d.get("toolCalls", [])],
            tool_total_ms=d.get("toolTotalMs", 0.0),
        )


@dataclass(slots=True, kw_only=True)
class RunReport:
    """The outcome of one run. ``agent.run()`` returns it; it is also saved beside the transcript."""

    id: str
    session_id: str
    model: str
    started_at: float
    completed_at: float = 0.0
    reason: StopReason = "done"
    user_message: str = ""
    final_text: str = ""
    error: str | None = None
    error_type: str | None = None
    steps: list[StepReport] = field(default_factory=list)
    retries: int = 0
    """Model calls that failed and were tried again."""
    guardrail_failures: list[str] = field(default_factory=list)
    """Checks that failed without a tripwire (``"name: reason"``); a tripwire ends the run instead."""
    queued_ms: float = 0.0
    """Time spent waiting for the session (and a run slot) before the run could start."""
    limit: str | None = None
    """The limit that ended the run (``reason == "limit"``), e.g. ``"total_tokens 51000 of 50000"``."""

    @property
    def total_usage(self) -> Usage:
        return Usage.total(s.usage for s in self.steps)

    @property
    def total_cost_usd(self) -> float | None:
        """The run's cost in USD; ``None`` ("unknown") if any call's model has no known price."""
        total = 0.0
        for step in self.steps:
            if step.cost_usd is None:
                return None
            total += step.cost_usd
        return total

    @property
    def total_llm_time_ms(self) -> float:
        return sum(s.llm_latency_ms for s in self.steps)

    @property
    def total_tool_time_ms(self) -> float:
        return sum(s.tool_total_ms for s in self.steps)

    @property
    def run_id(self) -> str:
        return self.id

    @property
    def total_ms(self) -> float:
        return max(0.0, (self.completed_at - self.started_at) * 1000.0)

    @property
    def step_count(self) -> int:
        return len(self.steps)

    @property
    def tool_call_count(self) -> int:
        return sum(len(s.tool_calls) for s in self.steps)

    @property
    def usage(self) -> Usage:
        return self.total_usage

    @property
    def ok(self) -> bool:
        return self.reason == "done"

    def raise_for_error(self) -> None:
        """Raise :class:`~loopwright.errors.RunError` if the run ended with an error."""
        if self.error is not None and self.reason in ("error", "timeout"):
            raise RunError(f"run {self.id!r} failed: {self.error}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "sessionId": self.session_id,
            "model": self.model,
            "startedAt": self.started_at,
            "completedAt": self.completed_at,
            "totalMs": self.total_ms,
            "reason": self.reason,
            "userMessage": self.user_message,
            "finalText": self.final_text,
            "error": self.error,
            "errorType": self.error_type,
            "steps": [s.to_dict() for s in self.steps],
            "stepCount": self.step_count,
            "toolCallCount": self.tool_call_count,
            "totalUsage": self.total_usage.to_dict(),
            "totalCostUsd": self.total_cost_usd,
            "retries": self.retries,
            "queuedMs": self.queued_ms,
            "guardrailFailures": self.guardrail_failures,
            "limit": self.limit,
            "totalLlmTimeMs": self.total_llm_time_ms,
            "totalToolTimeMs": self.total_tool_time_ms,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunReport:
        return cls(
            id=d["id"],
            session_id=d.get("sessionId", ""),
            model=d.get("model", ""),
            started_at=d.get("startedAt", 0.0),
            completed_at=d.get("completedAt", 0.0),
            reason=d.get("reason", "done"),
            user_message=d.get("userMessage", ""),
            final_text=d.get("finalText", ""),
            error=d.get("error"),
            error_type=d.get("errorType"),
            steps=[StepReport.from_dict(s) for s in d.get("steps", [])],
            retries=d.get("retries", 0),
            queued_ms=d.get("queuedMs", 0.0),
            guardrail_failures=list(d.get("guardrailFailures", [])),
            limit=d.get("limit"),
        )
