"""The approval gate and the tool-call journal, as the loop uses them.

A call the policy marks ``ask`` is checkpointed (a synced ``approval`` transcript record holding
the request and the run's state), announced, and waits for a decision. Every call that is about to
run is journaled first (a ``tool_start`` record, flushed): after a crash, a call with a start and no
result is *in doubt* and is never re-run silently.
"""

from __future__ import annotations

import asyncio
import inspect
from datetime import UTC, datetime, timedelta
from typing import Any

from loopwright.approvals import ApprovalDecision, ApprovalRequest, approval_id_for, call_digest
from loopwright.events import ApprovalRequested, ApprovalResolved
from loopwright.loop._state import RunState
from loopwright.messages import ToolCall, now_iso
from loopwright.report import parse_arguments
from loopwright.sessions._codec import TranscriptRecord

__all__ = ["IN_DOUBT", "ask", "journal_start"]

IN_DOUBT = (
    "in doubt: this call started but the run was interrupted before it finished, so whether it took "
    "effect is unknown; it was not run again. Check its effect before you retry it."
)


async def journal_start(run: RunState, call: ToolCall) -> None:
    record = TranscriptRecord(
        type="tool_start",
        data={"call_id": call.id, "tool": call.name},
        run_id=run.run_id,
        timestamp=now_iso(),
    )
    await run.setup.store.append(run.session_id, [record])


async def ask(
    run: RunState, step: int, call: ToolCall, arguments: str, why: str
) -> tuple[ApprovalDecision, str]:
    """Wait for a decision on ``call`` (with the exact ``arguments`` that will run); returns it and who
    gave it (``approver``, ``api``, ``timeout``, ``resume``)."""
    prefed = run.prefed.pop(call.id, None)
    if prefed is not None:
        decision, by, digest = prefed
        if digest and digest != call_digest(call.name, arguments):  # not what was shown: refuse it
            decision, by = ApprovalDecision("deny", note="the arguments differ from the approved ones"), by
        await _record_resolution(run, call, (decision, by))
        return decision, by
    setup = run.setup
    timeout = setup.config.approval_timeout
    now = datetime.now(UTC)
    request = ApprovalRequest(
        approval_id=approval_id_for(run.run_id, call.id),
        run_id=run.run_id,
        session_id=run.session_id,
        call_id=call.id,
        tool=call.name,
        arguments=parse_arguments(arguments),
        arguments_json=arguments,
        reason=why,
        requested_at=now.isoformat(timespec="milliseconds"),
        expires_at=(now + timedelta(seconds=timeout)).isoformat(timespec="milliseconds"),
        digest=call_digest(call.name, arguments),
    )
    snapshot = run_snapshot(run, step, call, request)
    record = TranscriptRecord(
        type="approval", data={"state": "pending", **snapshot}, run_id=run.run_id, timestamp=now_iso()
    )
    await setup.store.append(run.session_id, [record])
    if run.session is not None and not run.session.awaiting_approval:
        run.session.awaiting_approval = True  # where Agent.checkpoints() looks after a crash
        await setup.store.save_info(run.session)
    await setup.store.sync(run.session_id)  # a crash from here on can be resumed
    approver = run.request.approver or setup.approver
    # with an approver, it alone decides: the call is not offered to resolve_approval()
    future = setup.approvals.open(request, snapshot) if approver is None else None
    try:
        if run.sink.active:
            await run.sink.emit(ApprovalRequested(run_id=run.run_id, request=request))
        try:
            async with asyncio.timeout(timeout):
                if future is not None:
                    outcome = await future
                else:
                    outcome = (await _ask_approver(approver, request), "approver")
        except TimeoutError:
            outcome = (ApprovalDecision("deny", note=f"no decision within {timeout:g} s"), "timeout")
    finally:
        setup.approvals.close(request.approval_id)
    await _record_resolution(run, call, outcome)
    return outcome


async def _ask_approver(approver: Any, request: ApprovalRequest) -> ApprovalDecision:
    """The approver's decision; an approver that fails or answers nonsense denies the call."""
    try:
        answer = approver(request)
        if inspect.isawaitable(answer):
            answer = await answer
        return ApprovalDecision.of(answer)
    except Exception as exc:
        return ApprovalDecision("deny", note=f"the approver failed: {type(exc).__name__}: {exc}")


def run_snapshot(run: RunState, step: int, call: ToolCall, request: ApprovalRequest) -> dict[str, Any]:
    """What a new process needs to continue this run at ``request`` (the transcript has the rest)."""
    caller = run.request.caller
    return {
        "version": 1,
        "agent": run.setup.agent_name,
        "tools": sorted(run.setup.tools),
        "runId": run.run_id,
        "sessionId": run.session_id,
        "step": step,
        "message": run.request.message,
        "caller": None if caller is None else caller.to_dict(),
        "report": run.report.to_dict(),
        "request": request.to_dict(),
        "callDigest": call_digest(call.name, call.arguments),
    }


async def _record_resolution(run: RunState, call: ToolCall, outcome: tuple[ApprovalDecision, str]) -> None:
    decision, by = outcome
    record = TranscriptRecord(
        type="approval",
        data={"state": "resolved", "callId": call.id, "by": by, **decision.to_dict()},
        run_id=run.run_id,
        timestamp=now_iso(),
    )
    await run.setup.store.append(run.session_id, [record])
    if run.sink.active:
        await run.sink.emit(
            ApprovalResolved(run_id=run.run_id, call_id=call.id, decision=decision.decision, by=by)
        )
