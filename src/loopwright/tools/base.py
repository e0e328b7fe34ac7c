"""The tool contract.

A tool has a name, a description and a JSON schema for its arguments. The loop calls
:meth:`Tool.validate` on the raw JSON the model sent (a :class:`ToolArgumentError` becomes an error
result the model sees), then :meth:`Tool.call` with the validated arguments and a :class:`ToolContext`.
:func:`loopwright.tool` builds one from a typed Python function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from loopwright.models.base import ToolDefinition

if TYPE_CHECKING:
    from loopwright.caller import Caller

__all__ = ["Permission", "Tool", "ToolArgumentError", "ToolContext", "Toolset", "tool_traits"]

Permission = Literal["allow", "ask", "deny"]


class ToolArgumentError(Exception):
    """The model's arguments for a tool are not valid JSON or do not match the schema.

    Never escapes the loop: the message is returned to the model as an error tool result.
    """


@dataclass(slots=True, kw_only=True)
class ToolContext:
    """What a running tool may know about its call. Declare a parameter of this type to receive it.

    (Not frozen: one is made per tool call on the hot path, and frozen dataclasses cost 3x more to
    build. Treat it as read-only, except ``metrics``, where a tool may record figures for the report.)"""

    run_id: str
    session_id: str
    call_id: str
    tool_name: str
    step: int
    workspace: Path | None = None
    deps: Any = None
    caller: Caller | None = None
    """Who the run is for (``agent.run(..., caller=...)``); ``None`` for a plain library call."""
    metrics: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Tool(Protocol):
    """Anything the loop can offer a model as a tool.

    Optional attributes the loop reads when present (see :func:`tool_traits`): ``permission``
    (``"allow"``/``"ask"``/``"deny"``: the tool's own default in the permission policy), ``groups``
    (``("fs",)``, ``("exec",)``…: for policy rules and caller filtering), ``level`` (the lowest caller
    level that sees it, default ``"user"``), ``idempotent`` (safe to re-run when a crash left a call in
    doubt) and ``untrusted`` (its results are outside content, marked as such for the model).
    """

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> dict[str, Any]:
        """JSON schema (an object schema) of the arguments."""
        ...

    @property
    def timeout(self) -> float | None:
        """Seconds this tool may run; ``None`` uses the loop's ``tool_timeout``."""
        ...

    def definition(self) -> ToolDefinition: ...

    def validate(self, arguments: str) -> Any:
        """Parse and validate the raw JSON arguments; raise :class:`ToolArgumentError` if they are bad."""
        ...

    async def call(self, arguments: Any, ctx: ToolContext) -> Any:
        """Run the tool with arguments returned by :meth:`validate`. Exceptions become error results."""
        ...


@runtime_checkable
class Toolset(Protocol):
    """Tools discovered at run time (an MCP server, a plugin's catalogue). The agent lists them at its
    first run and closes the toolset with the agent."""

    @property
    def name(self) -> str: ...

    async def list_tools(self) -> Sequence[Tool]: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ToolTraits:
    """A tool's optional attributes, read once when the agent is built."""

    permission: Permission | None = None
    groups: tuple[str, ...] = ()
    level: str = "user"
    idempotent: bool = False
    untrusted: bool = False


def tool_traits(tool: object) -> ToolTraits:
    """The optional attributes of ``tool``, with their defaults."""
    permission = getattr(tool, "permission", None)
    if permission not in (None, "allow", "ask", "deny"):
        raise ValueError(f"tool {getattr(tool, 'name', tool)!r}: permission must be allow, ask or deny")
    return ToolTraits(
        permission=permission,
        groups=tuple(getattr(tool, "groups", ()) or ()),
        level=str(getattr(tool, "level", "user") or "user"),
        idempotent=bool(getattr(tool, "idempotent", False)),
        untrusted=bool(getattr(tool, "untrusted", False)),
    )
