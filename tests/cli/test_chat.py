"""``loopwright chat``: one session per conversation, /new, /exit, and Ctrl-C stopping a run."""

from __future__ import annotations

import asyncio
import io
import json
import signal
from pathlib import Path

import pytest
from rich.console import Console

from loopwright import Agent, RunEvent, ToolCallStarted
from loopwright.cli._render import LiveRenderer
from loopwright.cli._run import stream_run
from loopwright.sessions import FileSessionStore
from tests.cli.helpers import SLOW_TOOL, invoke, session_ids, tool_workspace
from tests.helpers import assert_paired, read_jsonl

#: The first call presses Ctrl-C (SIGINT to this process) and then waits to be stopped.
INTERRUPTING_TOOL = '''
import asyncio
import signal
from loopwright import tool

calls = []

@tool
async def press_ctrl_c() -> str:
    """Interrupt the first time."""
    calls.append(1)
    if len(calls) == 1:
        signal.raise_signal(signal.SIGINT)
        await asyncio.sleep(30)
    return "not this time"
'''


class _Signalling:
    """A renderer that says when it has shown a tool call start."""

    def __init__(self, inner: LiveRenderer) -> None:
        self.inner = inner
        self.tool_started = asyncio.Event()

    def __call__(self, event: RunEvent) -> None:
        self.inner(event)
        if isinstance(event, ToolCallStarted):
            self.tool_started.set()

    def close(self) -> None:
        self.inner.close()


def test_one_session_per_conversation_and_new(workspace: Path) -> None:
    result = invoke(["chat", "-w", str(workspace)], input="hello\n/new\nhi\n/exit\n")
    assert result.exit_code == 0, result.output
    sessions = session_ids(workspace)
    assert len(sessions) == 2
    first, second = sorted(sessions, key=lambda s: result.stdout.index(s))
    assert f"\nsession {first}\n" in result.stdout
    assert f"\nnew session {second}\n" in result.stdout
    assert read_jsonl(workspace / "sessions" / first / "transcript.jsonl")[0]["content"] == "hello"
    assert read_jsonl(workspace / "sessions" / second / "transcript.jsonl")[0]["content"] == "hi"
    assert result.stdout.count("done · 10 steps · 9 tool calls") == 2
    assert result.stderr == ""


def test_end_of_input_quits_and_session_continues(workspace: Path) -> None:
    assert invoke(["run", "-w", str(workspace), "-s", "talk", "one"]).exit_code == 0
    result = invoke(["chat", "-w", str(workspace), "--session", "talk"], input="two\n\nthree\n")
    assert result.exit_code == 0, result.output
    assert session_ids(workspace) == ["talk"]
    info = json.loads((workspace / "sessions" / "talk" / "session.json").read_text())
    assert info["runCount"] == 3


def test_slash_commands(workspace: Path) -> None:
    result = invoke(["chat", "-w", str(workspace)], input="/session\n/help\n/what\n/quit\n")
    assert result.exit_code == 0
    assert "unknown command '/what'" in result.stdout
    assert "/new starts a new session" in result.stdout
    assert session_ids(workspace) == []  # no message, no session


def test_bad_session_id_is_a_usage_error(workspace: Path) -> None:
    result = invoke(["chat", "-w", str(workspace), "-s", "no/slashes"], input="/exit\n")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: invalid session id 'no/slashes'")


async def _cancel_mid_tool(ws: Path, session: str) -> str:
    """Start a run, cancel it (what Ctrl-C does in the chat) once its tool is running; the screen."""
    agent = Agent.from_workspace(ws)
    screen = io.StringIO()
    renderer = _Signalling(LiveRenderer(Console(file=screen, width=100)))
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(stream_run(agent, "take a nap", session, renderer))
        await renderer.tool_started.wait()
        task.cancel()
    assert task.cancelled()
    [report] = await agent.reports(session)
    assert report.reason == "stopped"
    assert_paired((await FileSessionStore(ws / "sessions").load(session)).messages)
    return screen.getvalue()


def test_cancelling_a_run_mid_tool_leaves_a_stopped_report_and_paired_transcript(tmp_path: Path) -> None:
    ws = tool_workspace(tmp_path / "slow", "slow", SLOW_TOOL, "nap")
    screen = asyncio.run(_cancel_mid_tool(ws, "napping"))
    assert "→ nap {}\n  ■ nap did not finish\n" in screen
    lines = [line for line in read_jsonl(ws / "sessions" / "napping" / "transcript.jsonl") if "role" in line]
    assert [line["role"] for line in lines] == ["user", "assistant", "tool"]
    assert lines[2]["synthetic"] is True and lines[2]["is_error"] is True

    shown = invoke(["sessions", "show", "napping", "-w", str(ws), "--runs"])
    assert "tool nap · call_0 ✗ error (synthetic: cut off while running, its effect unknown)" in shown.stdout
    assert " · stopped · " in shown.stdout


@pytest.mark.skipif(
    signal.getsignal(signal.SIGINT) is not signal.default_int_handler, reason="SIGINT is handled elsewhere"
)
def test_ctrl_c_during_a_run_returns_to_the_prompt(tmp_path: Path) -> None:
    ws = tool_workspace(tmp_path / "ctrlc", "ctrlc", INTERRUPTING_TOOL, "press_ctrl_c")
    result = invoke(["chat", "-w", str(ws), "-s", "kept"], input="first\nsecond\n/exit\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "\nyou › first\n" in out and "\nstopped · " in out
    assert "done · 2 steps · 1 tool call" in out  # the chat went on, in the same session
    assert session_ids(ws) == ["kept"]
    lines = [line for line in read_jsonl(ws / "sessions" / "kept" / "transcript.jsonl") if "role" in line]
    assert [line["role"] for line in lines] == [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert lines[2].get("synthetic") is True and lines[5].get("synthetic") is None
