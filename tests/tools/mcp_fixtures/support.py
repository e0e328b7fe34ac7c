"""Helpers for the MCP tests: the demo server, process checks, an HTTP server on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopwright.tools.base import ToolContext
from loopwright.tools.mcp import MCPServer

DEMO_SERVER = Path(__file__).resolve().parent / "demo_server.py"


def demo(name: str = "demo", **settings: Any) -> MCPServer:
    """The demo server over stdio, run by this interpreter (which has the `mcp` SDK)."""
    return MCPServer(name=name, command=[sys.executable, str(DEMO_SERVER), "stdio"], **settings)


def ctx(tool_name: str = "t") -> ToolContext:
    return ToolContext(run_id="run-1", session_id="s-1", call_id="c-1", tool_name=tool_name, step=0)


def state(pid: int) -> str | None:
    """The process state letter ("S", "R", "Z"...) or None when no such process exists (reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def wait_gone(pid: int, seconds: float = 10.0) -> str | None:
    """Wait until ``pid`` is reaped (gone from /proc) or ``seconds`` pass; return its last state."""
    deadline = time.monotonic() + seconds
    while state(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    return state(pid)


def children(pid: int | None = None) -> set[int]:
    """Process ids whose parent is ``pid`` (default: this process)."""
    parent = os.getpid() if pid is None else pid
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[1]) == parent:
                found.add(int(entry))
    return found


@dataclass
class HttpDemo:
    process: subprocess.Popen[str]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        assert self.process.stdout is not None
        self.process.stdout.close()


def start_http_demo(env: Mapping[str, str] | None = None, port: int = 0) -> HttpDemo:
    """Start the demo server over streamable HTTP on 127.0.0.1 and wait until it listens."""
    process = subprocess.Popen(
        [sys.executable, str(DEMO_SERVER), "http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {}), "DEMO_PORT": str(port)},
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # printed once the socket listens
    if not line.startswith("PORT "):
        process.kill()
        process.wait()
        raise RuntimeError(f"the HTTP demo server did not start: {line!r}")
    return HttpDemo(process, int(line.split()[1]))


@contextmanager
def http_demo(env: Mapping[str, str] | None = None) -> Iterator[HttpDemo]:
    server = start_http_demo(env)
    try:
        yield server
    finally:
        server.stop()
