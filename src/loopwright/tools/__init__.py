"""Tools: the :class:`Tool` contract, ``@tool`` for typed functions, scope checks, built-ins."""

from loopwright.tools._function import FunctionTool, tool
from loopwright.tools._process import ProcessResult, run_process
from loopwright.tools._scope import ScopeError, resolve_in_scope
from loopwright.tools.base import Tool, ToolArgumentError, ToolContext
from loopwright.tools.builtin import BUILTIN_TOOL_NAMES, builtin_tool, builtin_tools

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "FunctionTool",
    "ProcessResult",
    "ScopeError",
    "Tool",
    "ToolArgumentError",
    "ToolContext",
    "builtin_tool",
    "builtin_tools",
    "resolve_in_scope",
    "run_process",
    "tool",
]
