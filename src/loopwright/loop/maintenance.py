"""Session maintenance outside a run: compact now, undo the last compaction.

Both take the session's lock like a run does, so they never interleave with one.
"""

from __future__ import annotations

from dataclasses import dataclass

from loopwright.context.compaction import active_compaction
from loopwright.errors import NotFoundError
from loopwright.loop._compact import compact, context_tokens
from loopwright.loop._context import load_context
from loopwright.loop._sink import EventSink
from loopwright.loop._state import RunRequest, RunSetup, RunState
from loopwright.messages import now_iso
from loopwright.sessions._codec import TranscriptRecord

__all__ = ["CompactionResult", "compact_session", "uncompact_session"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionResult:
    compacted: bool
    tokens_before: int
    tokens_after: int
    summary: str


async def compact_session(
    setup: RunSetup, session_id: str, sink: EventSink | None = None
) -> CompactionResult:
    """Summarise the session's older messages now, whatever its size (``/compact``)."""
    run = RunState(
        setup=setup, request=RunRequest(message="(compact)", session_id=session_id), sink=sink or EventSink()
    )
    await _require(setup, session_id)
    lease = await setup.locks.acquire(
        session_id,
        run.run_id,
        wait=setup.config.queue_timeout,
        lease=setup.config.lock_timeout,
        max_waiters=setup.config.max_queue_depth,
    )
    try:
        await load_context(run)
        before = context_tokens(run)
        done = await compact(run, reason="manual", force=True)
        await setup.store.sync(session_id)
        return CompactionResult(
            compacted=done, tokens_before=before, tokens_after=context_tokens(run), summary=run.summary
        )
    finally:
        await setup.store.close(session_id)
        await setup.locks.release(lease)


async def uncompact_session(setup: RunSetup, session_id: str) -> str | None:
    """Undo the compaction in force (the originals were kept); returns its id, or None if none."""
    await _require(setup, session_id)
    lease = await setup.locks.acquire(
        session_id,
        "uncompact",
        wait=setup.config.queue_timeout,
        lease=setup.config.lock_timeout,
        max_waiters=setup.config.max_queue_depth,
    )
    try:
        active, _ = active_compaction((await setup.store.load(session_id)).entries)
        if active is None:
            return None
        record = TranscriptRecord(type="uncompact", data={"compaction": active.id}, timestamp=now_iso())
        await setup.store.append(session_id, [record])
        await setup.store.sync(session_id)
        return active.id
    finally:
        await setup.store.close(session_id)
        await setup.locks.release(lease)


async def _require(setup: RunSetup, session_id: str) -> None:
    if await setup.store.get(session_id) is None:
        raise NotFoundError("session", session_id)
