"""Compaction and memory flush inside a run (rules in :mod:`loopwright.context.compaction`).

Before each model call the loop checks the context estimate against ``context_window -
reserve_floor``; over it, older messages are summarised by the model and the summary replaces them
in the context (the transcript keeps them, plus a ``compaction`` record). A provider's "context too
long" answer forces a compaction and the interrupted step is retried once. If the context still does
not fit, the run stops with :class:`~loopwright.errors.ContextOverflowError` and nothing is written.

At the start of a run whose context is over ``context_window - flush_threshold``, and when no flush
happened since the last compaction, a silent turn first asks the agent to store durable notes with
its memory tool; an answer of ``NO_REPLY`` is never shown.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

from loopwright.context.compaction import (
    COMPACTION_SYSTEM,
    anchor_of,
    choose_cut,
    compaction_prompt,
    extract_identifiers,
    missing_identifiers,
)
from loopwright.context.prompt import compose_system_prompt, dynamic_layers
from loopwright.context.tokens import message_chars
from loopwright.errors import ContextOverflowError
from loopwright.events import CompactionEnded, CompactionStarted
from loopwright.hooks._events import CompactionHook
from loopwright.loop._model_call import call_model
from loopwright.loop._state import RunState
from loopwright.messages import Message, UserMessage, now_iso
from loopwright.report import StepReport
from loopwright.sessions._codec import TranscriptRecord

__all__ = ["compact", "compose_system", "context_tokens", "flush_memory", "surely_small", "usable_window"]

FLUSH_TOOL = "memory_write"
NO_REPLY = "NO_REPLY"
FLUSH_NOTE = (
    "## Memory flush\nThis session is nearing compaction: older messages will soon be replaced by a "
    "summary. Store durable memories now."
)
FLUSH_PROMPT = (
    f"Write any lasting notes (facts about the user, decisions, open tasks) with {FLUSH_TOOL}; "
    f"reply with {NO_REPLY} if there is nothing to store."
)
_FLUSH_STEPS = 3

#: The share of the usable window kept verbatim (the most recent messages) at a compaction.
KEEP_FRACTION = 0.25
#: Old large tool results are pruned from what is sent once the context passes this share of the window.
PRUNE_FROM = 0.5
_FRAMING_CHARS = 16
"""Characters counted for a message's role and separators in the counting-free bound."""


def usable_window(run: RunState) -> int:
    cfg = run.setup.config
    return cfg.context_window - cfg.reserve_floor


def context_tokens(run: RunState, *, pruned: bool = True) -> int:
    """The estimate of what the next call sends: the provider's last reported input tokens plus the
    messages added since, each counted once. ``pruned=False`` estimates the unpruned context, an
    upper bound that needs no pruning pass (pruning only ever shortens)."""
    messages = run.view() if pruned else run.messages
    return run.estimate.estimate(run.system, messages, tools=run.tool_defs)


def compose_system(run: RunState, memory: str) -> None:
    """The run's system prompt: the agent's stable prefix, then summary, memory and the time."""
    dynamic = compose_system_prompt(
        dynamic_layers(memory=memory, now=_now(), summary=run.summary, recalled=run.recalled)
    )
    run.memory_text = memory
    setup = run.setup
    run.stable_prompt = (
        setup.stable_prompt if run.tool_defs is setup.tool_defs else setup.stable_prompt_for(run.tool_defs)
    )
    run.system = f"{run.stable_prompt}\n\n{dynamic}"


def _now() -> datetime:
    return datetime.now(UTC)


def surely_small(run: RunState, limit: int | None = None) -> bool:
    """A bound that needs no counting: the provider's last reported input tokens plus the characters
    of every message since (a token is at least one character) stay under ``PRUNE_FROM`` of the
    window. True on most steps of most runs, so the estimate and the pruning pass are skipped."""
    if limit is None:
        cfg = run.setup.config
        limit = cfg.context_window - cfg.reserve_floor
    anchor = run.estimate.anchor
    if anchor is None:  # the run's first check: everything, tool schemas included, as characters
        bound, start = len(run.system) + run.setup.tool_chars, 0
    else:
        bound, start = anchor[0], anchor[1] + 1
    for m in run.messages[start:]:
        bound += message_chars(m) + _FRAMING_CHARS
    return bound <= limit * PRUNE_FROM


