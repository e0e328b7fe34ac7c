"""The ``exec`` tool: run a shell command in the workspace.

A shell is the most powerful tool an agent can have, so its defaults are the careful ones:

- permission ``ask`` (a human approves each call unless the policy says otherwise), level ``admin``,
  group ``exec``;
- the command runs with ``/bin/sh -c`` in the workspace root, stdin closed, in a process group of its
  own; when it ends, times out or is cancelled, the whole group is killed, so nothing it started in
  the background outlives the call;
- a timeout per call (the model may ask for less or more, never more than ``max_timeout``);
- stdout and stderr are each capped (the start and the end are kept, the middle is cut with a note);
- the environment is built from scratch: ``PATH``, ``HOME``, the locale, ``TMPDIR``, ``TERM=dumb``
  and what the tool was configured with; nothing else of the agent's environment (API keys, tokens,
  passwords) reaches the command, and names that look like secrets are refused even when configured.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from loopwright.tools._function import FunctionTool, tool

__all__ = ["CommandTimeout", "ExecResult", "make_exec_tool", "run_shell", "safe_environment"]

DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 600.0
MAX_OUTPUT_BYTES = 30_000
_SHELL = "/bin/sh"
_PIPE_GRACE_SECONDS = 2.0
_POLL_SECONDS = 0.01
_READ_CHUNK = 65_536
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_PASSED = ("PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER", "LOGNAME")
SECRET_NAME_RE = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|PASSPHRASE|PWD$|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE|DSN|"
    r"DATABASE_URL|_URL$|_URI$|CONNECTION",
    re.IGNORECASE,
)
"""Environment variable names that look like they hold a secret (``PWD`` itself is allowed)."""


class CommandTimeout(Exception):
    """The command ran past its timeout and was killed; the message carries its output so far."""


@dataclass(frozen=True, slots=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool

    def render(self) -> str:
        """The result as the model reads it."""
        parts = [f"exit code: {self.exit_code}"]
        for label, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            parts.append(f"{label}:\n{text.rstrip()}" if text.strip() else f"{label}: (empty)")
        return "\n".join(parts)


def safe_environment(
    extra: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment a command gets: a minimal base taken from ``environ`` plus ``extra``.

    Any name that looks like a secret (see :data:`SECRET_NAME_RE`) is left out, from both."""
    source = os.environ if environ is None else environ
    env = {name: source[name] for name in _PASSED if name in source}
    env.setdefault("PATH", _DEFAULT_PATH)
    env.setdefault("LANG", "C.UTF-8")
    env["TERM"] = "dumb"
    env.update(extra or {})
    return {name: value for name, value in env.items() if name == "PWD" or not SECRET_NAME_RE.search(name)}


async def run_shell(
    command: str,
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str],
    seconds: float,
    max_output: int = MAX_OUTPUT_BYTES,
) -> ExecResult:
    """Run ``command`` with ``/bin/sh -c``; kill its whole process group when it ends or after ``seconds``."""
    process = await asyncio.create_subprocess_exec(
        _SHELL,
        "-c",
        command,
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    out, err = _Capture(max_output), _Capture(max_output)
    timed_out = False
    try:
        async with asyncio.TaskGroup() as tasks:
            assert process.stdout is not None and process.stderr is not None
            readers = [
                tasks.create_task(out.drain(process.stdout)),
                tasks.create_task(err.drain(process.stderr)),
            ]
            try:
                async with asyncio.timeout(seconds):
                    # Polled: wait() would also wait for the pipes, which a background child keeps open.
                    while process.returncode is None:  # noqa: ASYNC110
                        await asyncio.sleep(_POLL_SECONDS)
            except TimeoutError:
                timed_out = True
            _kill_group(process.pid)  # whatever it left running in the background goes too
            _, pending = await asyncio.wait(readers, timeout=_PIPE_GRACE_SECONDS)
            for reader in pending:  # a child that escaped the group still holds a pipe
                reader.cancel()
    finally:
        _kill_group(process.pid)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(_PIPE_GRACE_SECONDS):
                await process.wait()
    code = process.returncode if process.returncode is not None else -1
    return ExecResult(exit_code=code, stdout=out.text(), stderr=err.text(), timed_out=timed_out)


def make_exec_tool(
    workspace: Path,
    *,
    env: Mapping[str, str] | None = None,
    default_timeout: float = DEFAULT_TIMEOUT,
    max_timeout: float = MAX_TIMEOUT,
    max_output: int = MAX_OUTPUT_BYTES,
) -> FunctionTool[..., Any]:
    """The ``exec`` tool bound to ``workspace``; ``env`` adds variables (never secret-looking ones)."""
    if not 0 < default_timeout <= max_timeout:
        raise ValueError("exec needs 0 < default_timeout <= max_timeout")
    root = Path(workspace)
    environment = safe_environment(env)

    @tool(
        name="exec",
        permission="ask",
        groups=("exec",),
        level="admin",
        timeout=max_timeout + 2 * _PIPE_GRACE_SECONDS + 5.0,  # our own timeout fires first, with output
    )
    async def exec_command(
        command: Annotated[str, Field(min_length=1, max_length=100_000)],
        timeout: Annotated[float, Field(gt=0)] = default_timeout,  # noqa: ASYNC109 -- the model's argument
    ) -> str:
        """Run a shell command (/bin/sh -c) in the workspace folder and return its exit code and output.

        The command has no stdin. Anything it starts in the background is stopped when it ends.
        Output is capped; long output keeps its beginning and end.

        Args:
            command: The shell command, e.g. "ls -la" or "python -m pytest -q tests/".
            timeout: Seconds before the command is killed (capped by the tool's maximum).
        """
        if "\x00" in command:
            raise ValueError("command contains a NUL byte")
        seconds = min(float(timeout), max_timeout)
        result = await run_shell(command, cwd=root, env=environment, seconds=seconds, max_output=max_output)
        text = result.render()
        if timeout > max_timeout:
            text += f"\n(note: timeout capped at the maximum of {max_timeout:g} s)"
        if result.timed_out:
            raise CommandTimeout(
                f"the command timed out after {seconds:g} s and was killed, with everything it started\n{text}"
            )
        return text

    return exec_command


class _Capture:
    """Keeps the first and last ``limit / 2`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self._half = max(1, limit // 2)
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(_READ_CHUNK):
            self._total += len(chunk)
            room = self._half - len(self._head)
            if room > 0:
                self._head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self._tail += chunk
                if len(self._tail) > self._half:
                    del self._tail[: len(self._tail) - self._half]

    def text(self) -> str:
        head = self._head.decode("utf-8", errors="replace")
        cut = self._total - len(self._head) - len(self._tail)
        tail = self._tail.decode("utf-8", errors="replace")
        if cut <= 0:
            return head + tail
        note = f"\n[… output truncated: {self._total} bytes in all, {cut} bytes cut from the middle …]\n"
        return head + note + tail


def _kill_group(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
