"""FileSessionLocks between real processes: exclusion, timeouts, a SIGKILLed holder, and takeover
of a lock that is still held by the OS but whose holder is provably not running.

Takeover is tested with the two situations that can honestly be produced on one machine:

- an expired lease: a live process takes the lock with a 0.3 s lease and keeps holding it;
- a holder whose pid is gone while the OS lock survives it: the holder forks a child (as a tool
  using ``multiprocessing`` with the fork method would), the child inherits the open lock file, and
  the holder is SIGKILLed. The kernel keeps the lock for the child; the record names a dead pid.

(The other ways the OS lock outlives its holder — a network file system whose server still holds
a dead client's lock, a holder stuck in the kernel — cannot be produced here; they look the same
to the waiter, which only sees a held lock and the record.)
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loopwright import SessionBusyError
from loopwright.lanes.file import FileSessionLocks
from tests.lanes.helpers import Holder, os_lock_is_free, wait_until_gone

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file locks and signals")

#: Takes the lock of session "s" ROUNDS times, logging "enter"/"exit" lines with CLOCK_MONOTONIC
#: stamps (shared by all processes on Linux) around a short critical section; prints how many times
#: it found the session busy. Starts when a line arrives on stdin, so both start together.
CONTENDER = r"""
import asyncio, os, sys, time
from loopwright.errors import SessionBusyError
from loopwright.lanes.file import FileSessionLocks

sessions, log_path, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])


async def main() -> int:
    locks = FileSessionLocks(sessions)
    busy = 0
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for i in range(rounds):
            run_id = f"{os.getpid()}-{i}"
            try:
                lease = await locks.acquire("s", run_id, wait=0, lease=60, max_waiters=1)
            except SessionBusyError:
                busy += 1
                lease = await locks.acquire("s", run_id, wait=30, lease=60, max_waiters=1)
            os.write(log, f"enter {os.getpid()} {time.monotonic_ns()}\n".encode())
            await asyncio.sleep(0.002)  # the work done while holding the lock
            os.write(log, f"exit {os.getpid()} {time.monotonic_ns()}\n".encode())
            await locks.release(lease)
    finally:
        os.close(log)
    return busy


print("ready", flush=True)
sys.stdin.readline()
print(asyncio.run(main()), flush=True)
"""

ROUNDS = 25


def test_two_processes_are_never_inside_at_the_same_time(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", CONTENDER, str(tmp_path / "sessions"), str(log), str(ROUNDS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
        )
        for _ in range(2)
    ]
    for p in processes:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    for p in processes:  # both ready: start them together
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    busy = 0
    for p in processes:
        out, _ = p.communicate(timeout=30)
        assert p.returncode == 0
        busy += int(out)

    lines = [line.split() for line in log.read_text().splitlines()]
    assert len(lines) == 2 * 2 * ROUNDS
    assert {pid for _, pid, _ in lines} == {str(p.pid) for p in processes}
    stamps = [int(stamp) for _, _, stamp in lines]
    assert stamps == sorted(stamps), "a process entered before the previous one left"
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        assert (enter[0], leave[0]) == ("enter", "exit") and enter[1] == leave[1], (enter, leave)
    assert busy >= 1, "the processes never contended: the test proved nothing"


async def test_waiting_for_another_process_times_out(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    holder = Holder(sessions, "s", "theirs")
    try:
        locks = FileSessionLocks(sessions)
        assert locks.record("s").pid == holder.pid  # type: ignore[union-attr]
        with pytest.raises(SessionBusyError, match=r"waited 0\.2 s for the running run") as busy:
            await locks.acquire("s", "ours", wait=0.2, lease=60, max_waiters=1)
        assert busy.value.retry_after == pytest.approx(0.2)
        assert holder.command("release") == {"released": True}
        lease = await locks.acquire("s", "ours", wait=0, lease=60, max_waiters=1)
        await locks.release(lease)
    finally:
        holder.close()


async def test_a_sigkilled_holder_frees_the_session_promptly(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    holder = Holder(sessions, "s", "doomed")
    locks = FileSessionLocks(sessions)
    try:
        waiter = asyncio.create_task(locks.acquire("s", "next", wait=10, lease=60, max_waiters=1))
        for _ in range(3):
            await asyncio.sleep(0)
        assert not waiter.done()  # it is polling the held lock
        holder.kill()
        loop = asyncio.get_running_loop()
        killed_at = loop.time()
        async with asyncio.timeout(5):
            lease = await waiter
        assert loop.time() - killed_at < 1.0  # the poll interval is at most 50 ms
    finally:
        holder.close()
    record = locks.record("s")
    assert record is not None and (record.run_id, record.pid) == ("next", os.getpid())
    await locks.release(lease)


async def test_an_expired_lease_is_taken_over_from_a_live_holder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sessions = tmp_path / "sessions"
    holder = Holder(sessions, "s", "overdue", lease=0.3)
    locks = FileSessionLocks(sessions)
    path = locks.lock_path("s")
    try:
        with caplog.at_level(logging.WARNING, logger="loopwright.lanes"):
            async with asyncio.timeout(5):
                lease = await locks.acquire("s", "taker", wait=5, lease=60, max_waiters=1)
        assert f"taking over the lock of run 'overdue' (pid {holder.pid}" in caplog.text
        assert "its lease expired at" in caplog.text
        # the overdue holder was alive all along; when it finally releases, it lets go of its own
        # (now unlinked) file and leaves ours alone
        assert holder.command("release") == {"released": True}
    finally:
        holder.close()
    assert locks.record("s").run_id == "taker"  # type: ignore[union-attr]
    assert not os_lock_is_free(path)
    with pytest.raises(SessionBusyError):
        await FileSessionLocks(sessions).acquire("s", "third", wait=0, lease=60, max_waiters=1)
    await locks.release(lease)
    assert os_lock_is_free(path)


async def test_a_lock_kept_by_a_forked_child_of_a_dead_holder_is_taken_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sessions = tmp_path / "sessions"
    holder = Holder(sessions, "s", "forked")
    child = holder.command("fork")["child"]
    locks = FileSessionLocks(sessions)
    path = locks.lock_path("s")
    try:
        holder.kill()
        assert not os_lock_is_free(path)  # the child still holds the inherited lock...
        assert locks.record("s").pid == holder.pid  # type: ignore[union-attr]  # ...for a dead pid
        with caplog.at_level(logging.WARNING, logger="loopwright.lanes"):
            async with asyncio.timeout(5):
                lease = await locks.acquire("s", "taker", wait=5, lease=60, max_waiters=1)
        assert f"its process {holder.pid} no longer exists" in caplog.text
        assert locks.record("s").run_id == "taker"  # type: ignore[union-attr]
    finally:
        holder.close()  # EOF on the child's stdin: it exits
        wait_until_gone(child)
    assert not os_lock_is_free(path)  # ours, not the child's
    await locks.release(lease)
    assert os_lock_is_free(path)


async def test_a_forked_child_releasing_its_copy_does_not_unlock_the_parent(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    holder = Holder(sessions, "s", "parent")
    locks = FileSessionLocks(sessions)
    path = locks.lock_path("s")
    try:
        assert holder.command("fork-release") == {"child_released": True}
        assert not os_lock_is_free(path)
        assert locks.record("s").run_id == "parent"  # type: ignore[union-attr]
        assert holder.command("release") == {"released": True}
    finally:
        holder.close()
    assert os_lock_is_free(path) and locks.record("s") is None
