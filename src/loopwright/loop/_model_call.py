"""One model step: stream the call, retry what may succeed on a second try, fall back along the chain.

Retries are the loop's (every provider SDK's own retries are off): a retryable
:class:`~loopwright.errors.ModelError` is tried again after ``retry_backoff * 2**attempt`` seconds, or
the provider's ``retry-after`` when it gave one (never more than ``max_retry_delay``), at most
``max_retries`` times, each visible as a ``ModelRetry`` event. If text of the failed attempt was
already streamed, a ``StepDiscarded`` event tells consumers to drop it first. A step is retried only
while it is streaming, so never after one of its tools has run. When a model fails for good, the next
model of the agent's chain gets the step (``ModelFallback``); when the last one fails, the error ends
the run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from loopwright.errors import ModelError
from loopwright.events import ModelFallback, ModelRetry, StepDiscarded, StepStarted, TextChunk, ThinkingChunk
from loopwright.loop._sink import EventSink
from loopwright.loop._state import RunState
from loopwright.messages import Message
from loopwright.models._accumulate import StepAccumulator
from loopwright.models.base import Model, ModelEvent, ModelRequest, TextDelta, ThinkingDelta, ToolDefinition

__all__ = ["call_model"]


async def call_model(
    run: RunState,
    step: int,
    *,
    tools: Sequence[ToolDefinition],
    note: str | None = None,
    system: str | None = None,
    messages: Sequence[Message] | None = None,
    silent: bool = False,
) -> tuple[StepAccumulator, float, Model]:
    """Return the step's accumulated answer, the latency of the call that produced it, and its model.

    ``note`` is appended to the system prompt for this call only (the wind-down instruction).
    ``system``/``messages`` replace the run's for a side call (a compaction), which is ``silent``:
    its text is not streamed to the run's consumers."""
    setup, cfg = run.setup, run.setup.config
    sink = _SILENT if silent else run.sink
    if sink.active:
        await sink.emit(StepStarted(run_id=run.run_id, step=step))
    if system is None:
        system = run.system if note is None else f"{run.system}\n\n{note}"
    stable = run.stable_prompt if messages is None else ""
    models = setup.models
    for position, model in enumerate(models):
        attempt = 0
        while True:
            if messages is not None:
                sent = messages
            elif run.pruning:
                sent = run.view()
            else:
                sent = run.messages
            request = ModelRequest(
                system=system,
                messages=sent,
                stable_system=stable,
                tools=tools,
                settings=setup.settings,
                run_id=run.run_id,
                session_id=run.session_id,
            )
            acc = run.current = StepAccumulator()
            started = run.current_started = time.perf_counter()
            try:
                # The provider enforces the model timeout (its HTTP client's, set from model_timeout
                # when the agent builds it), so reading the stream needs no timer of ours here.
                add = acc.add
                if sink.active:
                    async for event in model.stream(request):
                        add(event)
                        await _forward(run, sink, event)
                else:
                    async for event in model.stream(request):
                        add(event)
            except ModelError as exc:
                error = exc
            else:
                run.current = None
                if messages is None:
                    usage = acc.usage
                    reported = usage.input_tokens
                    if model.name.startswith("anthropic:"):  # Anthropic reports the cached part apart
                        reported += usage.cache_read_tokens + usage.cache_write_tokens
                    if reported > 0:  # anchor the context estimate to the provider's count
                        run.estimate.record_actual(reported, len(sent) - 1)
                return acc, (time.perf_counter() - started) * 1000.0, model
            if acc.streamed and sink.active:
                await sink.emit(StepDiscarded(run_id=run.run_id, step=step, reason=str(error)))
            if error.retryable and attempt < cfg.max_retries:
                delay = error.retry_after if error.retry_after is not None else cfg.retry_backoff * 2**attempt
                delay = max(0.0, min(delay, cfg.max_retry_delay))
                attempt += 1
                run.report.retries += 1
                if sink.active:
                    await sink.emit(
                        ModelRetry(
                            run_id=run.run_id,
                            step=step,
                            attempt=attempt,
                            delay=delay,
                            model=model.name,
                            error=str(error),
                            status=error.status,
                        )
                    )
                await asyncio.sleep(delay)
                continue
            if position + 1 == len(models):
                raise error
            if sink.active:
                await sink.emit(
                    ModelFallback(
                        run_id=run.run_id,
                        step=step,
                        failed=model.name,
                        next=models[position + 1].name,
                        error=str(error),
                    )
                )
            break
    raise AssertionError("unreachable: an agent always has at least one model")  # pragma: no cover


async def _forward(run: RunState, sink: EventSink, event: ModelEvent) -> None:
    if type(event) is TextDelta:
        if event.text:
            await sink.emit(TextChunk(run_id=run.run_id, text=event.text))
    elif type(event) is ThinkingDelta and event.text:
        await sink.emit(ThinkingChunk(run_id=run.run_id, text=event.text))


_SILENT = EventSink()
