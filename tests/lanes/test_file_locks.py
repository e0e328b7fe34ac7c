"""FileSessionLocks inside one process: the record, release, takeover rules, and the in-process
queue behaving exactly as LocalSessionLocks does.

A second holder here is a real OS lock on another open file description of the same lock file
(``flock`` locks belong to open files, so it excludes us as another process would). Real processes
are in test_file_locks_processes.py.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, InputError, SessionBusyError, tool
from loopwright.lanes import LocalSessionLocks, LockLease, SessionLocks
from loopwright.lanes.file import GUARD_FILE, LOCK_FILE, FileSessionLocks, LockRecord
from loopwright.messages import Message
from loopwright.testing import AgentInfo, FunctionModel, TestModel
from tests.helpers import read_jsonl
from tests.lanes.helpers import gone_pid, open_fds, os_lock_is_free, zombie

Locks = LocalSessionLocks | FileSessionLocks


@pytest.fixture
def file_locks(tmp_path: Path) -> FileSessionLocks:
    return FileSessionLocks(tmp_path / "sessions")


@pytest.fixture(params=["local", "file"])
def locks(request: pytest.FixtureRequest, tmp_path: Path) -> Locks:
    return LocalSessionLocks() if request.param == "local" else FileSessionLocks(tmp_path / "sessions")


async def _take(locks: SessionLocks, run_id: str, *, wait: float = 0, max_waiters: int = 10) -> LockLease:
    return await locks.acquire("s", run_id, wait=wait, lease=60, max_waiters=max_waiters)


def _record(**changes: Any) -> dict[str, Any]:
    now = datetime.now(UTC)
    record: dict[str, Any] = {
        "runId": "other-run",
        "pid": os.getpid(),
        "host": os.uname().nodename,
        "acquiredAt": now.isoformat(),
        "expiresAt": (now + timedelta(minutes=15)).isoformat(),
        "pidNamespace": os.readlink("/proc/self/ns/pid"),
    }
    record.update(changes)
    return record


@contextmanager
def foreign_holder(path: Path, record: dict[str, Any] | str | None) -> Iterator[int]:
    """Hold the OS lock on ``path`` through our own open file, with ``record`` written in it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if record is not None:
            os.write(fd, (record if isinstance(record, str) else json.dumps(record)).encode())
        yield fd
    finally:
        os.close(fd)


def test_file_locks_implement_the_protocol(file_locks: FileSessionLocks) -> None:
    assert isinstance(file_locks, SessionLocks)


# --- the lock file and its record -------------------------------------------------------------


async def test_record_is_written_while_held_and_cleared_on_release(
    file_locks: FileSessionLocks, tmp_path: Path
) -> None:
    assert not (tmp_path / "sessions").exists()
    lease = await file_locks.acquire("s", "run-1", wait=0, lease=900, max_waiters=10)
    path = tmp_path / "sessions" / "s" / LOCK_FILE
    assert file_locks.lock_path("s") == path
    data = json.loads(path.read_text())
    assert {"runId", "pid", "host", "acquiredAt", "expiresAt"} <= set(data)
    assert (data["runId"], data["pid"], data["host"]) == ("run-1", os.getpid(), os.uname().nodename)
    acquired = datetime.fromisoformat(data["acquiredAt"])
    expires = datetime.fromisoformat(data["expiresAt"])
    assert data["acquiredAt"].endswith("Z") and expires - acquired == timedelta(seconds=900)
    assert abs(acquired.timestamp() - lease.acquired_at) < 0.001
    assert file_locks.record("s") == LockRecord.model_validate(data)
    assert file_locks.holder("s") is lease and lease.run_id == "run-1"
    assert not os_lock_is_free(path)

    await file_locks.release(lease)
    assert file_locks.holder("s") is None
    assert path.read_bytes() == b"" and file_locks.record("s") is None
    assert os_lock_is_free(path)
    assert sorted(p.name for p in path.parent.iterdir()) == [LOCK_FILE, GUARD_FILE]


async def test_release_never_raises_for_a_lease_already_gone(file_locks: FileSessionLocks) -> None:
    lease = await _take(file_locks, "run-1")
    await file_locks.release(lease)
    await file_locks.release(lease)  # twice
    await file_locks.release(LockLease.new("never-locked", "x", 1))
    again = await _take(file_locks, "run-2")
    await file_locks.release(lease)  # an old lease of the same session: not ours any more
    assert file_locks.holder("s") is again
    await file_locks.release(again)


async def test_invalid_session_id_is_refused_before_touching_the_disk(
    file_locks: FileSessionLocks, tmp_path: Path
) -> None:
    with pytest.raises(InputError, match="invalid session id"):
        await file_locks.acquire("../escape", "r", wait=0, lease=60, max_waiters=1)
    assert not (tmp_path / "sessions").exists()


async def test_another_holder_refuses_at_once_with_wait_zero(file_locks: FileSessionLocks) -> None:
    other = FileSessionLocks(file_locks.sessions_dir)  # its own open file: a real OS lock conflict
    lease = await _take(other, "first")
    with pytest.raises(SessionBusyError, match="'s' is busy: another run is in progress") as busy:
        await _take(file_locks, "second")
    assert busy.value.retry_after == 1.0 and busy.value.session_id == "s"
    assert file_locks.holder("s") is None and file_locks.waiting("s") == 0
    await other.release(lease)


