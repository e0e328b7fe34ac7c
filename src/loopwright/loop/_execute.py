"""EXECUTE: call the model, stream its deltas, run the tools it asks for, repeat until it answers."""

from __future__ import annotations

import time

from loopwright.events import StepEnded, StepStarted, TextChunk, ThinkingChunk
from loopwright.loop._state import RunState
from loopwright.loop._tools import run_tool_calls
from loopwright.messages import AssistantMessage, now_iso
from loopwright.models._accumulate import StepAccumulator
from loopwright.models.base import ModelRequest, TextDelta, ThinkingDelta
from loopwright.report import StepReport

__all__ = ["execute", "keep_partial"]


async def execute(run: RunState) -> None:
    """Run model steps until a final answer, the step limit, a stop request or a runaway loop."""
    max_steps = run.config.max_tool_iterations
    step = 0
    while True:
        if run.stop_requested:
            run.report.reason = "stopped"
            run.report.final_text = _last_text(run)
            return
        acc, latency_ms = await _model_step(run, step)
        assistant = acc.message(model=run.setup.model.name, run_id=run.run_id, timestamp=now_iso())
        await run.setup.store.append(run.session_id, [assistant])
        run.appended += 1
        run.messages.append(assistant)
        calls = assistant.tool_calls
        report = StepReport(
            index=step,
            type="initial" if step == 0 else "tool_followup",
            llm_latency_ms=latency_ms,
            usage=acc.usage,
            finish_reason=assistant.finish_reason or "stop",
            model=assistant.model,
        )
        run.add_step(report)  # before the tools run: a run cut short mid-step still reports the step
        if calls:
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
        if not calls:
            run.report.reason = "done"
            run.report.final_text = assistant.content
            return
        if run.repeat_offences >= 2:
            run.report.reason = "loop_detected"
            run.report.final_text = _last_text(run)
            run.report.error = "stopped a runaway loop: the model kept repeating the same tool call"
            run.report.error_type = "LoopDetected"
            return
        step += 1
        if step >= max_steps:
            run.report.reason = "max_steps"
            run.report.final_text = _last_text(run)
            return


async def _model_step(run: RunState, step: int) -> tuple[StepAccumulator, float]:
    setup = run.setup
    sink = run.sink
    if sink.active:
        await sink.emit(StepStarted(run_id=run.run_id, step=step))
    request = ModelRequest(
        system=run.system,
        messages=run.messages,
        stable_system=setup.stable_prompt,
        tools=setup.tool_defs,
        settings=setup.settings,
        run_id=run.run_id,
        session_id=run.session_id,
    )
    acc = run.current = StepAccumulator()
    started = run.current_started = time.perf_counter()
    if sink.active:
        run_id = run.run_id
        async for event in setup.model.stream(request):
            acc.add(event)
            if type(event) is TextDelta:
                if event.text:
                    await sink.emit(TextChunk(run_id=run_id, text=event.text))
            elif type(event) is ThinkingDelta and event.text:
                await sink.emit(ThinkingChunk(run_id=run_id, text=event.text))
    else:
        async for event in setup.model.stream(request):
            acc.add(event)
    latency_ms = (time.perf_counter() - started) * 1000.0
    run.current = None
    return acc, latency_ms


async def keep_partial(run: RunState, why: str) -> None:
    """Record a model step cut short (stop, timeout, model error): its report, and its text without
    its tool calls (they never ran)."""
    acc, run.current = run.current, None
    if acc is None:
        return
    run.add_step(
        StepReport(
            index=len(run.report.steps),
            type="initial" if not run.report.steps else "tool_followup",
            llm_latency_ms=(time.perf_counter() - run.current_started) * 1000.0,
            usage=acc.usage,
            finish_reason=why,
            model=acc.model or run.setup.model.name,
        )
    )
    if not acc.text:
        return
    partial = AssistantMessage(
        content=acc.text,
        model=acc.model or run.setup.model.name,
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
