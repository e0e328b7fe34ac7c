"""Every hook fires from every entry point: the library, the CLI (and the gateway, in
tests/gateway). Plugins register hooks, tools and prompt layers through entry points."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwright import Agent, ConfigError, StopRun, tool
from loopwright.hooks import HOOKS, HookBus
from loopwright.messages import ToolCall, ToolResultMessage
from loopwright.testing import ScriptedModel
from tests.cli.helpers import invoke

#: what the library and the CLI can fire (gateway_start/stop belong to the gateway)
LOOP_HOOKS = [h for h in HOOKS if not h.startswith("gateway_")]

PLUGIN = '''
import os
from pathlib import Path
from loopwright import tool
from loopwright.context.registry import ContextLayer
from loopwright.hooks import HOOKS

@tool(inline=True)
def plugin_echo(text: str) -> str:
    """Echo text (from a plugin)."""
    return "echo:" + text

def _record(name):
    def handler(event):
        with Path(os.environ["HOOK_LOG"]).open("a") as out:
            out.write(name + "\\n")
    return handler

class Recorder:
    def setup(self, api):
        for name in HOOKS:
            api.on(name, _record(name))
        api.add_tool(plugin_echo)
        api.add_layer(ContextLayer(name="plugin-note", content="Plugin note: be brief.", priority=40))
'''


@pytest.fixture
def plugin_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A real installed distribution (dist-info with an entry point) on sys.path."""
    site = tmp_path / "site"
    (site / "recorder_plugin").mkdir(parents=True)
    (site / "recorder_plugin" / "__init__.py").write_text(PLUGIN)
    dist = site / "recorder_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: recorder-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[loopwright.plugins]\nrecorder = recorder_plugin:Recorder\n")
    monkeypatch.syspath_prepend(str(site))
    log = tmp_path / "hooks.log"
    monkeypatch.setenv("HOOK_LOG", str(log))
    yield log
    sys.modules.pop("recorder_plugin", None)


def _missing(log: Path) -> list[str]:
    """Hooks that never fired."""
    return sorted(set(LOOP_HOOKS) - set(log.read_text().split()))


def _workspace(root: Path) -> Path:
    root.mkdir()
    (root / "AGENT.md").write_text(
        "---\nname: hooked\nmodel: test\nplugins: [recorder]\ncontextWindow: 2000\nreserveFloor: 200\n---\n"
        "You help.\n"
    )
    return root


