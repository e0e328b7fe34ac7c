"""EXECUTE: call the model, stream its deltas, run the tools it asks for, repeat until it answers.

The run ends with a final answer, at ``max_tool_iterations`` (reason ``max_steps``), at a run limit
(reason ``limit``), on a stop request, or when the model repeats itself (``loop_detected``). Before
ending at a limit or at ``max_tool_iterations`` the loop *winds down*: one last call without tools
asks the model for its best final answer (``wind_down``, on by default).
"""

from __future__ import annotations

import time

from loopwright.errors import ContextLengthExceededError
from loopwright.events import LimitReached, StepEnded
from loopwright.guardrails import GuardrailContext
from loopwright.hooks._events import ModelCallHook
from loopwright.loop._compact import compact, context_tokens, surely_small
from loopwright.loop._limits import WIND_DOWN_NOTE, LimitHit, check_limits
from loopwright.loop._model_call import call_model
from loopwright.loop._sink import EventSink
from loopwright.loop._state import RunState
from loopwright.loop._tools import run_tool_calls
from loopwright.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage, now_iso
from loopwright.report import StepKind, StepReport, ToolCallReport

__all__ = ["execute", "keep_partial"]


async def execute(run: RunState) -> None:
    """Run model steps until the run ends; set ``run.report.reason`` and ``final_text``."""
    report = run.report
    limits = run.request.limits or run.setup.limits
    max_steps = run.setup.config.max_tool_iterations
    step = 0
    ending: str | None = None  # set when the next call is the last, tool-less one
    run.executing = True
    if run.request.resume is not None:
        step = await _finish_checkpointed_step(run, run.request.resume.step)
        if step >= max_steps:
            if not run.setup.config.wind_down:
                report.reason = "max_steps"
                report.final_text = _last_text(run)
                return
            await _limit_reached(run, LimitHit("max_tool_iterations", step, max_steps, over=False))
            ending = "max_steps"
    while True:
        if run.stop_requested or run.aborted:
            report.reason = "stopped"
            report.final_text = _last_text(run)
            return
        if ending is None and limits is not None:
            hit = check_limits(run, limits)
            if hit is not None:
                await _limit_reached(run, hit)
                if hit.over or not run.setup.config.wind_down:
                    report.reason, report.limit = "limit", hit.describe()
                    report.final_text = _last_text(run)
                    return
                ending, report.limit = "limit", hit.describe()
        if run.steering:
            await _take_steering(run)
        if not surely_small(run):
            await compact(run, reason="threshold")
        try:
            assistant = await _step(run, step, final=ending is not None)
        except _Tripped as tripped:
            report.reason = "guardrail"
            report.final_text = tripped.reason
            return
        calls = assistant.tool_calls
        if ending is not None:
            if calls:  # a model that calls tools anyway: its calls get results, and the run ends
                await _refuse_calls(run, calls, "not executed: the run reached its limit")
            report.reason = "limit" if ending == "limit" else "max_steps"
            report.final_text = assistant.content or _last_text(run)
            return
        if not calls:
            report.reason = "done"
            report.final_text = assistant.content
            return
        if run.repeat_offences >= 2:
            report.reason = "loop_detected"
            report.final_text = _last_text(run)
            report.error = "stopped a runaway loop: the model kept repeating the same tool call"
            report.error_type = "LoopDetected"
            return
        step += 1
        if step >= max_steps:
            if not run.setup.config.wind_down:
                report.reason = "max_steps"
                report.final_text = _last_text(run)
                return
            await _limit_reached(run, LimitHit("max_tool_iterations", step, max_steps, over=False))
            ending = "max_steps"


