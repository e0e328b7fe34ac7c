"""The tool contract.

A tool has a name, a description and a JSON schema for its arguments. The loop calls
:meth:`Tool.validate` on the raw JSON the model sent (a :class:`ToolArgumentError` becomes an error
result the model sees), then :meth:`Tool.call` with the validated arguments and a :class:`ToolContext`.
:func:`loopwright.tool` builds one from a typed Python function.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from loopwright.models.base import ToolDefinition

__all__ = ["Tool", "ToolArgumentError", "ToolContext"]


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
    metrics: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Tool(Protocol):
    """Anything the loop can offer a model as a tool."""

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
