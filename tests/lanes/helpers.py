"""Helpers for the lock tests: a lock holder in another process, and looks at the OS lock itself."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: Takes ``sessions/<id>`` with a real FileSessionLocks and holds it, obeying commands on stdin:
#: ``release`` (release and exit), ``fork`` (fork a child that inherits the open lock file and lives
#: until stdin closes), ``fork-release`` (fork a child that calls ``release`` on its copy of the lock
#: table, and wait for it). Each answer is one JSON line. At EOF it exits without releasing.
HOLDER = r"""
import asyncio, json, os, sys
from loopwright.lanes.file import FileSessionLocks

sessions, session_id, run_id, lease_seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
locks = FileSessionLocks(sessions)
lease = asyncio.run(locks.acquire(session_id, run_id, wait=10, lease=lease_seconds, max_waiters=1))
print(json.dumps({"held": os.getpid()}), flush=True)
for line in sys.stdin:
    command = line.strip()
    if command == "release":
        asyncio.run(locks.release(lease))
        print(json.dumps({"released": True}), flush=True)
        break
    if command == "fork":
        child = os.fork()
        if child == 0:  # keeps the inherited open lock file until stdin closes
            os.close(1)
            os.close(2)
            sys.stdin.read()
            os._exit(0)
        print(json.dumps({"child": child}), flush=True)
    if command == "fork-release":
        child = os.fork()
        if child == 0:
            asyncio.run(locks.release(lease))
            os._exit(0)
        os.waitpid(child, 0)
        print(json.dumps({"child_released": True}), flush=True)
"""


class Holder:
    """A process holding a session lock (see :data:`HOLDER`)."""

    def __init__(self, sessions: Path, session_id: str, run_id: str, *, lease: float = 60) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(sessions), session_id, run_id, str(lease)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
        )
        self.pid = self.process.pid
        assert self.answer() == {"held": self.pid}

    def answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"holder {self.pid} ended with status {self.process.wait(10)}"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def command(self, text: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()
        return self.answer()

    def kill(self) -> None:
        """SIGKILL, and reap it (a zombie would still look alive)."""
        self.process.send_signal(signal.SIGKILL)
        assert self.process.wait(10) == -signal.SIGKILL

    def close(self) -> None:
        """Close its stdin (ends a forked child too) and wait for it; kill it if it lingers."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self.process.stdout.close()


def os_lock_is_free(path: Path) -> bool:
    """Whether nobody holds the OS lock on ``path`` (tried on a new open file, then dropped)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def gone_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait(10)
    return process.pid


@contextmanager
def zombie() -> Iterator[int]:
    """The pid of a child that has exited but is not reaped yet: it still exists, as a zombie."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while _state(process.pid) != b"Z":  # bounded poll for the exit
            assert time.monotonic() < deadline, "the child did not exit"
            time.sleep(0.005)
        yield process.pid
    finally:
        process.wait(10)


def _state(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except OSError:
        return None


def wait_until_gone(pid: int, timeout: float = 10) -> None:
    """Bounded poll until ``pid`` (not our child, so it cannot be waited for) has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _state(pid) in (None, b"Z", b"X"):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} is still running")