async def _step(
    run: RunState, step: int, *, final: bool, note: str | None = None, kind: StepKind | None = None
) -> AssistantMessage:
    """One model call and its tool calls; returns the assistant message it recorded. A provider's
    "context too long" compacts the context and retries the call once."""
    setup = run.setup
    tools = () if final else run.tool_defs
    if final:
        why = run.report.limit or f"{run.setup.config.max_tool_iterations} tool steps"
        note = WIND_DOWN_NOTE.format(why=why)
    if setup.guardrails:
        await _guard(run, step, "input", None)
    hooks = setup.hooks
    estimated = -1  # the context's tokens before the call, counted only for a hook that reads them
    if hooks.has("before_model_call") or hooks.has("after_model_call"):
        estimated = context_tokens(run)
    if hooks.has("before_model_call"):
        await hooks.fire("before_model_call", _model_hook(run, step, setup.model.name, estimated))
    try:
        acc, latency_ms, model = await call_model(run, step, tools=tools, note=note)
    except ContextLengthExceededError:
        if not await compact(run, reason="context_length", force=True):
            raise
        acc, latency_ms, model = await call_model(run, step, tools=tools, note=note)
    assistant = acc.message(model=model.name, run_id=run.run_id, timestamp=now_iso())
    await setup.store.append(run.session_id, [assistant])
    run.appended += 1
    run.messages.append(assistant)
    price = setup.price_for(model.name)
    if hooks.has("after_model_call"):
        done = _model_hook(run, step, model.name, estimated)
        done.usage = acc.usage
        done.cost_usd = None if price is None else price.cost(acc.usage)
        await hooks.fire("after_model_call", done)
    report = StepReport(
        index=len(run.report.steps),
        type=kind or ("initial" if step == 0 else "tool_followup"),
        llm_latency_ms=latency_ms,
        usage=acc.usage,
        finish_reason=assistant.finish_reason or "stop",
        model=assistant.model,
        cost_usd=None if price is None else price.cost(acc.usage),
    )
    run.add_step(report)  # before the tools run: a run cut short mid-step still reports the step
    calls = assistant.tool_calls
    if setup.guardrails:
        try:
            await _guard(run, step, "output", assistant)
        except _Tripped:
            if calls:  # the tripped answer's tool calls never run, but each gets its result
                await _refuse_calls(run, calls, "not executed: a guardrail stopped the run")
            raise
    if calls and not final:
        tools_started = time.perf_counter()
        await run_tool_calls(run, step, calls, report)
        report.tool_total_ms = (time.perf_counter() - tools_started) * 1000.0
    if run.sink.active:
        await run.sink.emit(
            StepEnded(
                run_id=run.run_id,
                step=step,
                usage=acc.usage,
                latency_ms=latency_ms + report.tool_total_ms,
                finish_reason=report.finish_reason,
            )
        )
    return assistant


def _model_hook(run: RunState, step: int, model: str, estimated: int) -> ModelCallHook:
    return ModelCallHook(
        run_id=run.run_id,
        session_id=run.session_id,
        step=step,
        model=model,
        estimated_input_tokens=estimated,
        max_output_tokens=run.setup.settings.max_tokens,
        caller=run.request.caller,
    )


