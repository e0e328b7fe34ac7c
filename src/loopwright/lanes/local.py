"""In-process session locks: FIFO waiters per session, a waiting-depth limit and a wait timeout."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

from loopwright.errors import SessionBusyError
from loopwright.lanes.base import LockLease

__all__ = ["LocalSessionLocks"]


@dataclass(slots=True)
class _Slot:
    lease: LockLease | None = None
    waiters: deque[asyncio.Future[None]] = field(default_factory=deque)


class LocalSessionLocks:
    """Implements :class:`~loopwright.lanes.SessionLocks` for runs inside one process.

    Waiters are served in arrival order. Entries are dropped as soon as nobody holds or waits, so
    the object can be reused across event loops (``run_sync`` starts a new one each time).
    """

    def __init__(self) -> None:
        self._slots: dict[str, _Slot] = {}

    def holder(self, session_id: str) -> LockLease | None:
        slot = self._slots.get(session_id)
        return slot.lease if slot is not None else None

    def waiting(self, session_id: str) -> int:
        slot = self._slots.get(session_id)
        return len(slot.waiters) if slot is not None else 0

    async def acquire(
        self, session_id: str, run_id: str, *, wait: float, lease: float, max_waiters: int
    ) -> LockLease:
        slot = self._slots.get(session_id)
        if slot is None:
            slot = self._slots[session_id] = _Slot()
        if slot.lease is None and not slot.waiters:
            slot.lease = LockLease.new(session_id, run_id, lease)
            return slot.lease
        if wait <= 0:
            raise SessionBusyError(session_id, "another run is in progress", retry_after=1.0)
        if len(slot.waiters) >= max_waiters:
            raise SessionBusyError(
                session_id, f"{len(slot.waiters)} requests are already waiting (limit {max_waiters})"
            )
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        slot.waiters.append(future)
        try:
            async with asyncio.timeout(wait):
                await future
        except BaseException as exc:
            if future.done() and not future.cancelled():
                # The lock was handed to us just as we gave up waiting: pass it on.
                self._hand_over(session_id, slot)
            else:
                future.cancel()
            if isinstance(exc, TimeoutError):
                raise SessionBusyError(
                    session_id, f"waited {wait:g} s for the running run; retry later", retry_after=wait
                ) from None
            raise
        finally:
            if future in slot.waiters:
                slot.waiters.remove(future)
        slot.lease = LockLease.new(session_id, run_id, lease)
        return slot.lease

    async def release(self, lease: LockLease) -> None:
        slot = self._slots.get(lease.session_id)
        if slot is None or slot.lease is None or slot.lease.run_id != lease.run_id:
            return
        self._hand_over(lease.session_id, slot)

    def _hand_over(self, session_id: str, slot: _Slot) -> None:
        slot.lease = None
        while slot.waiters:
            nxt = slot.waiters.popleft()
            if not nxt.done():
                # Reserve the slot for the waiter; it installs its own lease when it wakes.
                slot.lease = LockLease(
                    session_id=session_id, run_id="(handing over)", acquired_at=0, expires_at=0
                )
                nxt.set_result(None)
                return
        del self._slots[session_id]
