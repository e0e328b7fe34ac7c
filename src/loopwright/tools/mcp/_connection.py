"""One live connection to an MCP server, owned by a task of its own.

The SDK's client and transports are built on task groups, which must be entered and left by the same
task; tools, however, are called from whichever task runs the step, and the agent closes its toolsets
from yet another. So a small owner task enters the client, reports ready, and waits to be told to
close; callers only send requests through the session, which is safe from any task on the same loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any

import mcp_types
from mcp.client import Client
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from loopwright.errors import RunError
from loopwright.tools.mcp._config import MCPServer
from loopwright.tools.mcp._stdio import StdioTransport

__all__ = ["Connection", "MCPServerError", "MCPToolError"]

_CLIENT_INFO = mcp_types.Implementation(name="loopwright", version="0")
_CLOSE_SECONDS = 10.0
_EXIT_WAIT_SECONDS = 2.0


class MCPServerError(RunError):
    """An MCP server could not be started, exited, or did not answer. ``server`` names it.

    Raised from a tool call, it becomes an error result the model sees; from ``list_tools()``, it
    means the server's tools cannot be offered at all."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(message)
        self.server = server


class MCPToolError(Exception):
    """The server ran the tool and reported a failure (``isError``); the message is the server's text."""


class Connection:
    """A started server and its client session; :meth:`close` shuts both down."""

    def __init__(self, server: MCPServer, environ: Mapping[str, str] | None) -> None:
        self.server = server
        self._environ = environ
        self.loop = asyncio.get_running_loop()
        self.stdio: StdioTransport | None = None
        self.client: Client | None = None
        self.failure: str | None = None  # why the connection ended on its own, if it did
        self._closing = asyncio.Event()
        self._ready: asyncio.Future[None] = self.loop.create_future()
        self._task: asyncio.Task[None] | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    async def open(self) -> None:
        """Start the server and finish the MCP handshake, within ``startup_timeout``."""
        name = self.server.name
        self._task = asyncio.create_task(self._own(), name=f"loopwright-mcp-{name}")
        try:
            async with asyncio.timeout(self.server.startup_timeout):
                await asyncio.shield(self._ready)
        except TimeoutError:
            await self.close()
            raise MCPServerError(
                name,
                self._with_stderr(
                    f"MCP server {name!r} did not start within {self.server.startup_timeout:g} s"
                ),
            ) from None
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Shut the session and the server down (stdio: the whole process group, reaped)."""
        self._closing.set()
        task = self._task
        if task is None or task.done():
            return
        if task.get_loop() is not asyncio.get_running_loop():
            self.abandon()
            return
        if not self._ready.done():  # still starting: nothing to wind down politely
            task.cancel()
        try:
            # asyncio.wait, not await: the owner's own end (even a cancellation) is not our error.
            await asyncio.wait({task}, timeout=_CLOSE_SECONDS)
            if not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=_CLOSE_SECONDS)
        finally:
            if self.stdio is not None:
                self.stdio.kill_now()

    def abandon(self) -> None:
        """For a connection whose event loop is gone: kill its process, forget the rest."""
        if self.stdio is not None:
            self.stdio.kill_now()

    @property
    def alive(self) -> bool:
        if self.failure is not None or self._task is None or self._task.done():
            return False
        return self.stdio is None or self.stdio.returncode is None

    async def _own(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                client = Client(await self._transport(stack), client_info=_CLIENT_INFO)
                await stack.enter_async_context(client)
                self.client = client
                self._ready.set_result(None)
                await self._closing.wait()
        except asyncio.CancelledError:  # closed while starting, or its loop is shutting down
            raise
        except BaseException as exc:  # the owner ends; what ended it is kept for the next caller
            reason = await self.describe_failure(exc)
            if not self._ready.done():
                self._ready.set_exception(MCPServerError(self.server.name, reason))
            else:
                self.failure = reason
        finally:
            if not self._ready.done():
                self._ready.set_exception(
                    MCPServerError(self.server.name, f"MCP server {self.server.name!r} closed")
                )
            if not self._ready.cancelled():
                self._ready.exception()  # retrieved here, so a start nobody awaits any more logs nothing

    async def _transport(self, stack: AsyncExitStack) -> AbstractAsyncContextManager[TransportStreams]:
        server = self.server
        if server.command is not None:
            self.stdio = StdioTransport(server.command, env=server.launch_env(self._environ), cwd=server.cwd)
            return self.stdio
        assert server.url is not None
        http = create_mcp_http_client(headers=server.resolved_headers(self._environ) or None)
        await stack.enter_async_context(http)  # a client we pass in is ours to close, not the transport's
        return streamable_http_client(server.url, http_client=http)

    # --- requests --------------------------------------------------------------------------------

    async def list_tools(self) -> list[mcp_types.Tool]:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a server whose pages never end cannot hang the agent
            page = await self._request(self._session().list_tools(cursor=cursor), "list its tools")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        result: mcp_types.CallToolResult = await self._request(
            self._session().call_tool(name, arguments), f"run tool {name!r}"
        )
        return result

    def _session(self) -> Client:
        if self.client is None:
            raise MCPServerError(self.server.name, f"MCP server {self.server.name!r} is not connected")
        return self.client

    async def _request(self, request: Any, what: str) -> Any:
        name = self.server.name
        try:
            async with asyncio.timeout(self.server.timeout):
                return await request
        except TimeoutError:
            if not self.alive:
                raise MCPServerError(name, await self.crash_report()) from None
            raise MCPServerError(
                name, f"MCP server {name!r} did not {what} within {self.server.timeout:g} s"
            ) from None
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED or not self.alive:
                self.failure = self.failure or "connection closed"
                raise MCPServerError(name, await self.crash_report()) from None
            raise MCPServerError(name, f"MCP server {name!r} could not {what}: {exc}") from None
        except Exception as exc:
            if not self.alive or self.stdio is None:
                self.failure = self.failure or _leaf_message(exc)
                raise MCPServerError(name, await self.crash_report()) from None
            raise MCPServerError(
                name, f"MCP server {name!r} could not {what}: {_leaf_message(exc)}"
            ) from None

    # --- explaining failures ---------------------------------------------------------------------

    async def crash_report(self) -> str:
        """What happened to a server that stopped answering: its exit code and last stderr lines."""
        name = self.server.name
        if self.stdio is None:
            detail = self.failure or "connection lost"
            return f"MCP server {name!r} at {self.server.url} is unreachable: {detail}"
        code = await self.stdio.wait_exit(_EXIT_WAIT_SECONDS)
        if code is None:
            message = f"MCP server {name!r} closed its connection"
        elif code < 0:
            message = f"MCP server {name!r} exited (code {code}, killed by signal {-code})"
        else:
            message = f"MCP server {name!r} exited (code {code})"
        return self._with_stderr(message)

    async def describe_failure(self, exc: BaseException) -> str:
        name, detail = self.server.name, _leaf_message(exc)
        if self.server.command is None:
            return f"MCP server {name!r} at {self.server.url} failed: {detail}"
        if self.stdio is None or self.stdio.process is None:
            return f"MCP server {name!r} could not start: {detail}"
        if await self.stdio.wait_exit(0.5) is not None:
            return await self.crash_report()
        return self._with_stderr(f"MCP server {name!r} failed: {detail}")

    def _with_stderr(self, message: str) -> str:
        tail = self.stdio.stderr_tail() if self.stdio is not None else ""
        return f"{message}: {tail}" if tail else message


def _leaf_message(exc: BaseException) -> str:
    """The first real error inside (possibly nested) exception groups, as "Type: message"."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