class _Tripped(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


async def _guard(run: RunState, step: int, kind: str, response: AssistantMessage | None) -> None:
    """Run the guardrails of ``kind`` in order; the first tripwire stops the run."""
    ctx = GuardrailContext(
        run_id=run.run_id,
        session_id=run.session_id,
        step=step,
        system=run.system,
        messages=run.view(),
        response=response,
    )
    for check in run.setup.guardrails:
        if check.kind != kind:
            continue
        decision = await check.check(ctx)
        if decision.passed:
            continue
        reason = decision.reason or f"guardrail {check.name!r} failed"
        if decision.tripwire:
            raise _Tripped(reason)
        run.report.guardrail_failures.append(f"{check.name}: {reason}")


async def flush_turn(run: RunState, note: str, max_steps: int) -> None:
    """The silent memory-flush turn: up to ``max_steps`` model calls with the memory tool on offer,
    streamed to nobody; its answer (``NO_REPLY`` or not) is never the run's answer."""
    sink, run.sink = run.sink, EventSink()
    try:
        for step in range(max_steps):
            assistant = await _step(run, step, final=False, note=note, kind="memory_flush")
            if not assistant.tool_calls:
                return
        # still calling tools: give the open calls' turn a close so the conversation stays valid
    finally:
        run.sink = sink


async def _finish_checkpointed_step(run: RunState, step: int) -> int:
    """A resumed run first answers the calls its checkpoint left open (the approved one, the ones
    not reached yet, the ones in doubt), then goes on with the next step; returns that step."""
    assistant = next(
        (m for m in reversed(run.messages) if type(m) is AssistantMessage and m.tool_calls), None
    )
    if assistant is not None and assistant.run_id == run.run_id:
        answered = {
            m.tool_call_id for m in run.messages if type(m) is ToolResultMessage and m.run_id == run.run_id
        }
        calls = [c for c in assistant.tool_calls if c.id not in answered]
        if calls:
            if not run.report.steps:
                run.add_step(StepReport(index=0, type="initial" if step == 0 else "tool_followup"))
            await run_tool_calls(run, step, calls, run.report.steps[-1])
    return step + 1


async def _take_steering(run: RunState) -> None:
    """Messages sent in ``steer`` mode join the conversation before the next model call."""
    messages = [
        UserMessage(content=text, run_id=run.run_id, timestamp=now_iso(), meta={"steer": True})
        for text in run.steering
    ]
    run.steering.clear()
    await run.setup.store.append(run.session_id, messages)
    await run.setup.store.sync(run.session_id)
    run.appended += len(messages)
    run.messages.extend(messages)


async def _limit_reached(run: RunState, hit: LimitHit) -> None:
    if run.sink.active:
        await run.sink.emit(
            LimitReached(run_id=run.run_id, limit=hit.limit, value=hit.value, maximum=hit.maximum)
        )


async def _refuse_calls(run: RunState, calls: tuple[ToolCall, ...], why: str) -> None:
    results = [
        ToolResultMessage(
            tool_call_id=c.id,
            name=c.name,
            content=why,
            is_error=True,
            synthetic=True,
            run_id=run.run_id,
            timestamp=now_iso(),
        )
        for c in calls
    ]
    await run.setup.store.append(run.session_id, results)
    run.appended += len(results)
    run.messages.extend(results)
    run.report.steps[-1].tool_calls.extend(
        ToolCallReport(call_id=c.id, tool_name=c.name, arguments_json=c.arguments, skipped=True, error=why)
        for c in calls
    )


async def keep_partial(run: RunState, why: str) -> None:
    """Record a model step cut short (stop, timeout, model error): its report, and its text without
    its tool calls (they never ran)."""
    acc, run.current = run.current, None
    if acc is None:
        return
    model = acc.model or run.setup.model.name
    price = run.setup.price_for(run.setup.model.name)
    run.add_step(
        StepReport(
            index=len(run.report.steps),
            type="initial" if not run.report.steps else "tool_followup",
            llm_latency_ms=(time.perf_counter() - run.current_started) * 1000.0,
            usage=acc.usage,
            finish_reason=why,
            model=model,
            cost_usd=None if price is None else price.cost(acc.usage),
        )
    )
    if not acc.text:
        return
    partial = AssistantMessage(
        content=acc.text,
        model=model,
        usage=acc.usage,
        finish_reason=why,
        run_id=run.run_id,
        timestamp=now_iso(),
    )
    await run.setup.store.append(run.session_id, [partial])
    run.appended += 1
    run.messages.append(partial)
    run.report.final_text = acc.text


def _last_text(run: RunState) -> str:
    for m in reversed(run.messages):
        if m.role == "assistant" and m.content:
            return m.content if m.run_id == run.run_id else ""
        if m.role == "user":
            return ""
    return ""