async def test_waiting_times_out_with_a_retry_hint(file_locks: FileSessionLocks) -> None:
    other = FileSessionLocks(file_locks.sessions_dir)
    lease = await _take(other, "first")
    started = asyncio.get_running_loop().time()
    with pytest.raises(SessionBusyError, match=r"waited 0\.1 s for the running run; retry later") as busy:
        await _take(file_locks, "second", wait=0.1)
    assert asyncio.get_running_loop().time() - started >= 0.1
    assert busy.value.retry_after == pytest.approx(0.1)
    await other.release(lease)
    assert (await _take(file_locks, "third")).run_id == "third"  # nothing was left behind


async def test_a_waiter_gets_the_lock_when_the_holder_releases(file_locks: FileSessionLocks) -> None:
    other = FileSessionLocks(file_locks.sessions_dir)
    lease = await _take(other, "first")
    waiter = asyncio.create_task(_take(file_locks, "second", wait=5))
    for _ in range(3):  # its first try fails at once; it is now polling
        await asyncio.sleep(0)
    assert not waiter.done()
    await other.release(lease)
    async with asyncio.timeout(2):
        second = await waiter
    assert file_locks.holder("s") is second and file_locks.record("s").run_id == "second"  # type: ignore[union-attr]
    await file_locks.release(second)


async def test_cancelling_a_waiter_leaves_nothing_held(file_locks: FileSessionLocks) -> None:
    before = open_fds()
    other = FileSessionLocks(file_locks.sessions_dir)
    lease = await _take(other, "first")
    waiter = asyncio.create_task(_take(file_locks, "second", wait=5))
    queued = asyncio.create_task(_take(file_locks, "third", wait=5))
    for _ in range(3):
        await asyncio.sleep(0)
    assert file_locks.waiting("s") == 1  # "second" polls the OS lock, "third" queues behind it
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await other.release(lease)
    async with asyncio.timeout(2):
        third = await queued  # the queue moved on
    await file_locks.release(third)
    assert file_locks.holder("s") is None and file_locks.waiting("s") == 0
    assert open_fds() == before


# --- recovery and takeover --------------------------------------------------------------------


async def test_a_record_left_by_a_killed_holder_is_replaced(
    file_locks: FileSessionLocks, caplog: pytest.LogCaptureFixture
) -> None:
    path = file_locks.lock_path("s")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(_record(runId="killed", pid=gone_pid())))  # the OS lock died with it
    with caplog.at_level(logging.INFO, logger="loopwright.lanes"):
        lease = await _take(file_locks, "next")
    assert file_locks.record("s").run_id == "next"  # type: ignore[union-attr]
    assert "replacing the lock record left by run 'killed'" in caplog.text
    await file_locks.release(lease)


@pytest.mark.parametrize(
    ("record", "why"),
    [
        (_record(expiresAt="2020-01-01T00:00:00Z"), "its lease expired at 2020-01-01T00:00:00.000Z"),
        (_record(host="elsewhere", expiresAt="2020-01-01T00:00:00.000Z"), "its lease expired"),
        (_record(pid=-1), None),  # filled in below with a pid that is gone
    ],
    ids=["expired", "expired-other-host", "pid-gone"],
)
async def test_a_held_lock_whose_holder_is_stale_is_taken_over(
    file_locks: FileSessionLocks, caplog: pytest.LogCaptureFixture, record: dict[str, Any], why: str | None
) -> None:
    if record["pid"] == -1:
        record = {**record, "pid": gone_pid()}
        why = f"its process {record['pid']} no longer exists"
    path = file_locks.lock_path("s")
    with foreign_holder(path, record) as stale_fd:
        old_inode = os.fstat(stale_fd).st_ino
        with caplog.at_level(logging.WARNING, logger="loopwright.lanes"):
            lease = await _take(file_locks, "taker")
        assert f"session 's': taking over the lock of run 'other-run' (pid {record['pid']}" in caplog.text
        assert str(why) in caplog.text
        assert path.stat().st_ino != old_inode  # a new lock file, renamed over the stale one
        assert file_locks.record("s").run_id == "taker"  # type: ignore[union-attr]
        # the stale holder finally lets go of its (now unlinked) file: that changes nothing for us
        os.ftruncate(stale_fd, 0)
        fcntl.flock(stale_fd, fcntl.LOCK_UN)
    assert file_locks.record("s").run_id == "taker"  # type: ignore[union-attr]
    with pytest.raises(SessionBusyError):
        await _take(FileSessionLocks(file_locks.sessions_dir), "third")
    await file_locks.release(lease)
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


async def test_a_zombie_holder_counts_as_gone(file_locks: FileSessionLocks) -> None:
    with zombie() as pid, foreign_holder(file_locks.lock_path("s"), _record(pid=pid)):
        lease = await _take(file_locks, "taker")
    await file_locks.release(lease)


