"""Session locks across machines: PostgreSQL advisory locks, one dedicated connection per held lock.

**Why advisory locks on their own connection** (and not a row lock or a lease row alone): a
session-level ``pg_advisory_lock`` belongs to the database connection that took it. When the
gateway holding it dies — ``SIGKILL``, a crash, a lost machine — its connection ends and PostgreSQL
drops the lock itself; no sweeper has to notice first, and no clock has to be trusted. A row lock
would need a transaction open for the whole run (hours of ``idle in transaction``, vacuum held back,
and the same connection anyway); a lease row alone frees a dead holder's session only when its
lease runs out (900 s by default). TCP keepalives are set short on these connections, so a machine
that vanishes without closing its socket is noticed in about half a minute.

**Layers.** Inside a process, runs queue in a :class:`~loopwright.lanes.LocalSessionLocks` (arrival
order, ``max_waiters``, the ``wait`` timeout), exactly like :class:`~loopwright.lanes.FileSessionLocks`;
the run at the head then waits in PostgreSQL's own lock queue (``pg_advisory_lock`` under a short
``lock_timeout``, renewed until ``wait`` runs out), so at most one connection per process and
session waits, and a release wakes the next process at once, without polling. ``max_waiters``
counts this process's waiting runs plus the other processes waiting in PostgreSQL for the session.

**The lease** (``lockTimeout``). Once it holds the lock, a run writes ``{runId, backend pid, host,
pid, expiresAt}`` into ``scaleout_session_leases`` on the same connection (``expiresAt`` from the
database's clock, so machines with skewed clocks agree). A waiter that finds the holder's lease
expired *and* that backend still holding the lock terminates that backend
(``pg_terminate_backend``, with a warning): the lease (900 s) is well above ``executionTimeout``
(600 s), so a holder past it is stuck, not working. This needs the same database role for every
gateway (or ``pg_signal_backend``).

Release deletes the lease row and unlocks in one statement; the connection goes back to a small idle
list for the next lock. Keys are 64-bit hashes of the schema and session id, so deployments sharing a
database in different schemas never collide.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from dataclasses import dataclass

import asyncpg  # type: ignore[import-untyped]

from loopwright.errors import SessionBusyError, StorageError
from loopwright.lanes.base import LockLease
from loopwright.lanes.local import LocalSessionLocks
from loopwright.scaleout._pg import Connection, connect, lock_key
from loopwright.sessions.base import validate_session_id
from loopwright.sql._database import Database

__all__ = ["PostgresSessionLocks"]

log = logging.getLogger("loopwright.lanes")

WAIT_SLICE = 0.5
"""Seconds one server-side wait lasts before the waiter looks at the holder's lease again."""
_KEEPALIVE = {"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3"}

