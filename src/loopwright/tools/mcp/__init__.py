"""Tools from MCP servers (the official ``mcp`` SDK), over stdio or streamable HTTP.

::

    from loopwright import Agent
    from loopwright.tools.mcp import MCPServer, MCPToolset

    time = MCPToolset(MCPServer(name="time", command=["mcp-server-time", "--local-timezone", "UTC"]))
    agent = Agent("openai:gpt-4o", tools=[time])   # offers time__get_current_time, time__convert_time

See ``docs/mcp.md``: configuration in AGENT.md (``mcp:``), naming, lifecycle, crashes and trust.
"""

from loopwright.tools.mcp._config import MCPServer, parse_mcp_config
from loopwright.tools.mcp._connection import MCPServerError, MCPToolError
from loopwright.tools.mcp._toolset import MCPTool, MCPToolset, mcp_toolsets, render_result

__all__ = [
    "MCPServer",
    "MCPServerError",
    "MCPTool",
    "MCPToolError",
    "MCPToolset",
    "mcp_toolsets",
    "parse_mcp_config",
    "render_result",
]
