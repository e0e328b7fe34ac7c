"""The exec tool: real shell commands in the workspace, with timeouts, caps and a clean environment."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from loopwright import Agent, ToolCall
from loopwright.approvals import ApprovalRequest
from loopwright.testing import ScriptedModel
from loopwright.tools import ToolArgumentError, ToolContext
from loopwright.tools._exec import CommandTimeout, make_exec_tool, run_shell, safe_environment
from loopwright.tools.base import tool_traits
from loopwright.tools.builtin import BUILTIN_TOOL_NAMES, DEFAULT_TOOL_NAMES, builtin_tool, builtin_tools


async def run_exec(workspace: Path, ctx: ToolContext, arguments: str, **options: object) -> str:
    t = make_exec_tool(workspace, **options)  # type: ignore[arg-type]
    result: str = await t.call(t.validate(arguments), ctx)
    return result


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs once a SIGKILL sent to it has had time to land (up to 10 s)."""
    deadline = time.monotonic() + 10.0
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return _running(pid)


def test_exec_is_an_admin_tool_that_asks_first(tmp_path: Path) -> None:
    t = builtin_tool("exec", tmp_path)
    traits = tool_traits(t)
    assert (t.name, traits.permission, traits.groups, traits.level) == ("exec", "ask", ("exec",), "admin")
    assert "exec" in BUILTIN_TOOL_NAMES
    assert "exec" not in DEFAULT_TOOL_NAMES
    assert "exec" not in [t.name for t in builtin_tools(tmp_path)]
    assert t.parameters["required"] == ["command"]


async def test_runs_in_the_workspace_and_reports_exit_code_and_output(
    tmp_path: Path, ctx: ToolContext
) -> None:
    (tmp_path / "marker.txt").write_text("here\n")
    text = await run_exec(tmp_path, ctx, '{"command": "pwd; cat marker.txt; echo oops >&2; exit 3"}')
    assert text == f"exit code: 3\nstdout:\n{os.path.realpath(tmp_path)}\nhere\nstderr:\noops"  # noqa: ASYNC240


async def test_empty_output_is_said_so(tmp_path: Path, ctx: ToolContext) -> None:
    assert (
        await run_exec(tmp_path, ctx, '{"command": "true"}')
        == "exit code: 0\nstdout: (empty)\nstderr: (empty)"
    )


