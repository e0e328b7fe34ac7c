"""MCP over stdio against real servers as subprocesses: mcp-server-time and mcp-server-git from PyPI
(each in its own cached venv) and the SDK-built demo server in tests/tools/mcp_fixtures."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.tools.mcp_fixtures.support import children, ctx, demo, state, wait_gone
from tests.tools.mcp_fixtures.venvs import server_executable

from loopwright.tools.base import ToolArgumentError, tool_traits
from loopwright.tools.mcp import MCPServer, MCPServerError, MCPTool, MCPToolError, MCPToolset


@pytest.fixture(scope="session")
def time_server() -> Path:
    return server_executable("mcp-server-time")


@pytest.fixture(scope="session")
def git_server() -> Path:
    return server_executable("mcp-server-git")


@pytest.mark.timeout(1800)  # the first run on a clean machine installs both servers from PyPI
def test_the_registry_servers_are_installed_in_their_own_venvs(time_server: Path, git_server: Path) -> None:
    for exe in (time_server, git_server):
        assert exe.is_absolute() and os.access(exe, os.X_OK)
        assert exe.parent.parent != Path(sys.prefix)  # not loopwright's own environment


async def tools_of(toolset: MCPToolset) -> dict[str, MCPTool]:
    return {t.name: t for t in await toolset.list_tools()}


# --- mcp-server-time -------------------------------------------------------------------------------


async def test_time_server_tools_are_named_marked_and_callable(time_server: Path) -> None:
    toolset = MCPToolset(MCPServer(name="time", command=[str(time_server), "--local-timezone", "UTC"]))
    try:
        tools = await tools_of(toolset)
        assert sorted(tools) == ["time__convert_time", "time__get_current_time"]
        now = tools["time__get_current_time"]
        traits = tool_traits(now)
        assert (traits.groups, traits.level, traits.untrusted) == (("mcp", "mcp:time"), "user", True)
        assert now.definition().name == "time__get_current_time"
        assert now.parameters["required"] == ["timezone"]
        assert now.remote_name == "get_current_time"

        result = json.loads(await now.call(now.validate('{"timezone": "Europe/Paris"}'), ctx()))
        assert result["timezone"] == "Europe/Paris" and result["datetime"].endswith(("+01:00", "+02:00"))
        convert = tools["time__convert_time"]
        arguments = '{"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}'
        converted = json.loads(await convert.call(convert.validate(arguments), ctx()))
        assert converted["target"]["datetime"].split("T")[1].startswith("21:00")
    finally:
        await toolset.aclose()


async def test_a_server_side_error_is_a_tool_error_with_the_servers_words(time_server: Path) -> None:
    toolset = MCPToolset(MCPServer(name="time", command=[str(time_server)]))
    try:
        now = (await tools_of(toolset))["time__get_current_time"]
        with pytest.raises(
            MCPToolError, match="Invalid timezone: 'No time zone found with key Mars/Olympus'"
        ):
            await now.call(now.validate('{"timezone": "Mars/Olympus"}'), ctx())
    finally:
        await toolset.aclose()


async def test_arguments_are_checked_against_the_servers_schema(time_server: Path) -> None:
    toolset = MCPToolset(MCPServer(name="time", command=[str(time_server)]))
    try:
        now = (await tools_of(toolset))["time__get_current_time"]
        cases = {
            "{}": "invalid arguments for tool 'time__get_current_time': 'timezone' is a required property",
            '{"timezone": 5}': "invalid arguments for tool 'time__get_current_time': timezone: 5 is not of type 'string'",
            "[1]": "arguments must be a JSON object, not an array",
            '{"timezone": ': "arguments are not valid JSON (Expecting value: line 1 column 14 (char 13))",
            '{"timezone": NaN}': "NaN is not a JSON number; send a finite number",
        }
        for arguments, message in cases.items():
            with pytest.raises(ToolArgumentError) as info:
                now.validate(arguments)
            assert message in str(info.value), arguments
    finally:
        await toolset.aclose()


async def test_killing_the_time_server_gives_a_clear_error_then_one_restart(time_server: Path) -> None:
    toolset = MCPToolset(MCPServer(name="time", command=[str(time_server)]))
    try:
        now = (await tools_of(toolset))["time__get_current_time"]
        first = toolset.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        with pytest.raises(MCPServerError) as info:
            await now.call({"timezone": "UTC"}, ctx())
        assert str(info.value) == (
            "MCP server 'time' exited (code -9, killed by signal 9) (the next call will restart it)"
        )
        assert json.loads(await now.call({"timezone": "UTC"}, ctx()))["timezone"] == "UTC"
        assert toolset.pid not in (None, first)
        assert wait_gone(first) is None  # the dead server was reaped, not left a zombie
    finally:
        await toolset.aclose()


# --- mcp-server-git --------------------------------------------------------------------------------


def make_repository(repo: Path) -> None:
    repo.mkdir()
    git = ["git", "-c", "user.name=T", "-c", "user.email=t@example.test", "-C", str(repo)]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (repo / "hello.txt").write_text("hello\n")
    subprocess.run([*git, "add", "hello.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "First commit from the test"], check=True)
    (repo / "hello.txt").write_text("hello, changed\n")


async def test_git_server_reads_a_real_repository(git_server: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repository(repo)

    toolset = MCPToolset(MCPServer(name="git", command=[str(git_server), "--repository", str(repo)]))
    try:
        tools = await tools_of(toolset)
        assert {"git__git_status", "git__git_log", "git__git_diff_unstaged"} <= set(tools)
        assert all(t.groups == ("mcp", "mcp:git") and t.untrusted for t in tools.values())
        status = tools["git__git_status"]
        text = await status.call(status.validate(json.dumps({"repo_path": str(repo)})), ctx())
        assert "On branch main" in text and "hello.txt" in text
        log = tools["git__git_log"]
        assert "First commit from the test" in await log.call(
            log.validate(json.dumps({"repo_path": str(repo)})), ctx()
        )
        diff = tools["git__git_diff_unstaged"]
        assert "+hello, changed" in await diff.call(
            diff.validate(json.dumps({"repo_path": str(repo)})), ctx()
        )
    finally:
        await toolset.aclose()


# --- lifecycle -------------------------------------------------------------------------------------


async def test_started_lazily_and_closed_without_a_zombie() -> None:
    before = children()
    toolset = MCPToolset(demo())
    assert toolset.pid is None and children() == before  # nothing runs until the tools are listed
    await toolset.list_tools()
    pid = toolset.pid
    assert pid is not None and pid in children() and state(pid) in ("S", "R")
    await toolset.aclose()
    assert state(pid) is None  # exited and reaped: no zombie left behind
    assert children() == before
    await toolset.aclose()  # closing twice is harmless


async def test_listing_is_done_once_and_reopening_after_close_works() -> None:
    toolset = MCPToolset(demo())
    try:
        first = await toolset.list_tools()
        assert [t.name for t in await toolset.list_tools()] == [t.name for t in first]
        await toolset.aclose()
        add = {t.name: t for t in await toolset.list_tools()}["demo__add"]
        assert await add.call({"a": 2, "b": 3}, ctx()) == "5"
    finally:
        await toolset.aclose()


async def test_tool_attributes_follow_the_server() -> None:
    toolset = MCPToolset(demo())
    try:
        tools = await tools_of(toolset)
        assert list(tools) == [
            "demo__add",
            "demo__echo",
            "demo__fail",
            "demo__sleep",
            "demo__show_env",
            "demo__crash",
            "demo__picture",
            "demo__dotted_name",
        ]
        assert tools["demo__add"].idempotent is True  # idempotentHint
        assert tools["demo__echo"].idempotent is False
        assert tools["demo__dotted_name"].remote_name == "dotted.name"
        assert tools["demo__add"].description == "Add two integers."
        assert tools["demo__echo"].parameters["properties"]["times"]["default"] == 1
    finally:
        await toolset.aclose()


async def test_results_text_image_and_errors() -> None:
    toolset = MCPToolset(demo())
    try:
        tools = await tools_of(toolset)
        assert await tools["demo__echo"].call({"text": "hi", "times": 3}, ctx()) == "hi hi hi"
        picture = await tools["demo__picture"].call({}, ctx())
        assert picture == "[image: image/png, about 66 bytes, not shown]"
        assert await tools["demo__dotted_name"].call({}, ctx()) == "dotted"
        with pytest.raises(MCPToolError, match="Error executing tool fail"):
            await tools["demo__fail"].call({"message": "no"}, ctx())
    finally:
        await toolset.aclose()


async def test_the_server_gets_a_minimal_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setenv("SOME_PASSWORD", "hunter2")
    monkeypatch.setenv("HANDED_OVER", "on-purpose")
    toolset = MCPToolset(demo(env={"SERVICE_TOKEN": "${HANDED_OVER}", "MODE": "test"}))
    try:
        show_env = (await tools_of(toolset))["demo__show_env"]
        env = json.loads(await show_env.call({}, ctx()))
        assert "OPENAI_API_KEY" not in env and "SOME_PASSWORD" not in env
        assert "sk-must-not-leak" not in json.dumps(env) and "hunter2" not in json.dumps(env)
        assert env["SERVICE_TOKEN"] == "on-purpose" and env["MODE"] == "test"
        assert env["PATH"] == os.environ["PATH"]
        assert set(env) <= {
            "PATH",
            "HOME",
            "LANG",
            "LC_ALL",
            "LC_CTYPE",
            "TZ",
            "TMPDIR",
            "USER",
            "LOGNAME",
            "SERVICE_TOKEN",
            "MODE",
        }
    finally:
        await toolset.aclose()


# --- crashes and failures --------------------------------------------------------------------------


async def test_a_crash_mid_session_is_an_error_then_one_restart_then_no_more() -> None:
    toolset = MCPToolset(demo())
    try:
        tools = await tools_of(toolset)
        first = toolset.pid
        assert first is not None
        with pytest.raises(MCPServerError) as info:
            await tools["demo__crash"].call({"code": 7}, ctx())
        assert str(info.value) == (
            "MCP server 'demo' exited (code 7): demo server: crashing with code 7 on request "
            "(the next call will restart it)"
        )
        assert info.value.server == "demo"
        assert await tools["demo__add"].call({"a": 1, "b": 1}, ctx()) == "2"  # restarted
        second = toolset.pid
        assert second not in (None, first) and state(first) is None

        assert second is not None
        os.kill(second, signal.SIGKILL)
        with pytest.raises(MCPServerError) as info:
            await tools["demo__add"].call({"a": 1, "b": 1}, ctx())
        assert str(info.value) == (
            "MCP server 'demo' exited (code -9, killed by signal 9) (it will not be restarted again)"
        )
        with pytest.raises(MCPServerError) as info:
            await tools["demo__add"].call({"a": 1, "b": 1}, ctx())
        assert str(info.value) == (
            "MCP server 'demo' exited (code -9, killed by signal 9); "
            "it was already restarted once and will not be restarted again, so its tools are unavailable"
        )
        assert wait_gone(second) is None
    finally:
        await toolset.aclose()


async def test_a_server_that_exits_at_start_explains_why() -> None:
    script = "import sys; sys.stderr.write('config file missing\\n'); sys.exit(3)"
    toolset = MCPToolset(MCPServer(name="broken", command=[sys.executable, "-c", script]))
    with pytest.raises(MCPServerError) as info:
        await toolset.list_tools()
    assert str(info.value) == "MCP server 'broken' exited (code 3): config file missing"
    await toolset.aclose()


async def test_a_missing_program_explains_why() -> None:
    toolset = MCPToolset(MCPServer(name="nope", command=["/nonexistent/mcp-server"]))
    with pytest.raises(MCPServerError) as info:
        await toolset.list_tools()
    assert str(info.value).startswith("MCP server 'nope' could not start: FileNotFoundError: ")
    assert "/nonexistent/mcp-server" in str(info.value)


async def test_a_server_that_never_answers_times_out_at_start_and_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    toolset = MCPToolset(MCPServer(name="mute", command=[sys.executable, "-c", script], startup_timeout=1))
    with pytest.raises(MCPServerError) as info:
        await toolset.list_tools()
    assert str(info.value) == "MCP server 'mute' did not start within 1 s"
    assert state(int(pid_file.read_text())) is None  # killed and reaped


async def test_a_slow_call_times_out_and_the_server_stays_usable() -> None:
    toolset = MCPToolset(demo(timeout=3))
    try:
        tools = await tools_of(toolset)
        with pytest.raises(MCPServerError) as info:
            await tools["demo__sleep"].call({"seconds": 30}, ctx())
        assert str(info.value) == "MCP server 'demo' did not run tool 'sleep' within 3 s"
        assert await tools["demo__add"].call({"a": 20, "b": 22}, ctx()) == "42"
    finally:
        await toolset.aclose()


async def test_calls_run_concurrently_on_one_server() -> None:
    toolset = MCPToolset(demo())
    try:
        tools = await tools_of(toolset)
        results = await asyncio.gather(*(tools["demo__add"].call({"a": i, "b": i}, ctx()) for i in range(20)))
        assert results == [str(2 * i) for i in range(20)]
    finally:
        await toolset.aclose()


def test_a_new_event_loop_starts_a_fresh_server_and_kills_the_old() -> None:
    toolset = MCPToolset(demo())

    async def add() -> tuple[str, int | None]:
        tools = await tools_of(toolset)
        return await tools["demo__add"].call({"a": 1, "b": 2}, ctx()), toolset.pid

    first_result, first_pid = asyncio.run(add())
    second_result, second_pid = asyncio.run(add())  # the first loop is gone: its server cannot be used
    asyncio.run(toolset.aclose())
    assert (first_result, second_result) == ("3", "3")
    assert first_pid is not None and second_pid not in (None, first_pid)
    assert wait_gone(first_pid) is None and wait_gone(second_pid or 0) is None


async def test_an_unset_variable_in_env_is_named_when_the_server_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    toolset = MCPToolset(demo(env={"TOKEN": "${NOT_SET_ANYWHERE}"}))
    with pytest.raises(MCPServerError) as info:
        await toolset.list_tools()
    assert str(info.value) == (
        "MCP server 'demo' could not start: ConfigError: MCP server 'demo': env.TOKEN refers to "
        "${NOT_SET_ANYWHERE}, which is not set"
    )