def test_each_hook_fires_from_the_cli(tmp_path: Path, plugin_installed: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    result = invoke(["run", "say hello", "-w", str(ws), "-s", "s1"])
    assert result.exit_code == 0, result.output
    assert "echo:" in result.stdout  # the plugin's tool was offered and called by TestModel
    for i in range(6):  # fill the session so that it can be compacted
        invoke(["run", f"message {i} " + "words " * 60, "-w", str(ws), "-s", "s1"])
    compacted = invoke(["sessions", "compact", "s1", "-w", str(ws)])
    assert compacted.exit_code == 0, compacted.output
    chat = invoke(["chat", "-w", str(ws), "-s", "s2"], input="hi\n/new\n/exit\n")
    assert chat.exit_code == 0, chat.output
    assert _missing(plugin_installed) == []


async def test_each_hook_fires_from_the_library(tmp_path: Path, plugin_installed: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    agent = Agent(workspace=ws)
    assert "plugin_echo" in agent.tools and agent.context.get("plugin-note") is not None
    for i in range(6):
        await agent.run(f"message {i} " + "words " * 60, session_id="s")
    await agent.compact("s")
    await agent.end_session("s")
    assert _missing(plugin_installed) == []


def test_an_unknown_plugin_or_hook_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="unknown plugin 'nope'"):
        Agent(plugins=["nope"])
    with pytest.raises(ValueError, match="unknown hook 'before_everything'"):
        HookBus().on("before_everything", print)


async def test_before_tool_call_can_rewrite_skip_and_after_can_override() -> None:
    ran: list[str] = []

    @tool
    def greet(name: str) -> str:
        """Greet someone."""
        ran.append(name)
        return f"hello {name}"

    model = ScriptedModel(
        [
            [ToolCall(id="c1", name="greet", arguments='{"name": "bob"}')],
            [ToolCall(id="c2", name="greet", arguments='{"name": "eve"}')],
            [ToolCall(id="c3", name="greet", arguments='{"name": "ann"}')],
            "ok",
        ]
    )
    agent = Agent(model, tools=[greet])

    def before(event: object) -> None:
        if event.arguments == {"name": "bob"}:  # type: ignore[attr-defined]
            event.arguments = {"name": "robert"}  # type: ignore[attr-defined]
        if event.arguments == {"name": "eve"}:  # type: ignore[attr-defined]
            event.skip, event.result = True, "eve is not here"  # type: ignore[attr-defined]

    async def after(event: object) -> None:
        if event.result == "hello ann":  # type: ignore[attr-defined]
            event.result = "HELLO ANN"  # type: ignore[attr-defined]

    agent.hooks.on("before_tool_call", before)
    agent.hooks.on("after_tool_call", after)
    agent.hooks.on("tool_result_persist", lambda e: setattr(e, "content", e.content + " [audited]"))
    await agent.run("go")
    results = [m.content for m in model.requests[3].messages if isinstance(m, ToolResultMessage)]
    assert results == ["hello robert [audited]", "eve is not here [audited]", "HELLO ANN [audited]"]
    assert ran == ["robert", "ann"]


async def test_stop_run_from_a_hook_ends_the_run_before_the_model_is_called() -> None:
    model = ScriptedModel(["never"])
    agent = Agent(model)

    def budget(event: object) -> None:
        raise StopRun("Your monthly budget is used up.")

    agent.hooks.on("before_model_call", budget)
    report = await agent.run("hi", session_id="s")
    assert (report.reason, report.final_text) == ("limit", "Your monthly budget is used up.")
    assert model.requests == []
    assert [type(m).__name__ for m in await agent.transcript("s")] == ["UserMessage"]


async def test_a_failing_hook_is_logged_and_the_run_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel(["fine"])
    agent = Agent(model)
    agent.hooks.on("before_agent_start", lambda e: 1 / 0)
    agent.hooks.on("before_agent_start", lambda e: e.context.append("Extra context from a hook."))
    seen: list[int] = []
    agent.hooks.on("before_model_call", lambda e: seen.append(e.estimated_input_tokens))
    with caplog.at_level(logging.ERROR, logger="loopwright.hooks"):
        report = await agent.run("hi")
    assert report.final_text == "fine" and len(seen) == 1 and seen[0] > 0
    assert "ZeroDivisionError" in caplog.text
    assert "Extra context from a hook." in model.requests[0].system


async def test_message_sending_can_change_the_reply() -> None:
    agent = Agent(ScriptedModel(["secret: 42"]))
    agent.hooks.on("message_sending", lambda e: setattr(e, "text", e.text.replace("42", "[redacted]")))
    report = await agent.run("hi")
    assert report.final_text == "secret: [redacted]"


async def test_stop_run_after_a_tool_ran_cannot_lose_its_result(caplog: pytest.LogCaptureFixture) -> None:
    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Write a note."""
        ran.append(text)
        return "noted"

    model = ScriptedModel([[ToolCall(id="c1", name="note", arguments='{"text": "x"}')], "ok"])
    agent = Agent(model, tools=[note])

    def late(event: object) -> None:
        raise StopRun("too late")

    agent.hooks.on("after_tool_call", late)
    with caplog.at_level(logging.ERROR, logger="loopwright.hooks"):
        report = await agent.run("go")
    assert ran == ["x"] and report.reason == "done"
    assert model.requests[1].messages[-1].content == "noted"  # the result that ran is kept
    assert "cannot stop a run" in caplog.text