async def test_secrets_never_reach_the_command(
    tmp_path: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {
        "OPENAI_API_KEY": "sk-secret-1",
        "GITHUB_TOKEN": "ghp-secret-2",
        "DB_PASSWORD": "secret-3",
        "AWS_SECRET_ACCESS_KEY": "secret-4",
        "MY_SERVICE_CREDENTIALS": "secret-5",
        "DATABASE_URL": "postgres://u:secret-6@h/db",
        "SOME_HARMLESS_SETTING": "not-a-secret-but-not-passed",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LANG", "C.UTF-8")
    text = await run_exec(
        tmp_path, ctx, '{"command": "env"}', env={"BUILD_MODE": "fast", "EXTRA_TOKEN": "secret-7"}
    )
    for value in [*secrets.values(), "secret-7"]:
        assert value not in text
    names = {
        line.split("=", 1)[0] for line in text.split("stdout:\n", 1)[1].split("\nstderr:")[0].splitlines()
    }
    assert {"PATH", "HOME", "LANG", "TERM", "BUILD_MODE"} <= names
    assert not names & {*secrets, "EXTRA_TOKEN"}
    assert "BUILD_MODE=fast" in text and "TERM=dumb" in text


def test_safe_environment_filters_names_that_look_secret() -> None:
    env = safe_environment(
        {"API_KEY": "x", "PWD": "/w", "npm_config_authtoken": "x", "CC": "gcc"},
        environ={"PATH": "/bin", "HOME": "/h", "SSH_AUTH_SOCK": "/tmp/agent", "HISTFILE": "x"},
    )
    assert env == {"PATH": "/bin", "HOME": "/h", "LANG": "C.UTF-8", "TERM": "dumb", "PWD": "/w", "CC": "gcc"}


async def test_a_timeout_kills_the_command_and_its_children(tmp_path: Path, ctx: ToolContext) -> None:
    script = (
        "sleep 300 & echo child=$! > pids; echo shell=$$ >> pids; echo started; "
        "sh -c 'sleep 300' & echo grandchild=$! >> pids; wait"
    )
    t = make_exec_tool(tmp_path)
    with pytest.raises(CommandTimeout) as info:
        await t.call(t.validate(f'{{"command": "{script}", "timeout": 3}}'), ctx)
    message = str(info.value)
    assert message.startswith("the command timed out after 3 s and was killed, with everything it started\n")
    assert "exit code: -9" in message and "stdout:\nstarted" in message
    pids = dict(line.split("=") for line in (tmp_path / "pids").read_text().split())
    assert set(pids) == {"child", "shell", "grandchild"}
    for pid in pids.values():
        assert not _alive(int(pid)), f"process {pid} outlived the timed-out command"


async def test_background_processes_end_with_the_command(tmp_path: Path, ctx: ToolContext) -> None:
    text = await run_exec(tmp_path, ctx, '{"command": "sleep 300 & echo $! > bg.pid; echo done"}')
    assert text == "exit code: 0\nstdout:\ndone\nstderr: (empty)"
    assert not _alive(int((tmp_path / "bg.pid").read_text()))


async def test_the_timeout_is_capped_by_the_maximum(tmp_path: Path, ctx: ToolContext) -> None:
    text = await run_exec(
        tmp_path, ctx, '{"command": "echo hi", "timeout": 99999}', max_timeout=5.0, default_timeout=5.0
    )
    assert text == "exit code: 0\nstdout:\nhi\nstderr: (empty)\n(note: timeout capped at the maximum of 5 s)"


async def test_output_is_capped_keeping_start_and_end(tmp_path: Path, ctx: ToolContext) -> None:
    command = "seq 1 200000; seq 1 50000 >&2"
    text = await run_exec(tmp_path, ctx, f'{{"command": "{command}"}}', max_output=2000)
    stdout = text.split("stdout:\n", 1)[1].split("\nstderr:")[0]
    total = len("".join(f"{i}\n" for i in range(1, 200001)))
    assert stdout.startswith("1\n2\n3\n")
    assert stdout.endswith("199999\n200000")
    assert f"[… output truncated: {total} bytes in all, {total - 2000} bytes cut from the middle …]" in stdout
    assert len(stdout) < 2200
    stderr = text.split("\nstderr:\n", 1)[1]
    assert stderr.startswith("1\n2\n") and stderr.endswith("50000") and "output truncated" in stderr


async def test_a_flood_of_output_costs_no_memory_beyond_the_cap(tmp_path: Path) -> None:
    result = await run_shell(
        "head -c 50000000 /dev/zero | tr '\\0' x",
        cwd=tmp_path,
        env=safe_environment(),
        seconds=30,
        max_output=1000,
    )
    assert result.exit_code == 0
    assert len(result.stdout) < 1200 and "50000000 bytes in all" in result.stdout


def test_bad_arguments_are_argument_errors(tmp_path: Path) -> None:
    t = make_exec_tool(tmp_path)
    for arguments, expected in (
        ("{}", "missing required argument 'command'"),
        ('{"command": ""}', "command: String should have at least 1 character"),
        ('{"command": "ls", "timeout": 0}', "timeout: Input should be greater than 0"),
        ('{"command": "ls", "cwd": "/"}', "unknown argument 'cwd'"),
    ):
        with pytest.raises(ToolArgumentError) as info:
            t.validate(arguments)
        assert expected in str(info.value)


async def test_through_the_loop_a_timeout_is_an_error_result_with_output(tmp_path: Path) -> None:
    exec_tool = make_exec_tool(tmp_path)
    model = ScriptedModel(
        [
            [ToolCall(id="x", name="exec", arguments='{"command": "echo partial; sleep 30", "timeout": 1}')],
            "ok",
        ]
    )
    asked: list[str] = []

    def approve(request: ApprovalRequest) -> str:
        asked.append(request.tool)
        return "approve"

    report = await Agent(model, tools=[exec_tool], approver=approve).run("go")
    assert asked == ["exec"]  # exec is "ask": it ran only once approved
    call = report.steps[0].tool_calls[0]
    assert call.error is not None
    assert call.error.startswith("tool 'exec' failed: CommandTimeout: the command timed out after 1 s")
    assert "stdout:\npartial" in call.error
