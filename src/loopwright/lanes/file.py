"""Cross-process session locks: one run per session across every process that shares a workspace.

Two layers. Inside a process, runs queue in a :class:`~loopwright.lanes.LocalSessionLocks` (arrival
order, ``max_waiters``, the ``wait`` timeout); the run at the head of that queue then takes an OS lock
on ``sessions/<id>/lock``, so at most one process per session ever polls for it.

**The OS lock** is ``flock`` on the lock file, held for the whole run. The kernel drops it when its
holder exits, however it exits (``SIGKILL`` included), so a crashed run never blocks the next one.

**The record.** Once it holds the OS lock, a run writes ``{runId, pid, host, acquiredAt, expiresAt}``
(plus ``pidNamespace``) into the lock file and fsyncs it (in a worker thread; on a network file
system this is what makes the record visible to waiters on other hosts while the file stays open);
``release`` truncates the file, then unlocks and closes it. A record left by a killed holder is
just overwritten by the next run: the OS lock is free, so nobody is running.

**Waiting** polls: a non-blocking attempt, then an ``asyncio.sleep`` (2 ms, doubling to 50 ms), until
``wait`` runs out (``SessionBusyError``, ``retry_after`` set). A worker thread blocked in ``flock``
was the alternative, but it cannot be cancelled or timed out (the thread would stay stuck in the
kernel and then own a lock nobody wants), it takes a pool thread per waiting process, and it could
not look at the record while waiting, which takeover needs. A poll costs a few syscalls.

**Takeover.** The OS lock can be held while no run is going on: the lock file is on a network file
system whose server still holds the lock of a dead client, or the holder forked a child (a tool
using ``multiprocessing``'s fork) that inherited the open lock and outlived it, or the holder is
stuck in the kernel and cannot be signalled. A waiter therefore reads the holder's record, and takes
over, with a warning, when:

- ``expiresAt`` has passed: the lease is ``lockTimeout`` (900 s by default), well above the
  ``executionTimeout`` that cuts a run off (600 s), so a lease that ran out belongs to a holder that
  is stuck, not working. (Set ``executionTimeout`` above ``lockTimeout`` and a slow live run can be
  taken over: keep it below.) Or
- the record's ``host`` and pid namespace are ours and its ``pid`` no longer exists (or is a
  zombie): the process that ran the loop is gone, whatever still holds the descriptor is not a run.

A record that cannot be read (empty: being released, or its writer died between lock and write) is
never grounds for takeover. Taking over writes a new file and renames it over ``lock``; the old
holder keeps a lock on an unlinked file and its release only truncates that. Every attempt, takeover
included, runs under a second ``flock`` on ``lock.guard`` held for microseconds, so two waiters can
never both take over the same stale lock, and nobody can win the old file while another replaces it.

A forked copy of the lock table (a tool forking the process) shares the open lock file; its
``release`` only closes its descriptor, so the parent keeps the lock.

Across processes there is no FIFO order: whichever process polls first after a release wins.
POSIX only (``fcntl``); on Windows use :class:`~loopwright.lanes.LocalSessionLocks`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from loopwright._threads import run_blocking
from loopwright.errors import ConfigError, SessionBusyError, StorageError
from loopwright.lanes.base import LockLease
from loopwright.lanes.local import LocalSessionLocks
from loopwright.sessions.base import validate_session_id

if sys.platform != "win32":
    import fcntl

__all__ = ["GUARD_FILE", "LOCK_FILE", "FileSessionLocks", "LockRecord"]

log = logging.getLogger("loopwright.lanes")

LOCK_FILE = "lock"
GUARD_FILE = "lock.guard"
POLL_FIRST = 0.002
POLL_MAX = 0.05
GUARD_PATIENCE = 0.25
"""Seconds a try keeps retrying while only the guard is busy (it is held for microseconds), even
with ``wait=0``: a guard that is briefly busy does not mean the session is."""
_RECORD_MAX = 4096


class LockRecord(BaseModel):
    """What a lock file says about the run that holds it (JSON with camelCase keys)."""

    model_config = ConfigDict(frozen=True, extra="ignore", alias_generator=to_camel, populate_by_name=True)

    run_id: str
    pid: int = Field(gt=0)
    host: str
    acquired_at: AwareDatetime
    expires_at: AwareDatetime
    pid_namespace: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Identity:
    """Where pids mean something: a host name and, on Linux, the pid namespace."""

    host: str
    pid_namespace: str | None

    @classmethod
    def current(cls) -> _Identity:
        try:
            namespace: str | None = os.readlink("/proc/self/ns/pid")
        except OSError:
            namespace = None
        return cls(host=socket.gethostname(), pid_namespace=namespace)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Busy:
    holder: LockRecord | None = None
    """The holder's record, when it could be read."""
    guard_only: bool = False
    """Only the guard was busy: nothing is known about the session yet."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Held:
    lease: LockLease
    local: LockLease
    fd: int
    pid: int
    """The process that took the lock: a forked child shares the open lock file and must not unlock it."""


class FileSessionLocks:
    """Implements :class:`~loopwright.lanes.SessionLocks` across processes with lock files under
    ``sessions_dir`` (``<sessions_dir>/<session id>/lock``).

    Pass the process's ``local`` table to share in-process queueing with other lock objects; by
    default this object has its own. Two ``FileSessionLocks`` on one folder still exclude each other
    (through the OS lock), they just do not queue in order.
    """

    def __init__(
        self, sessions_dir: str | os.PathLike[str], *, local: LocalSessionLocks | None = None
    ) -> None:
        if sys.platform == "win32":  # pragma: no cover - POSIX file locks only
            raise ConfigError("FileSessionLocks needs POSIX file locks (fcntl); use LocalSessionLocks")
        self.sessions_dir = Path(sessions_dir)
        self._local = local if local is not None else LocalSessionLocks()
        self._held: dict[str, _Held] = {}
        self._me = _Identity.current()

    def lock_path(self, session_id: str) -> Path:
        return self.sessions_dir / validate_session_id(session_id) / LOCK_FILE

    def holder(self, session_id: str) -> LockLease | None:
        held = self._held.get(session_id)
        return held.lease if held is not None else None

    def waiting(self, session_id: str) -> int:
        """Runs of this process queued for ``session_id`` (not counting one polling for the OS lock)."""
        return self._local.waiting(session_id)

    def record(self, session_id: str) -> LockRecord | None:
        """The record in the session's lock file (``None`` if there is none), whether or not its
        holder is still running."""
        try:
            return _parse(self.lock_path(session_id).read_bytes())
        except FileNotFoundError:
            return None

    async def acquire(
        self, session_id: str, run_id: str, *, wait: float, lease: float, max_waiters: int
    ) -> LockLease:
        folder = self.sessions_dir / validate_session_id(session_id)
        deadline = time.monotonic() + wait
        local = await self._local.acquire(session_id, run_id, wait=wait, lease=lease, max_waiters=max_waiters)
        try:
            held = await self._take(folder, local, lease, deadline, wait)
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
            if held.pid == os.getpid():
                _unlock(held.fd, lease.session_id)
            else:  # a forked copy of this object: closing our descriptor leaves the parent's lock held
                with contextlib.suppress(OSError):
                    os.close(held.fd)
        finally:
            await self._local.release(held.local)

    async def _take(
        self, folder: Path, local: LockLease, lease_seconds: float, deadline: float, wait: float
    ) -> _Held:
        """Poll for the OS lock until ``deadline`` (at least one try); return it with its record synced."""
        session_id = local.session_id
        delay = POLL_FIRST
        guard_until = time.monotonic() + GUARD_PATIENCE
        try:
            while True:
                lease = LockLease.new(session_id, local.run_id, lease_seconds)
                outcome = _attempt(folder, lease, self._me)
                if isinstance(outcome, int):
                    fd = outcome
                    break
                now = time.monotonic()
                if outcome.guard_only and now < guard_until:
                    await asyncio.sleep(POLL_FIRST / 2)
                    continue
                if now >= deadline:
                    if outcome.holder is not None:
                        log.debug("session %r is held by %s", session_id, _describe(outcome.holder))
                    raise _busy(session_id, wait)
                await asyncio.sleep(min(delay, deadline - now))
                delay = min(delay * 2, POLL_MAX)
        except OSError as exc:
            raise StorageError(f"cannot lock session {session_id!r} in {str(folder)!r}: {exc}") from exc
        try:
            # By path, in a worker: a cancelled sync leaves nothing to clean up, whenever it runs.
            await run_blocking(_fsync_path, folder / LOCK_FILE)
        except BaseException:
            _unlock(fd, session_id)
            raise
        return _Held(lease=lease, local=local, fd=fd, pid=os.getpid())


def _busy(session_id: str, wait: float) -> SessionBusyError:
    if wait <= 0:
        return SessionBusyError(session_id, "another run is in progress", retry_after=1.0)
    return SessionBusyError(
        session_id, f"waited {wait:g} s for the running run; retry later", retry_after=wait
    )


# --- one attempt (non-blocking system calls only) ----------------------------------------------


def _attempt(folder: Path, lease: LockLease, me: _Identity) -> int | _Busy:
    """One try under the session's guard: the lock file's descriptor, locked and with our record
    written, or why not."""
    try:
        guard = os.open(folder / GUARD_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:  # a new session: its folder does not exist yet
        folder.mkdir(parents=True, exist_ok=True)
        guard = os.open(folder / GUARD_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not _try_flock(guard):
            return _Busy(guard_only=True)
        fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        keep = False
        try:
            if _try_flock(fd):
                left = _parse(os.pread(fd, _RECORD_MAX, 0))
                if left is not None:
                    log.info(
                        "session %r: replacing the lock record left by %s, which ended without releasing",
                        lease.session_id,
                        _describe(left),
                    )
                _write_record(fd, lease, me)
                keep = True
                return fd
            holder = _parse(os.pread(fd, _RECORD_MAX, 0))
            why = _stale(holder, me)
            if holder is None or why is None:
                return _Busy(holder=holder)
            log.warning(
                "session %r: taking over the lock of %s: %s", lease.session_id, _describe(holder), why
            )
            return _take_over(folder, lease, me)
        finally:
            if not keep:
                os.close(fd)
    finally:
        os.close(guard)  # also drops the guard's lock


def _take_over(folder: Path, lease: LockLease, me: _Identity) -> int:
    """A fresh lock file, locked and with our record, renamed over the stale one."""
    tmp = folder / f".{LOCK_FILE}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else can hold it
        _write_record(fd, lease, me)
        os.replace(tmp, folder / LOCK_FILE)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return fd


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _write_record(fd: int, lease: LockLease, me: _Identity) -> None:
    record = {
        "runId": lease.run_id,
        "pid": os.getpid(),
        "host": me.host,
        "acquiredAt": _iso(lease.acquired_at),
        "expiresAt": _iso(lease.expires_at),
        "pidNamespace": me.pid_namespace,
    }
    data = json.dumps(record, ensure_ascii=False).encode("utf-8")
    os.pwrite(fd, data, 0)
    os.ftruncate(fd, len(data))


def _parse(data: bytes) -> LockRecord | None:
    if not data.strip():
        return None
    try:
        return LockRecord.model_validate_json(data)
    except ValidationError:
        return None


def _stale(holder: LockRecord | None, me: _Identity) -> str | None:
    """Why the run that ``holder`` describes cannot still be running, or ``None``."""
    if holder is None:
        return None
    if holder.expires_at <= datetime.now(UTC):
        return f"its lease expired at {_iso(holder.expires_at.timestamp())}"
    if holder.host == me.host and holder.pid_namespace == me.pid_namespace and not _pid_alive(holder.pid):
        return f"its process {holder.pid} no longer exists"
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, under another user
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True  # no /proc to ask: it exists
    state = stat.rpartition(b")")[2].split()[:1]
    return state not in ([b"Z"], [b"X"])  # a zombie runs no code


def _describe(record: LockRecord) -> str:
    return f"run {record.run_id!r} (pid {record.pid} on {record.host!r})"


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --- release and sync ---------------------------------------------------------------------------


def _unlock(fd: int, session_id: str) -> None:
    """Empty the record, drop the OS lock and close; never raises (closing drops the lock anyway)."""
    try:
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError as exc:
        log.warning("session %r: could not clear its lock file: %s", session_id, exc)
    finally:
        try:
            os.close(fd)
        except OSError as exc:  # pragma: no cover - close after an I/O error on a network file system
            log.warning("session %r: closing its lock file failed: %s", session_id, exc)


def _fsync_path(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        log.warning("could not sync lock file %s: %s", path, exc)
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        log.warning("could not sync lock file %s: %s", path, exc)
    finally:
        os.close(fd)
