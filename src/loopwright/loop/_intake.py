"""INTAKE: validate the message, resolve the session, take the session's lock."""

from __future__ import annotations

import time

from loopwright.errors import EmptyMessageError, MessageTooLargeError, RunError
from loopwright.hooks._events import SessionHook
from loopwright.loop._state import RunState
from loopwright.sessions.base import SessionInfo, validate_session_id

__all__ = ["intake", "validate_message"]

_TITLE_CHARS = 80


def validate_message(message: str, limit: int) -> None:
    """Raise before any side effect if the message is empty or too large."""
    if not isinstance(message, str) or not message.strip():
        raise EmptyMessageError()
    size = len(message) if message.isascii() else len(message.encode("utf-8"))
    if size > limit:
        raise MessageTooLargeError(size, limit)


async def intake(run: RunState) -> None:
    cfg = run.setup.config
    validate_message(run.request.message, cfg.max_message_bytes)
    session_id = validate_session_id(run.session_id)
    wait = cfg.queue_timeout if run.request.wait is None else run.request.wait
    waiting = time.perf_counter()
    run.lease = await run.setup.locks.acquire(
        session_id, run.run_id, wait=wait, lease=cfg.lock_timeout, max_waiters=cfg.max_queue_depth
    )
    if run.setup.slots is not None:  # the global lane; what waiting for the session took counts
        await run.setup.slots.acquire(session_id, max(0.0, wait - (time.perf_counter() - waiting)))
        run.has_slot = True
    run.report.queued_ms = (time.perf_counter() - waiting) * 1000.0
    store = run.setup.store
    info = await store.get(session_id)
    if info is None:
        first_line = run.request.message.strip().splitlines()[0]
        info = SessionInfo(id=session_id, agent=run.setup.agent_name, title=first_line[:_TITLE_CHARS])
        await store.create(info)
        if run.setup.hooks.has("session_start"):
            run.session = info  # accepted from here on: the run persists whatever the hook does
            await run.setup.hooks.fire(
                "session_start", SessionHook(session_id=session_id, reason="new", caller=run.request.caller)
            )
    elif info.terminated:
        raise RunError(f"session {session_id!r} is terminated; start a new session")
    run.session = info
