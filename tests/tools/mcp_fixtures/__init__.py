"""Real MCP servers for the MCP tests: registry packages in cached venvs, and a small FastMCP script."""