_RECORD = """
INSERT INTO scaleout_session_leases (lock_key, session_id, run_id, backend_pid, host, pid, expires_at)
VALUES ($1, $2, $3, pg_backend_pid(), $4, $5, now() + make_interval(secs => $6))
ON CONFLICT (lock_key) DO UPDATE SET session_id = EXCLUDED.session_id, run_id = EXCLUDED.run_id,
    backend_pid = EXCLUDED.backend_pid, host = EXCLUDED.host, pid = EXCLUDED.pid,
    acquired_at = now(), expires_at = EXCLUDED.expires_at
RETURNING extract(epoch FROM acquired_at)::float8, extract(epoch FROM expires_at)::float8
"""
_TRY = """
WITH got AS (SELECT pg_try_advisory_lock($1) AS ok)
INSERT INTO scaleout_session_leases (lock_key, session_id, run_id, backend_pid, host, pid, expires_at)
SELECT $1, $2, $3, pg_backend_pid(), $4, $5, now() + make_interval(secs => $6) FROM got WHERE got.ok
ON CONFLICT (lock_key) DO UPDATE SET session_id = EXCLUDED.session_id, run_id = EXCLUDED.run_id,
    backend_pid = EXCLUDED.backend_pid, host = EXCLUDED.host, pid = EXCLUDED.pid,
    acquired_at = now(), expires_at = EXCLUDED.expires_at
RETURNING extract(epoch FROM acquired_at)::float8, extract(epoch FROM expires_at)::float8
"""
_RELEASE = """
WITH gone AS (DELETE FROM scaleout_session_leases WHERE lock_key = $1 AND backend_pid = pg_backend_pid())
SELECT pg_advisory_unlock($1)
"""
_HOLDER = """
SELECT l.run_id, l.backend_pid, l.host, l.pid, l.expires_at < now() AS expired,
       EXISTS (SELECT 1 FROM pg_locks p WHERE p.locktype = 'advisory' AND p.granted
               AND p.pid = l.backend_pid AND p.classid = $2::bigint::oid
               AND p.objid = $3::bigint::oid AND p.objsubid = 1) AS holds
FROM scaleout_session_leases l WHERE l.lock_key = $1
"""
_WAITING = """
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
    AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Held:
    lease: LockLease
    local: LockLease
    key: int
    conn: Connection


class PostgresSessionLocks:
    """Implements :class:`~loopwright.lanes.SessionLocks` across processes and machines that share a
    PostgreSQL database (scale-out tables migrated: ``await loopwright.scaleout.migrate(db)``).

    Share one instance per process (pass ``local=`` to share in-process queueing with other lock
    objects). Close it with :meth:`aclose`; a process that exits without closing loses nothing:
    its connections end and PostgreSQL releases their locks.
    """

    def __init__(
        self, database: Database, *, local: LocalSessionLocks | None = None, max_idle: int = 4
    ) -> None:
        self.database = database
        self._namespace = database.schema or "public"
        self._local = local if local is not None else LocalSessionLocks()
        self._held: dict[str, _Held] = {}
        self._idle: list[Connection] = []
        self._max_idle = max_idle
        self._host = socket.gethostname()

    def key(self, session_id: str) -> int:
        """The advisory-lock key of ``session_id`` (signed 64-bit)."""
        return lock_key(self._namespace, session_id)

    def holder(self, session_id: str) -> LockLease | None:
        held = self._held.get(session_id)
        return held.lease if held is not None else None

    def waiting(self, session_id: str) -> int:
        """Runs of this process queued for ``session_id`` (not counting one waiting in PostgreSQL)."""
        return self._local.waiting(session_id)

    async def acquire(
        self, session_id: str, run_id: str, *, wait: float, lease: float, max_waiters: int
    ) -> LockLease:
        validate_session_id(session_id)
        deadline = time.monotonic() + wait
        local = await self._local.acquire(session_id, run_id, wait=wait, lease=lease, max_waiters=max_waiters)
        try:
            held = await self._take(local, lease, deadline, wait, max_waiters)
        except BaseException:
            await self._local.release(local)
            raise
        self._held[session_id] = held
        return held.lease

    async def release(self, lease: LockLease) -> None:
        held = self._held.get(lease.session_id)
        if held is None or held.lease.run_id != lease.run_id:
            return
        del self._held[lease.session_id]
        try:
            unlocked = await held.conn.fetchval(_RELEASE, held.key)
            if unlocked and len(self._idle) < self._max_idle:
                self._idle.append(held.conn)
            else:
                if not unlocked:
                    log.warning("session %r: its advisory lock was already gone", lease.session_id)
                held.conn.terminate()
        except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as exc:
            # Closing the connection releases the lock just as well.
            log.warning("session %r: unlocking failed (%s); closing its connection", lease.session_id, exc)
            held.conn.terminate()
        except BaseException:
            held.conn.terminate()
            raise
        finally:
            await self._local.release(held.local)

    async def aclose(self) -> None:
        """Close idle connections and give up every lock still held (their connections close)."""
        for held in list(self._held.values()):
            held.conn.terminate()
            await self._local.release(held.local)
        self._held.clear()
        idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await conn.close()

    # --- taking the lock --------------------------------------------------------------------------

    async def _connection(self) -> Connection:
        while self._idle:
            conn = self._idle.pop()
            if not conn.is_closed():
                return conn
        return await connect(self.database, settings=_KEEPALIVE)

    async def _take(
        self, local: LockLease, lease_seconds: float, deadline: float, wait: float, max_waiters: int
    ) -> _Held:
        session_id = local.session_id
        key = self.key(session_id)
        classid, objid = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF
        try:
            conn = await self._connection()
        except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as exc:
            raise self._error(session_id, exc) from exc
        record_args = (key, session_id, local.run_id, self._host, os.getpid(), float(lease_seconds))
        try:
            # The common case in one round trip: the lock is free, take it and record the lease.
            row = await conn.fetchrow(_TRY, *record_args)
            got = row is not None
            while not got:
                await self._take_over_if_stale(conn, key, classid, objid, session_id)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _busy(session_id, wait)
                others = int(await conn.fetchval(_WAITING, classid, objid))
                if others + self._local.waiting(session_id) >= max_waiters:
                    raise SessionBusyError(
                        session_id,
                        f"{others + self._local.waiting(session_id)} requests are already waiting "
                        f"(limit {max_waiters})",
                    )
                slice_ms = max(1, int(min(left, WAIT_SLICE) * 1000))
                await conn.execute("SELECT set_config('lock_timeout', $1, false)", f"{slice_ms}ms")
                try:
                    await conn.execute("SELECT pg_advisory_lock($1)", key)
                except asyncpg.LockNotAvailableError:
                    continue
                row = await conn.fetchrow(_RECORD, *record_args)
                got = True
            assert row is not None
        except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as exc:
            conn.terminate()  # whatever it may hold goes with it
            raise self._error(session_id, exc) from exc
        except BaseException:
            conn.terminate()
            raise
        lease = LockLease(
            session_id=session_id, run_id=local.run_id, acquired_at=float(row[0]), expires_at=float(row[1])
        )
        return _Held(lease=lease, local=local, key=key, conn=conn)

    async def _take_over_if_stale(
        self, conn: Connection, key: int, classid: int, objid: int, session_id: str
    ) -> None:
        row = await conn.fetchrow(_HOLDER, key, classid, objid)
        if row is None or not row["expired"] or not row["holds"]:
            return
        log.warning(
            "session %r: taking over the lock of run %r (pid %s on %r, database backend %s): "
            "its lease (lockTimeout) expired",
            session_id,
            row["run_id"],
            row["pid"],
            row["host"],
            row["backend_pid"],
        )
        await conn.fetchval("SELECT pg_terminate_backend($1)", row["backend_pid"])

    def _error(self, session_id: str, exc: BaseException) -> StorageError:
        return StorageError(f"cannot lock session {session_id!r} in {self.database.display_url!r}: {exc}")

    def __repr__(self) -> str:
        return f"PostgresSessionLocks({self.database.display_url!r})"


def _busy(session_id: str, wait: float) -> SessionBusyError:
    if wait <= 0:
        return SessionBusyError(session_id, "another run is in progress", retry_after=1.0)
    return SessionBusyError(
        session_id, f"waited {wait:g} s for the running run; retry later", retry_after=wait
    )