@pytest.mark.parametrize(
    "record",
    [
        _record(),  # a live process (this one), lease running
        _record(host="elsewhere", pid=2**22 + 1),  # a pid on another host cannot be checked
        _record(pidNamespace="pid:[1]", pid=2**22 + 1),  # nor one in another pid namespace
        "{not json",  # unreadable
        None,  # empty: being released, or its writer died between lock and write
    ],
    ids=["live", "other-host", "other-namespace", "garbage", "empty"],
)
async def test_a_held_lock_is_never_taken_over_without_proof(
    file_locks: FileSessionLocks, record: dict[str, Any] | str | None
) -> None:
    with foreign_holder(file_locks.lock_path("s"), record):
        with pytest.raises(SessionBusyError):
            await _take(file_locks, "hopeful", wait=0.05)
        assert file_locks.holder("s") is None


# --- the in-process queue, the same as LocalSessionLocks --------------------------------------


async def test_waiters_are_served_in_arrival_order(locks: Locks) -> None:
    first = await _take(locks, "first")
    order: list[int] = []

    async def queued(i: int) -> None:
        lease = await _take(locks, f"r{i}", wait=5)
        order.append(i)
        await asyncio.sleep(0)  # let the others pile up behind
        await locks.release(lease)

    tasks = []
    for i in range(5):
        tasks.append(asyncio.create_task(queued(i)))
        await asyncio.sleep(0)
    assert locks.waiting("s") == 5
    await locks.release(first)
    async with asyncio.timeout(5):
        await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]
    assert locks.holder("s") is None


async def test_the_waiting_limit_refuses_at_once(locks: Locks) -> None:
    first = await _take(locks, "first")
    waiters = [asyncio.create_task(_take(locks, f"w{i}", wait=5, max_waiters=2)) for i in range(2)]
    for _ in range(3):
        await asyncio.sleep(0)
    with pytest.raises(SessionBusyError, match="2 requests are already waiting \\(limit 2\\)"):
        await _take(locks, "overflow", wait=5, max_waiters=2)
    await locks.release(first)
    async with asyncio.timeout(5):
        for task in waiters:
            await locks.release(await task)


async def test_a_wait_that_times_out_in_the_queue_is_refused(locks: Locks) -> None:
    first = await _take(locks, "first")
    with pytest.raises(SessionBusyError, match="retry later") as busy:
        await _take(locks, "late", wait=0.05)
    assert busy.value.retry_after == pytest.approx(0.05)
    assert locks.waiting("s") == 0
    await locks.release(first)


async def test_different_sessions_do_not_wait_for_each_other(locks: Locks) -> None:
    a = await locks.acquire("a", "r1", wait=0, lease=60, max_waiters=1)
    b = await locks.acquire("b", "r2", wait=0, lease=60, max_waiters=1)
    assert (locks.holder("a"), locks.holder("b")) == (a, b)
    await locks.release(a)
    await locks.release(b)


# --- descriptors and the agent ----------------------------------------------------------------


async def test_no_descriptor_is_left_open(file_locks: FileSessionLocks) -> None:
    before = open_fds()
    other = FileSessionLocks(file_locks.sessions_dir)
    for i in range(20):
        lease = await _take(file_locks, f"r{i}")
        with pytest.raises(SessionBusyError):
            await _take(other, f"o{i}", wait=0.01)
        await file_locks.release(lease)
    with foreign_holder(file_locks.lock_path("s"), _record(expiresAt="2020-01-01T00:00:00Z")):
        lease = await _take(file_locks, "taker")
    await file_locks.release(lease)
    assert open_fds() == before


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


async def test_an_agent_run_leaves_no_lock_held(tmp_path: Path) -> None:
    before = open_fds()
    locks = FileSessionLocks(tmp_path / "sessions")
    agent = Agent(TestModel(), tools=[echo], workspace=tmp_path, locks=locks)
    first = await agent.run("go", session_id="s")
    again = await agent.run("again", session_id="s")
    assert (first.reason, again.reason) == ("done", "done")
    path = tmp_path / "sessions" / "s" / LOCK_FILE
    assert locks.holder("s") is None and path.read_bytes() == b"" and os_lock_is_free(path)
    assert open_fds() == before
    [info] = await agent.store.list_sessions()  # the lock files do not confuse the store
    assert info.id == "s"


async def test_agent_runs_on_one_session_never_overlap_with_file_locks(tmp_path: Path) -> None:
    active = peak = 0

    async def model(messages: list[Message], info: AgentInfo) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.005)
        active -= 1
        return "done"

    locks = FileSessionLocks(tmp_path / "sessions")
    agent = Agent(FunctionModel(model), workspace=tmp_path, locks=locks)
    reports = await asyncio.gather(*(agent.run(f"m{i}", session_id="s") for i in range(5)))
    assert peak == 1 and all(r.reason == "done" for r in reports)
    users = [
        e["content"] for e in read_jsonl(tmp_path / "sessions/s/transcript.jsonl") if e.get("role") == "user"
    ]
    assert users == [f"m{i}" for i in range(5)]
