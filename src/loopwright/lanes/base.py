"""The session-lock contract: exactly one run per session at a time.

A backend hands out a :class:`LockLease` for a session and takes it back. The in-process backend
is :class:`~loopwright.lanes.LocalSessionLocks`; cross-process (file) and PostgreSQL backends
implement the same protocol.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["LockLease", "SessionLocks"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LockLease:
    """Exclusive access to one session, held by one run until released or expired."""

    session_id: str
    run_id: str
    acquired_at: float
    expires_at: float

    @classmethod
    def new(cls, session_id: str, run_id: str, lease_seconds: float) -> LockLease:
        now = time.time()
        return cls(session_id=session_id, run_id=run_id, acquired_at=now, expires_at=now + lease_seconds)


@runtime_checkable
class SessionLocks(Protocol):
    async def acquire(
        self, session_id: str, run_id: str, *, wait: float, lease: float, max_waiters: int
    ) -> LockLease:
        """Wait at most ``wait`` seconds for the session; raise ``SessionBusyError`` if it stays
        locked or if ``max_waiters`` runs are already waiting (``wait=0``: do not wait at all)."""
        ...

    async def release(self, lease: LockLease) -> None:
        """Give the session back. Never raises for a lease that is already gone."""
        ...

    def holder(self, session_id: str) -> LockLease | None:
        """The current lease of ``session_id`` in this process, if any."""
        ...
