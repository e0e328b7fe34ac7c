"""An MCP server's tools as loopwright tools: a :class:`MCPToolset` per server, a :class:`MCPTool` per tool.

The server starts at the first :meth:`MCPToolset.list_tools` (the agent's first run), not before.
Each tool is named ``<server>__<tool>``, is marked ``untrusted`` (its results are outside content),
belongs to the groups ``mcp`` and ``mcp:<server>``, and is ``idempotent`` when the server says so
(``idempotentHint``). A server that dies mid-session turns its calls into error results naming its
exit code and last stderr lines; the next call restarts it, once. :meth:`MCPToolset.aclose` shuts
the server down.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

import mcp_types
from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]
from jsonschema.validators import Draft202012Validator, validator_for  # type: ignore[import-untyped]

from loopwright.models.base import ToolDefinition
from loopwright.tools.base import ToolArgumentError, ToolContext
from loopwright.tools.mcp._config import MCPServer
from loopwright.tools.mcp._connection import Connection, MCPServerError, MCPToolError

__all__ = ["MCPTool", "MCPToolset", "mcp_toolsets", "render_result"]

_TOOL_NAME_CHARS_RE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_TOOL_NAME = 64
_MAX_DESCRIPTION_CHARS = 4000
_MAX_ARGUMENT_CHARS = 1_000_000
_MAX_REPORTED_ERRORS = 3
_ERROR_PART_CHARS = 200


class MCPToolset:
    """The tools of one MCP server. Pass it in ``Agent(tools=[...])``; the agent starts and closes it.

    ``max_restarts`` is how many times a server that died is started again (on the next call).
    ``environ`` is where ``${NAME}`` references of the configuration are read (default: ``os.environ``).
    """

    def __init__(
        self, server: MCPServer, *, max_restarts: int = 1, environ: Mapping[str, str] | None = None
    ) -> None:
        self.server = server
        self.max_restarts = max_restarts
        self._environ = environ
        self._connection: Connection | None = None
        self._tools: list[MCPTool] | None = None
        self._restarts = 0
        self._last_crash: str | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    @property
    def name(self) -> str:
        return self.server.name

    @property
    def pid(self) -> int | None:
        """The server's process id while a stdio server runs (for monitoring and tests)."""
        connection = self._connection
        return connection.stdio.pid if connection is not None and connection.stdio is not None else None

    async def list_tools(self) -> Sequence[MCPTool]:
        """Start the server if needed and return its tools (listed once, then remembered)."""
        async with self._guard():
            if self._tools is None:
                connection = await self._connect()
                self._tools = _build_tools(self, await connection.list_tools())
            return list(self._tools)

    async def aclose(self) -> None:
        """Stop the server. A later ``list_tools()`` or call starts it again."""
        async with self._guard():
            connection, self._connection = self._connection, None
            self._restarts = 0
            self._last_crash = None
            if connection is not None:
                await connection.close()

    async def call_tool(self, remote_name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call a tool by its name on the server; a dead server is restarted (at most ``max_restarts``)."""
        async with self._guard():
            connection = await self._connect()
        try:
            return await connection.call_tool(remote_name, arguments)
        except MCPServerError as exc:
            if connection.alive:
                raise
            self._last_crash = str(exc)
            left = self.max_restarts - self._restarts
            then = "the next call will restart it" if left > 0 else "it will not be restarted again"
            raise MCPServerError(self.name, f"{exc} ({then})") from None

    # --- connection management -------------------------------------------------------------------

    async def _connect(self) -> Connection:
        """The live connection, started (or restarted after a crash) if needed. Call under the lock."""
        connection = self._connection
        loop = asyncio.get_running_loop()
        if connection is not None and connection.loop is not loop:
            connection.abandon()  # its event loop is gone (a new asyncio.run): start afresh
            connection = self._connection = None
        if connection is not None and connection.alive:
            return connection
        if connection is not None:  # it died
            crash = self._last_crash or await connection.crash_report()
            await connection.close()
            self._connection = None
            if self._restarts >= self.max_restarts:
                if self._restarts == 0:
                    why = "it is not restarted (max_restarts=0)"
                else:
                    times = "once" if self._restarts == 1 else f"{self._restarts} times"
                    why = f"it was already restarted {times} and will not be restarted again"
                raise MCPServerError(self.name, f"{crash}; {why}, so its tools are unavailable")
            self._restarts += 1
        connection = Connection(self.server, self._environ)
        await connection.open()
        self._connection = connection
        return connection

    def _guard(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    def __repr__(self) -> str:
        return f"MCPToolset({self.server.name!r}, transport={self.server.transport!r})"


def mcp_toolsets(
    servers: Sequence[MCPServer], *, workspace: str | os.PathLike[str] | None = None
) -> list[MCPToolset]:
    """One :class:`MCPToolset` per server (what an AGENT.md ``mcp:`` section turns into).

    With ``workspace``, a stdio server runs in the workspace folder, and a relative ``cwd`` is taken
    from there (not from wherever the process happens to run)."""
    toolsets: list[MCPToolset] = []
    for server in servers:
        if workspace is not None and server.command is not None:
            server = replace(server, cwd=os.path.join(os.fspath(workspace), server.cwd or ""))
            server = replace(server, cwd=os.path.normpath(server.cwd or "."))
        toolsets.append(MCPToolset(server))
    return toolsets


class MCPTool:
    """One tool of an MCP server, offered to the model as ``<server>__<tool>``."""

    permission: Literal["allow", "ask", "deny"] | None = None
    level: Literal["guest", "user", "admin", "owner"] = "user"
    untrusted: bool = True
    inline: bool = False

    def __init__(self, toolset: MCPToolset, remote: mcp_types.Tool, name: str) -> None:
        self.toolset = toolset
        self.remote_name = remote.name
        self._name = name
        server = toolset.server
        description = (
            remote.description or remote.title or f"The tool {remote.name!r} of MCP server {server.name!r}."
        )
        if len(description) > _MAX_DESCRIPTION_CHARS:
            description = description[: _MAX_DESCRIPTION_CHARS - 1] + "…"
        self._description = description
        self._parameters = _object_schema(remote.input_schema)
        self._validator = _validator(self._parameters)
        hints = remote.annotations
        self.idempotent = bool(hints is not None and hints.idempotent_hint)
        self.groups: tuple[str, ...] = ("mcp", f"mcp:{server.name}")
        # Our own deadline (inside the server's timeout, plus a restart) ends the call first, with a clear message.
        self._timeout = server.timeout + server.startup_timeout + 5.0
        self._definition = ToolDefinition(name=name, description=description, parameters=self._parameters)

    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str:
        return self._description

    @property
    def parameters(self) -> dict[str, Any]:
        return self._parameters

    @property
    def timeout(self) -> float | None:
        return self._timeout

    def definition(self) -> ToolDefinition:
        return self._definition

    def validate(self, arguments: str) -> dict[str, Any]:
        """Parse the model's JSON and check it against the server's input schema.

        Raises :class:`ToolArgumentError` (and nothing else) for anything the server should not see:
        invalid JSON, NaN/Infinity, a non-object, invalid Unicode, or a schema mismatch."""
        try:
            return self._validate(arguments)
        except ToolArgumentError:
            raise
        except RecursionError:
            raise ToolArgumentError(f"invalid arguments for tool {self._name!r}: nested too deeply") from None
        except Exception as exc:  # whatever the input, only ToolArgumentError leaves validate()
            raise ToolArgumentError(
                f"invalid arguments for tool {self._name!r}: {type(exc).__name__}"
            ) from None

    async def call(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        result = await self.toolset.call_tool(self.remote_name, arguments)
        text = render_result(result)
        if result.is_error:
            raise MCPToolError(text)
        return text

    def __repr__(self) -> str:
        return f"<MCPTool {self._name!r}>"

    def _validate(self, arguments: str) -> dict[str, Any]:
        if not isinstance(arguments, str):
            raise self._error(f"arguments must be a JSON object in a string, not {type(arguments).__name__}")
        if len(arguments) > _MAX_ARGUMENT_CHARS:
            raise self._error(
                f"arguments are too long ({len(arguments)} characters, at most {_MAX_ARGUMENT_CHARS})"
            )
        if not arguments.strip():
            value: Any = {}
        else:
            try:
                value = json.loads(arguments, parse_constant=_refuse_constant)
            except json.JSONDecodeError as exc:
                raise self._error(f"arguments are not valid JSON ({exc}); send a JSON object") from None
            except ToolArgumentError as exc:  # NaN or Infinity
                raise self._error(str(exc)) from None
        if not isinstance(value, dict):
            raise self._error(f"arguments must be a JSON object, not {_json_kind(value)}")
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise self._error("arguments contain invalid Unicode (a lone surrogate)") from None
        if self._validator is not None:
            problems = self._schema_problems(value)
            if problems:
                raise self._error("; ".join(problems))
        return value

    def _schema_problems(self, value: dict[str, Any]) -> list[str]:
        try:
            errors = sorted(self._validator.iter_errors(value), key=lambda e: (len(e.path), e.message))
        except RecursionError:
            raise
        except Exception:  # the schema cannot be evaluated here (e.g. a remote $ref): the server checks
            return []
        problems: list[str] = []
        for error in errors[:_MAX_REPORTED_ERRORS]:
            where = "/".join(str(part) for part in error.absolute_path)
            message = _clip(str(error.message), _ERROR_PART_CHARS)
            problems.append(f"{where}: {message}" if where else message)
        if len(errors) > _MAX_REPORTED_ERRORS:
            problems.append(f"and {len(errors) - _MAX_REPORTED_ERRORS} more problems")
        return problems

    def _error(self, detail: str) -> ToolArgumentError:
        message = f"invalid arguments for tool {self._name!r}: {detail}"
        return ToolArgumentError(message.encode("utf-8", "backslashreplace").decode("utf-8"))


def render_result(result: mcp_types.CallToolResult) -> str:
    """A tool result as text: text blocks joined; images, audio and resources described."""
    parts: list[str] = []
    has_text = False
    for block in result.content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)  # type: ignore[union-attr]
            has_text = True
        elif kind in ("image", "audio"):
            data = getattr(block, "data", "") or ""
            mime = getattr(block, "mime_type", None) or "unknown type"
            parts.append(f"[{kind}: {mime}, about {len(data) * 3 // 4} bytes, not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {getattr(block, 'name', '')} {getattr(block, 'uri', '')}]")
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            uri = getattr(resource, "uri", "")
            text = getattr(resource, "text", None)
            if isinstance(text, str):
                parts.append(f"[resource {uri}]\n{text}")
                has_text = True
            else:
                mime = getattr(resource, "mime_type", None) or "binary"
                parts.append(f"[resource {uri}: {mime}, not shown]")
        else:
            parts.append(f"[{kind or 'unknown'} content, not shown]")
    if result.structured_content is not None and not has_text:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = "\n".join(parts)
    return text if text else "(the tool returned no content)"


# --- helpers -------------------------------------------------------------------------------------


def _build_tools(toolset: MCPToolset, remote_tools: Sequence[mcp_types.Tool]) -> list[MCPTool]:
    prefix = f"{toolset.server.name}__"
    taken: set[str] = set()
    tools: list[MCPTool] = []
    for remote in remote_tools:
        base = prefix + (_TOOL_NAME_CHARS_RE.sub("_", remote.name) or "tool")
        name = base[:_MAX_TOOL_NAME]
        counter = 2
        while name in taken:  # two remote names that clean up to the same name
            suffix = f"_{counter}"
            name = base[: _MAX_TOOL_NAME - len(suffix)] + suffix
            counter += 1
        taken.add(name)
        tools.append(MCPTool(toolset, remote, name))
    return tools


def _object_schema(schema: Any) -> dict[str, Any]:
    out = dict(schema) if isinstance(schema, Mapping) else {}
    out.setdefault("type", "object")
    if out.get("type") == "object":
        out.setdefault("properties", {})
    return out


def _validator(schema: dict[str, Any]) -> Any:
    """A JSON-schema validator for the server's input schema, or None when the schema itself is invalid."""
    try:
        cls = validator_for(schema, default=Draft202012Validator)
        cls.check_schema(schema)
        return cls(schema)
    except (SchemaError, Exception):
        return None


def _refuse_constant(name: str) -> Any:
    raise ToolArgumentError(f"{name} is not a JSON number; send a finite number")


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
