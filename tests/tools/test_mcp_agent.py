"""MCP tools end to end through the real loop: Agent(tools=[toolset]) and AGENT.md's ``mcp:``."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
from tests.helpers import assert_paired
from tests.tools.mcp_fixtures.support import DEMO_SERVER, demo, state
from tests.tools.mcp_fixtures.venvs import server_executable

from loopwright import Agent, ToolCall
from loopwright.messages import ToolResultMessage
from loopwright.testing import ScriptedModel
from loopwright.tools.mcp import MCPServer, MCPToolset


async def results(agent: Agent, session_id: str) -> list[ToolResultMessage]:
    loaded = await agent.store.load(session_id)
    assert_paired(loaded.messages)
    return [m for m in loaded.messages if isinstance(m, ToolResultMessage)]


async def test_an_agent_starts_its_server_at_the_first_run_and_stops_it_on_close() -> None:
    toolset = MCPToolset(demo())
    model = ScriptedModel([[ToolCall(id="a", name="demo__add", arguments='{"a": 2, "b": 3}')], "five"])
    agent = Agent(model, tools=[toolset])
    assert toolset.pid is None  # building the agent starts nothing
    report = await agent.run("add")
    pid = toolset.pid
    assert report.reason == "done" and report.final_text == "five"
    assert pid is not None and state(pid) in ("S", "R")
    offered = {t.name for t in model.requests[0].tools}
    assert {"demo__add", "demo__crash", "demo__echo"} <= offered
    [result] = await results(agent, report.session_id)
    assert result.content == '<untrusted source="demo__add">\n5\n</untrusted>'  # marked as outside content
    assert not result.is_error
    await agent.aclose()
    assert state(pid) is None


async def test_a_crash_mid_run_is_an_error_result_and_the_run_goes_on() -> None:
    toolset = MCPToolset(demo())
    model = ScriptedModel(
        [
            [ToolCall(id="c", name="demo__crash", arguments='{"code": 4}')],
            [ToolCall(id="a", name="demo__add", arguments='{"a": 1, "b": 1}')],
            "done anyway",
        ]
    )
    async with Agent(model, tools=[toolset]) as agent:
        report = await agent.run("go")
        assert report.reason == "done" and report.final_text == "done anyway"
        crashed, added = await results(agent, report.session_id)
        assert crashed.is_error
        assert crashed.content == (
            "tool 'demo__crash' failed: MCPServerError: MCP server 'demo' exited (code 4): "
            "demo server: crashing with code 4 on request (the next call will restart it)"
        )
        assert not added.is_error and added.content.endswith("\n2\n</untrusted>")


async def test_a_dead_server_stays_a_tool_error_once_its_restarts_are_used() -> None:
    toolset = MCPToolset(demo(), max_restarts=0)
    calls = [[ToolCall(id=f"a{i}", name="demo__add", arguments=f'{{"a": {i}, "b": 0}}')] for i in range(3)]
    model = ScriptedModel([calls[0], "warm", calls[1], calls[2], "gave up"])
    async with Agent(model, tools=[toolset]) as agent:
        await agent.run("warm up", session_id="s")
        pid = toolset.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        report = await agent.run("again", session_id="s")
        assert (report.reason, report.final_text) == ("done", "gave up")
        first, second, third = await results(agent, "s")
        assert (first.is_error, first.content) == (False, '<untrusted source="demo__add">\n0\n</untrusted>')
        assert (second.is_error, second.content) == (
            True,
            "tool 'demo__add' failed: MCPServerError: MCP server 'demo' exited (code -9, killed by signal 9) "
            "(it will not be restarted again)",
        )
        assert (third.is_error, third.content) == (
            True,
            "tool 'demo__add' failed: MCPServerError: MCP server 'demo' exited (code -9, killed by signal 9); "
            "it is not restarted (max_restarts=0), so its tools are unavailable",
        )
        assert toolset.pid is None and state(pid) is None


async def test_agent_md_mcp_servers_are_offered_and_closed(tmp_path: Path) -> None:
    (tmp_path / "AGENT.md").write_text(
        "---\n"
        "name: mcp-user\n"
        "mcp:\n"
        "  demo:\n"
        f"    command: [{json.dumps(sys.executable)}, {json.dumps(str(DEMO_SERVER))}, stdio]\n"
        "    timeout: 20\n"
        "---\n"
        "You add numbers.\n"
    )
    model = ScriptedModel([[ToolCall(id="a", name="demo__add", arguments='{"a": 20, "b": 22}')], "42"])
    agent = Agent(model, workspace=tmp_path)
    try:
        report = await agent.run("add")
        assert report.reason == "done"
        [result] = await results(agent, report.session_id)
        assert result.content == '<untrusted source="demo__add">\n42\n</untrusted>'
        [toolset] = agent.toolsets
        assert isinstance(toolset, MCPToolset) and toolset.server.timeout == 20.0
        pid = toolset.pid
    finally:
        await agent.aclose()
    assert pid is not None and state(pid) is None


@pytest.mark.timeout(1800)  # may install mcp-server-time from PyPI on a clean machine
async def test_the_time_server_through_the_loop() -> None:
    exe = server_executable("mcp-server-time")
    toolset = MCPToolset(MCPServer(name="time", command=[str(exe), "--local-timezone", "UTC"]))
    model = ScriptedModel(
        [
            [
                ToolCall(id="t1", name="time__get_current_time", arguments='{"timezone": "Asia/Tokyo"}'),
                ToolCall(id="t2", name="time__get_current_time", arguments='{"timezone": 3}'),
            ],
            "it is late in Tokyo",
        ]
    )
    async with Agent(model, tools=[toolset]) as agent:
        report = await agent.run("time in Tokyo?")
        by_id = {r.tool_call_id: r for r in await results(agent, report.session_id)}
        good, bad = by_id["t1"], by_id["t2"]
        assert '"timezone": "Asia/Tokyo"' in good.content and not good.is_error
        assert bad.is_error
        assert (
            bad.content
            == "invalid arguments for tool 'time__get_current_time': timezone: 3 is not of type 'string'"
        )