async def compact(run: RunState, *, reason: str, force: bool = False) -> bool:
    """Compact the run's context if it is over the window (or ``force``); True if it did.

    Raises :class:`ContextOverflowError` (with nothing written) when even a compaction cannot make the
    context fit."""
    limit = usable_window(run)
    if not force and surely_small(run, limit):
        return False
    unpruned = context_tokens(run, pruned=False)
    run.pruning = unpruned > limit * PRUNE_FROM
    if not force and unpruned <= limit:
        return False  # the unpruned context fits (pruning only ever shortens it)
    before = context_tokens(run)
    if not force and before <= limit:
        return False
    messages = run.messages
    counts = run.estimate.message_counts(messages)
    current_user = next(
        (i for i in range(len(messages) - 1, -1, -1) if type(messages[i]) is UserMessage), len(messages) - 1
    )
    keep = int(limit * KEEP_FRACTION)
    if force:  # asked for (manual, or the provider said "too long"): keep a third of what there is
        keep = min(keep, sum(counts) // 3)
    cut = choose_cut(messages, counts, keep, must_keep=current_user)
    if cut is None or sum(counts[cut:]) > limit - keep // 2:
        cut = choose_cut(messages, counts, keep, must_keep=len(messages) - 1)  # cut inside this run
    if cut is None:
        raise ContextOverflowError(before, limit, "there is nothing older to summarise")
    if run.sink.active:
        await run.sink.emit(CompactionStarted(run_id=run.run_id, reason=reason, tokens_before=before))
    hooks = run.setup.hooks
    if hooks.has("before_compaction"):
        await hooks.fire(
            "before_compaction",
            CompactionHook(run_id=run.run_id, session_id=run.session_id, reason=reason, tokens_before=before),
        )
    covered = messages[:cut]
    kept = messages[cut:]
    identifiers = extract_identifiers(covered, run.summary)
    started = time.perf_counter()
    summary, usage_steps = await _summarise(run, covered, identifiers)
    previous_summary, previous_messages = run.summary, run.messages
    run.summary = summary
    run.messages = kept
    run.estimate.reset()  # the anchored range was replaced
    compose_system(run, run.memory_text)
    after = context_tokens(run)
    if after > limit:
        run.summary, run.messages = previous_summary, previous_messages
        compose_system(run, run.memory_text)
        raise ContextOverflowError(after, limit, "the most recent messages alone are too long")
    keep_run, keep_offset = anchor_of(messages, cut)
    record = TranscriptRecord(
        type="compaction",
        data={
            "id": str(uuid.uuid4()),
            "reason": reason,
            "keep_from": {"run": keep_run, "offset": keep_offset},
            "covered": len(covered),
            "summary": summary,
            "tokens_before": before,
            "tokens_after": after,
            "model": run.setup.model.name,
            "usage": [s.usage.to_dict() for s in usage_steps],
            "latency_ms": round((time.perf_counter() - started) * 1000.0, 3),
        },
        run_id=run.run_id,
        timestamp=now_iso(),
    )
    await run.setup.store.append(run.session_id, [record])
    run.flushed = False
    for step in usage_steps:
        run.add_step(step)
    run.compactions += 1
    if hooks.has("after_compaction"):
        await hooks.fire(
            "after_compaction",
            CompactionHook(
                run_id=run.run_id,
                session_id=run.session_id,
                reason=reason,
                tokens_before=before,
                summary=summary,
                tokens_after=after,
            ),
        )
    if run.sink.active:
        await run.sink.emit(
            CompactionEnded(
                run_id=run.run_id,
                compaction_id=str(record.data["id"]),
                covered=len(covered),
                tokens_before=before,
                tokens_after=after,
            )
        )
    return True


async def _summarise(
    run: RunState, covered: list[Message], identifiers: list[str]
) -> tuple[str, list[StepReport]]:
    steps: list[StepReport] = []
    missing: list[str] = []
    summary = ""
    for _attempt in range(2):
        prompt = compaction_prompt(run.summary, covered, missing)
        acc, latency_ms, model = await call_model(
            run,
            len(run.report.steps),
            tools=(),
            system=COMPACTION_SYSTEM,
            messages=[UserMessage(content=prompt)],
            silent=True,
        )
        price = run.setup.price_for(model.name)
        steps.append(
            StepReport(
                index=len(run.report.steps) + len(steps),
                type="compaction",
                llm_latency_ms=latency_ms,
                usage=acc.usage,
                finish_reason=acc.response().finish_reason,
                model=acc.model or model.name,
                cost_usd=None if price is None else price.cost(acc.usage),
            )
        )
        summary = acc.text.strip()
        missing = missing_identifiers(summary, identifiers)
        if not missing:
            return summary, steps
    # The model dropped identifiers twice: keep them verbatim rather than lose them.
    listed = "\n".join(f"- {i}" for i in missing)
    return f"{summary}\n\n## Identifiers\n{listed}", steps


async def flush_memory(run: RunState) -> bool:
    """The silent memory-flush turn, when the context nears the window and none happened in this
    compaction cycle. Its messages are kept (marked ``{"flush": true}``); ``NO_REPLY`` is never shown.
    True if it ran."""
    cfg = run.setup.config
    if run.flushed or FLUSH_TOOL not in run.tools:
        return False
    if context_tokens(run) <= cfg.context_window - cfg.flush_threshold:
        return False
    from loopwright.loop._execute import flush_turn

    prompt = UserMessage(content=FLUSH_PROMPT, run_id=run.run_id, timestamp=now_iso(), meta={"flush": True})
    await run.setup.store.append(run.session_id, [prompt])
    run.appended += 1
    run.messages.append(prompt)
    await flush_turn(run, FLUSH_NOTE, _FLUSH_STEPS)
    record = TranscriptRecord(type="memory_flush", data={}, run_id=run.run_id, timestamp=now_iso())
    await run.setup.store.append(run.session_id, [record])
    run.flushed = True
    return True
