"""One run of the agent loop: INTAKE → CONTEXT → EXECUTE → PERSIST.

Read this file as the table of contents; each stage lives in its own module. Whatever happens —
a tool raising, the model failing, the timeout, ``stop()``, cancellation — the run ends here with
its open tool calls closed, its report saved, the session's lock released and ``loop:end`` emitted.
"""

from __future__ import annotations

import asyncio
import logging
import time

from loopwright.errors import InputError, LoopwrightError, ModelError, NotFoundError, RunTimeoutError
from loopwright.events import ContextBuilt, ExecuteStarted, PersistStarted, RunEnded, RunFailed, RunStarted
from loopwright.hooks._bus import StopRun
from loopwright.hooks._events import AgentEnd, AgentStart, MessageHook
from loopwright.loop._compact import context_tokens
from loopwright.loop._context import build_context
from loopwright.loop._execute import execute, keep_partial
from loopwright.loop._intake import intake
from loopwright.loop._persist import persist
from loopwright.loop._state import RunState
from loopwright.report import RunReport

__all__ = ["run_loop"]

log = logging.getLogger("loopwright")

# Raised to the caller: the request was refused before the run was accepted.
_REFUSALS = (InputError, NotFoundError)


async def run_loop(run: RunState) -> RunReport:
    """Run to the end and return the report. Raises only when the request was refused before the
    run was accepted (bad input, busy session) or when the run was cancelled."""
    setup, sink = run.setup, run.sink
    if sink.active:
        meta = run.request.meta
        request_id = meta.get("request_id") if meta else None
        await sink.emit(RunStarted(run_id=run.run_id, session_id=run.session_id, request_id=request_id))
    failure: BaseException | None = None
    deadline: asyncio.Timeout | None = None
    try:
        await intake(run)
        deadline = asyncio.timeout(setup.config.execution_timeout)
        async with deadline:
            run.task = asyncio.current_task()
            try:
                await _context_and_execute(run)
            except StopRun as stop:  # a hook ended the run (a spent budget, a policy of its own)
                run.report.reason = stop.reason
                run.report.final_text = stop.message
                await _close_step(run, stop.reason)
            except asyncio.CancelledError:
                # Interrupted by a newer message ("interrupt" mode): that cancellation is ours to
                # absorb — the run ends "stopped" and its caller gets the report. Any other
                # cancellation (the caller's, the deadline's) goes on.
                task = run.task
                if not run.aborted or task is None or task.cancelling() != 1:
                    raise
                task.uncancel()
                run.report.reason = "stopped"
                await _close_step(run, "stopped")
    except BaseException as exc:
        if isinstance(exc, TimeoutError) and deadline is not None and deadline.expired():
            exc = RunTimeoutError(setup.config.execution_timeout)
        failure = _fail(run, exc)
        await _close_step(run, run.report.reason)
    finally:
        if run.report.error is not None and sink.active:
            await sink.emit(
                RunFailed(
                    run_id=run.run_id, error=run.report.error, error_type=run.report.error_type or "Error"
                )
            )
        if run.lease is not None:
            try:
                if run.session is not None:  # accepted: there is something to persist
                    if sink.active:
                        await sink.emit(PersistStarted(run_id=run.run_id))
                    await persist(run)
                else:
                    run.report.completed_at = time.time()
            finally:
                if run.has_slot and setup.slots is not None:
                    setup.slots.release()
                await setup.locks.release(run.lease)
        else:
            run.report.completed_at = time.time()
        if run.session is not None and setup.hooks.has_any(_AFTER_HOOKS):
            await _after_hooks(run)
        if sink.active:
            await sink.emit(RunEnded(run_id=run.run_id, report=run.report))
    if failure is not None and _should_raise(run, failure):
        raise failure
    return run.report


async def _context_and_execute(run: RunState) -> None:
    setup, sink = run.setup, run.sink
    hooks = setup.hooks
    if hooks.has("message_received") and run.request.resume is None:
        await hooks.fire("message_received", _message_hook(run, run.request.message))
    await build_context(run)
    if hooks.has("before_agent_start"):
        start = await hooks.fire(
            "before_agent_start",
            AgentStart(
                run_id=run.run_id,
                session_id=run.session_id,
                message=run.request.message,
                system=run.system,
                caller=run.request.caller,
            ),
        )
        if start.context:
            run.system = "\n\n".join((run.system, *start.context))
    if sink.active:
        tokens = context_tokens(run)  # counted only for someone who listens
        await sink.emit(
            ContextBuilt(run_id=run.run_id, token_estimate=tokens, message_count=len(run.messages))
        )
        await sink.emit(ExecuteStarted(run_id=run.run_id, tool_count=len(run.tools)))
    await execute(run)
    if hooks.has("message_sending"):
        sending = await hooks.fire("message_sending", _message_hook(run, run.report.final_text))
        run.report.final_text = sending.text


_AFTER_HOOKS = ("message_sent", "agent_end")


async def _after_hooks(run: RunState) -> None:
    """``message_sent`` and ``agent_end``: the run is persisted. A failing hook is logged, never raised."""
    hooks = run.setup.hooks
    try:
        if hooks.has("message_sent") and run.report.final_text:
            await hooks.fire("message_sent", _message_hook(run, run.report.final_text))
        if hooks.has("agent_end"):
            await hooks.fire(
                "agent_end",
                AgentEnd(
                    run_id=run.run_id, session_id=run.session_id, report=run.report, messages=run.messages
                ),
            )
    except StopRun:
        log.warning("run %s: StopRun raised after the run ended; ignored", run.run_id)


def _message_hook(run: RunState, text: str) -> MessageHook:
    return MessageHook(
        session_id=run.session_id,
        run_id=run.run_id,
        text=text,
        caller=run.request.caller,
        meta=dict(run.request.meta or {}),
    )


def _fail(run: RunState, exc: BaseException) -> BaseException:
    """Record why the run ended; return the exception (re-raised only if the run was never accepted)."""
    report = run.report
    if isinstance(exc, asyncio.CancelledError):
        report.reason = "stopped"
        return exc
    report.reason = "timeout" if isinstance(exc, RunTimeoutError) else "error"
    report.error = str(exc) or type(exc).__name__
    report.error_type = type(exc).__name__
    if not isinstance(exc, LoopwrightError):
        log.exception("run %s failed with an unexpected error", run.run_id, exc_info=exc)
    elif isinstance(exc, ModelError):
        log.warning("run %s: %s", run.run_id, exc)
    return exc


async def _close_step(run: RunState, why: str) -> None:
    if run.session is None:
        return
    try:
        await keep_partial(run, why)
    except Exception as exc:  # the store is failing too: the report says so, persist will retry
        log.error("could not keep the partial answer of run %s: %s", run.run_id, exc)


def _should_raise(run: RunState, exc: BaseException) -> bool:
    if isinstance(exc, asyncio.CancelledError) or not isinstance(exc, Exception):
        return True  # cancellation and interpreter exits always propagate
    if run.session is None:
        return True  # refused at INTAKE: nothing was accepted, the caller gets the exception
    return isinstance(exc, _REFUSALS)
