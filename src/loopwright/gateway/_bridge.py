"""From the loop's events to the gateway's runs: which accepted message a loop run belongs to, what
clients see of it (``lifecycle`` / ``assistant`` / ``tool``), and how it ends.

The gateway accepts a message with ``Agent.submit``, whose worker task runs it later. A context
variable set around ``submit`` (:meth:`RunBridge.accepting`) is inherited by that task, so when the
run's ``RunStarted`` reaches the agent's listener, the listener knows the accepted message it
belongs to; later events are matched by the loop's run id.

Only what a client renders crosses over: text and thinking deltas, a discard when a streamed step
is void, tool start / update (approvals) / end. ``lifecycle`` start and end are written by the
registry itself, so every run's stream has exactly one start and one end (or error), whatever path
the run took.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from loopwright.agent import Agent
from loopwright.gateway._runs import RunRecord, RunRegistry, Stream
from loopwright.report import RunReport

__all__ = ["RunBridge", "error_of", "translate"]


@dataclass(frozen=True, slots=True)
class _Recovering:
    """Context of the runs an agent resumes from its queue at start (no request of ours around them)."""

    agent: str


_CURRENT: ContextVar[RunRecord | _Recovering | None] = ContextVar("loopwright_gateway_run", default=None)

_ERROR_CODES = {
    "SessionBusyError": "busy",
    "MessageTooLargeError": "too_large",
    "EmptyMessageError": "invalid_request",
    "InputError": "invalid_request",
    "RunTimeoutError": "timeout",
    "ModelError": "model_error",
    "ContextLengthExceededError": "model_error",
    "ContextOverflowError": "context_overflow",
    "StorageError": "storage_error",
}


def error_of(error_type: str, message: str) -> dict[str, Any]:
    """The ``error`` of a run result: a stable ``code``, the exception's type and its message."""
    return {"code": _ERROR_CODES.get(error_type, "run_failed"), "type": error_type, "message": message}


def translate(event: Any) -> tuple[Stream, dict[str, Any]] | None:
    """The stream and data for a loop event, or None for events clients do not see."""
    kind = getattr(event, "type", "")
    if kind == "text":
        return "assistant", {"kind": "text", "delta": event.text}
    if kind == "thinking":
        return "assistant", {"kind": "thinking", "delta": event.text}
    if kind == "discard":
        return "assistant", {"kind": "discard", "step": event.step, "reason": event.reason}
    if kind == "tool_call_start":
        return "tool", {
            "phase": "start",
            "callId": event.call_id,
            "name": event.tool_name,
            "args": event.arguments,
            "step": event.step,
        }
    if kind == "tool_call_end":
        return "tool", {
            "phase": "end",
            "callId": event.call_id,
            "name": event.tool_name,
            "result": event.result,
            "isError": event.is_error,
            "durationMs": round(event.latency_ms, 3),
        }
    if kind == "approval_requested":
        request = event.request
        return "tool", {
            "phase": "update",
            "callId": request.call_id,
            "name": request.tool,
            "approval": {"state": "pending", **request.to_dict()},
        }
    if kind == "approval_resolved":
        return "tool", {
            "phase": "update",
            "callId": event.call_id,
            "approval": {"state": "resolved", "decision": event.decision, "by": event.by},
        }
    return None


class RunBridge:
    """Binds loop runs to accepted messages and writes their events and endings to the registry."""

    def __init__(
        self, registry: RunRegistry, agents: Mapping[str, Agent], *, busy_retry_after: float
    ) -> None:
        self.registry = registry
        self.agents = agents
        self.busy_retry_after = busy_retry_after
        self.forcing = False
        """Set while the gateway cancels what is left at shutdown: runs that had not started are
        put back into the queue, not ended."""
        self._loop_runs: dict[str, RunRecord] = {}

    @staticmethod
    @contextlib.contextmanager
    def accepting(record: RunRecord) -> Iterator[None]:
        """Around ``Agent.submit``: the run it starts belongs to ``record``."""
        token = _CURRENT.set(record)
        try:
            yield
        finally:
            _CURRENT.reset(token)

    @staticmethod
    def recovering(agent: str) -> None:
        """In the task that starts an agent's worker: what it resumes from the queue is ours."""
        _CURRENT.set(_Recovering(agent))

    @staticmethod
    def done_recovering() -> None:
        _CURRENT.set(None)

    def listener(self, name: str) -> Callable[[Any], None]:
        """The ``agent.on("*")`` listener for agent ``name``."""
        registry = self.registry
        loop_runs = self._loop_runs

        def on_event(event: Any) -> None:
            record = loop_runs.get(event.run_id)
            if record is None:
                if event.type != "run_start":
                    return
                current = _CURRENT.get()
                if isinstance(current, _Recovering):
                    current = self._recovered(name, event)
                if current is None or current.agent != name or current.loop_run_id is not None:
                    # Not a run this gateway accepted: the library used directly, or a run that a
                    # tool of an accepted run started (it inherits the context).
                    return
                record = current
                record.loop_run_id = event.run_id
                loop_runs[event.run_id] = record
                registry.start(record)
                return
            kind = event.type
            if kind == "context":
                record.entered = True
            elif kind == "done":
                loop_runs.pop(event.run_id, None)
                if self.forcing and not record.entered:
                    return  # cancelled before it started: it goes back into the queue
                self.finish_report(record, event.report)
            else:
                found = translate(event)
                if found is not None and not record.finished:
                    registry.publish(record, found[0], found[1])

        return on_event

    def _recovered(self, name: str, event: Any) -> RunRecord | None:
        """The record of a request the agent resumed from its queue at start (``RunStarted`` names
        the queue's request)."""
        request_id = getattr(event, "request_id", None)
        return self.registry.get(request_id) if isinstance(request_id, str) else None

    def finish_report(self, record: RunRecord, report: RunReport) -> None:
        """End ``record`` with a run's report (no-op if it has ended)."""
        if record.finished:
            return
        usage = report.total_usage.to_dict()
        if report.error is not None:
            error = error_of(report.error_type or "RunError", report.error)
            if error["code"] == "busy":
                error["retryAfterMs"] = round(self.busy_retry_after * 1000)
            self.finish(record, status="error", reason=report.reason, error=error, usage=usage)
            return
        # The loop fired message_received / message_sending / message_sent itself: final_text is
        # what those hooks left.
        self.finish(record, status="ok", reason=report.reason, text=report.final_text, usage=usage)

    def finish(self, record: RunRecord, **fields: Any) -> None:
        self.registry.finish(record, **fields)
        if record.loop_run_id is not None:
            self._loop_runs.pop(record.loop_run_id, None)
