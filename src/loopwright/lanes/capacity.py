"""The global lane: at most ``max_concurrent_runs`` runs of an agent at once, across sessions.

A run takes its session's lock first and a slot second, so a run waiting for a busy session never
holds a slot another session could use. Waiting for a slot counts against ``queue_timeout``.
"""

from __future__ import annotations

import asyncio
import weakref

from loopwright.errors import SessionBusyError

__all__ = ["RunSlots"]


class RunSlots:
    """A counting limiter usable from any event loop (``run_sync`` starts a new one each time)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._semaphores.get(loop)
        if sem is None:
            sem = self._semaphores[loop] = asyncio.Semaphore(self.limit)
        return sem

    @property
    def in_use(self) -> int:
        try:
            sem = self._semaphore()
        except RuntimeError:
            return 0
        return self.limit - sem._value

    async def acquire(self, session_id: str, wait: float) -> None:
        sem = self._semaphore()
        if sem.locked() and wait <= 0:
            raise SessionBusyError(session_id, f"all {self.limit} run slots are busy", retry_after=1.0)
        try:
            async with asyncio.timeout(wait):
                await sem.acquire()
        except TimeoutError:
            raise SessionBusyError(
                session_id,
                f"waited {wait:g} s for one of {self.limit} run slots; retry later",
                retry_after=wait,
            ) from None

    def release(self) -> None:
        self._semaphore().release()
