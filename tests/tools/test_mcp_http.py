"""MCP over streamable HTTP: the SDK-built demo server as a real subprocess on 127.0.0.1."""

from __future__ import annotations

import pytest
from tests.tools.mcp_fixtures.support import ctx, http_demo, start_http_demo

from loopwright.tools.mcp import MCPServer, MCPServerError, MCPToolError, MCPToolset


async def test_tools_over_http_with_a_header_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_SECRET", "s3cret")
    with http_demo({"DEMO_TOKEN": "s3cret"}) as web:
        toolset = MCPToolset(
            MCPServer(name="web", url=web.url, headers={"Authorization": "Bearer ${DEMO_SECRET}"})
        )
        try:
            tools = {t.name: t for t in await toolset.list_tools()}
            assert "web__add" in tools and "web__echo" in tools
            add = tools["web__add"]
            assert (add.groups, add.untrusted, add.idempotent) == (("mcp", "mcp:web"), True, True)
            assert await add.call(add.validate('{"a": 40, "b": 2}'), ctx()) == "42"
            with pytest.raises(MCPToolError, match="Error executing tool fail"):
                await tools["web__fail"].call({"message": "x"}, ctx())
            assert toolset.pid is None  # nothing of ours runs for an HTTP server
        finally:
            await toolset.aclose()


async def test_a_refused_connection_is_a_clear_error() -> None:
    with http_demo({"DEMO_TOKEN": "right"}) as web:
        toolset = MCPToolset(MCPServer(name="web", url=web.url, headers={"Authorization": "Bearer wrong"}))
        with pytest.raises(MCPServerError) as info:
            await toolset.list_tools()
        assert (
            str(info.value)
            == f"MCP server 'web' at {web.url} failed: MCPError: Server returned an error response"
        )
        await toolset.aclose()


async def test_a_server_that_is_not_there_is_a_clear_error() -> None:
    with http_demo() as web:
        url = web.url
    toolset = MCPToolset(MCPServer(name="gone", url=url, startup_timeout=10))
    with pytest.raises(MCPServerError) as info:
        await toolset.list_tools()
    assert (
        str(info.value) == f"MCP server 'gone' at {url} failed: ConnectError: All connection attempts failed"
    )


async def test_a_server_that_dies_is_an_error_and_the_next_call_reconnects() -> None:
    web = start_http_demo()
    toolset = MCPToolset(MCPServer(name="web", url=web.url))
    try:
        add = {t.name: t for t in await toolset.list_tools()}["web__add"]
        assert await add.call({"a": 1, "b": 2}, ctx()) == "3"
        web.stop()
        with pytest.raises(MCPServerError) as info:
            await add.call({"a": 1, "b": 2}, ctx())
        assert str(info.value).startswith(f"MCP server 'web' at {web.url} is unreachable: ")
        assert str(info.value).endswith("(the next call will restart it)")
        web = start_http_demo(port=web.port)  # back on the same address
        assert await add.call({"a": 2, "b": 2}, ctx()) == "4"
    finally:
        await toolset.aclose()
        web.stop()
