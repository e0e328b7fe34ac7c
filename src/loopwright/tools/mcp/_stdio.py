"""The stdio transport: an MCP server as a child process speaking JSON-RPC lines on stdin/stdout.

Our own rather than the SDK's ``stdio_client`` because a crash must be explained: we keep the process
(its pid and exit code) and the tail of its stderr, so a dead server becomes "MCP server 'time' exited
(code 1): <last stderr lines>" instead of a bare "Connection closed". The server runs in its own
process group; closing the transport closes its stdin, waits briefly, then kills the whole group
(SIGTERM, then SIGKILL) and reaps it, so no zombie or orphaned grandchild survives the agent.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import mcp_types
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

__all__ = ["StdioTransport"]

_GRACE_SECONDS = 2.0
_TERM_SECONDS = 2.0
_STDERR_TAIL_CHARS = 2000
_MAX_LINE_BYTES = 64 * 1024 * 1024
_POLL_SECONDS = 0.01


class StdioTransport:
    """An async context manager yielding the (read, write) message streams of a server process."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None = None) -> None:
        self._argv = list(argv)
        self._env = dict(env)
        self._cwd = cwd
        self._stderr: deque[str] = deque()
        self._stderr_chars = 0
        self.process: anyio.abc.Process | None = None
        self._context: contextlib.AbstractAsyncContextManager[TransportStreams] | None = None

    # --- what a crash report needs ---------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def returncode(self) -> int | None:
        return self.process.returncode if self.process is not None else None

    def stderr_tail(self) -> str:
        """The last lines the server wrote to stderr (at most about 2,000 characters)."""
        text = "".join(self._stderr).strip()
        if len(text) > _STDERR_TAIL_CHARS:
            text = "…" + text[-_STDERR_TAIL_CHARS:]
        return text

    async def wait_exit(self, seconds: float) -> int | None:
        """The exit code once the process has ended, or None if it still runs after ``seconds``.

        Polls: ``Process.wait()`` also waits for the pipes to close, which a grandchild holding them
        open would delay indefinitely."""
        with anyio.move_on_after(seconds):
            while self.returncode is None:  # noqa: ASYNC110 -- no event exists for "exited"
                await anyio.sleep(_POLL_SECONDS)
        return self.returncode

    def kill_now(self) -> None:
        """Kill the server's process group at once (when no event loop can wind it down)."""
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(OSError):
                os.killpg(self.process.pid, signal.SIGKILL)

    # --- the transport ---------------------------------------------------------------------------

    async def __aenter__(self) -> TransportStreams:
        self._context = self._run()
        return await self._context.__aenter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._context is not None
        return await self._context.__aexit__(exc_type, exc, tb)

    @contextlib.asynccontextmanager
    async def _run(self) -> AsyncIterator[TransportStreams]:
        process = await anyio.open_process(
            self._argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self._env,
            cwd=self._cwd,
            start_new_session=True,  # its own process group: the kill reaches its children too
        )
        self.process = process
        incoming_writer, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        outgoing, outgoing_reader = anyio.create_memory_object_stream[SessionMessage](0)

        async def read_stdout() -> None:
            assert process.stdout is not None
            buffer = b""
            async with incoming_writer:
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    async for chunk in process.stdout:
                        lines = (buffer + chunk).split(b"\n")
                        buffer = lines.pop()
                        if len(buffer) > _MAX_LINE_BYTES:
                            self._note_stderr(f"[loopwright: a message over {_MAX_LINE_BYTES} bytes]\n")
                            return
                        for line in lines:
                            if line.strip():
                                await incoming_writer.send(_parse(line))

        async def read_stderr() -> None:
            assert process.stderr is not None
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                async for chunk in process.stderr:
                    self._note_stderr(chunk.decode("utf-8", errors="replace"))

        async def write_stdin() -> None:
            assert process.stdin is not None
            try:
                async with outgoing_reader:
                    async for message in outgoing_reader:
                        data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                        await process.stdin.send(data.encode("utf-8") + b"\n")
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                await incoming_writer.aclose()  # the server stopped reading: end the session's reads

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_stdout)
            tasks.start_soon(read_stderr)
            tasks.start_soon(write_stdin)
            try:
                yield incoming, outgoing
            finally:
                with anyio.CancelScope(shield=True):  # a cancelled caller must not leak the server
                    await outgoing.aclose()
                    await self._stop(process)
                    await incoming.aclose()
                tasks.cancel_scope.cancel()

    async def _stop(self, process: anyio.abc.Process) -> None:
        """Close stdin, give the server a moment, then SIGTERM and SIGKILL its whole group, and reap it."""
        if process.stdin is not None:
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.aclose()
        for sig, wait in ((None, _GRACE_SECONDS), (signal.SIGTERM, _TERM_SECONDS), (signal.SIGKILL, 5.0)):
            if sig is not None:
                with contextlib.suppress(OSError):
                    os.killpg(process.pid, sig)
            if await self.wait_exit(wait) is not None:
                break
        with contextlib.suppress(OSError):  # grandchildren that outlived the server
            os.killpg(process.pid, signal.SIGKILL)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await stream.aclose()
        with contextlib.suppress(Exception), anyio.move_on_after(_TERM_SECONDS):
            await process.aclose()

    def _note_stderr(self, text: str) -> None:
        self._stderr.append(text)
        self._stderr_chars += len(text)
        while self._stderr_chars > 2 * _STDERR_TAIL_CHARS and len(self._stderr) > 1:
            self._stderr_chars -= len(self._stderr.popleft())


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        message: Any = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        return exc
    return SessionMessage(message)
