"""Subprocesses for tools: killed, with everything they started, when the tool is cancelled.

A tool that runs a program should use :func:`run_process`: when the call times out (``tool_timeout``)
or its run is stopped, the loop cancels the tool, and the program's whole process group is killed —
no orphan keeps running after the loop has moved on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["ProcessResult", "run_process"]


@dataclass(frozen=True, slots=True)
class ProcessResult:
    returncode: int
    stdout: str
    stderr: str
    truncated: bool


async def run_process(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    max_output: int = 64_000,
) -> ProcessResult:
    """Run ``argv`` (no shell) and return its exit code and output (each capped at ``max_output``
    characters). Cancelling the caller kills the process and its children (SIGKILL to its group)."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own process group, so the kill reaches its children too
    )
    try:
        out, err = await process.communicate(stdin.encode() if stdin is not None else None)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await process.wait()
        raise
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    truncated = len(stdout) > max_output or len(stderr) > max_output
    return ProcessResult(
        returncode=process.returncode if process.returncode is not None else -1,
        stdout=stdout[:max_output],
        stderr=stderr[:max_output],
        truncated=truncated,
    )
