"""The Agent as a library user meets it: workspace agents, memory, tools from the workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

import loopwright
from loopwright import Agent, AgentDefinitionError, ConfigError, init_workspace
from loopwright.testing import ScriptedModel, TestModel


def test_public_api_is_exported_and_listed() -> None:
    import types

    for name in loopwright.__all__:
        assert hasattr(loopwright, name), name
    assert {"Agent", "tool", "ToolContext", "RunReport", "LoopConfig"} <= set(loopwright.__all__)
    public = {
        n
        for n, v in vars(loopwright).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    assert public - set(loopwright.__all__) == set()


async def test_workspace_agent_reads_memory_and_identity(tmp_path: Path) -> None:
    init_workspace(tmp_path, name="scribe")
    (tmp_path / "MEMORY.md").write_text("The user's favourite colour is teal.\n")
    model = ScriptedModel(["noted"])
    agent = Agent(model, workspace=tmp_path)
    await agent.run("hello")
    system = model.requests[0].system
    assert "teal" in system and "## Memory (MEMORY.md)" in system
    assert "Current date and time:" in system
    assert system.index("## Tools") < system.index("## Memory (MEMORY.md)") < system.index("Current date")
    assert "word_count" in system


async def test_missing_memory_means_empty_memory(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    (tmp_path / "MEMORY.md").unlink()
    model = ScriptedModel(["fine"])
    report = await Agent(model, workspace=tmp_path).run("hi")
    assert report.reason == "done" and "## Memory (MEMORY.md)" not in model.requests[0].system


async def test_workspace_tools_are_offered_and_run(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    (tmp_path / "tools" / "maths.py").write_text(
        "from loopwright import tool\n\n@tool\ndef triple(n: int) -> int:\n    '''Triple a number.'''\n    return 3 * n\n"
    )
    text = (tmp_path / "AGENT.md").read_text().replace("tools:\n", "tools:\n  - maths:triple\n", 1)
    (tmp_path / "AGENT.md").write_text(text)
    agent = Agent(TestModel(args={"triple": {"n": 14}}, calls_per_step=0), workspace=tmp_path)
    assert "triple" in agent.tools
    report = await agent.run("go")
    assert "triple → 42" in report.final_text


def test_invalid_agent_md_stops_before_running(tmp_path: Path) -> None:
    (tmp_path / "AGENT.md").write_text("---\nname: x\nmax_tool_iterations: lots\ntoolz: []\n---\nbody\n")
    with pytest.raises(AgentDefinitionError) as info:
        Agent(workspace=tmp_path)
    fields = {(p.field, p.line) for p in info.value.problems}
    assert fields == {("max_tool_iterations", 3), ("toolz", 4)}
    assert not (tmp_path / "sessions").exists()


def test_from_workspace_requires_agent_md(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="loopwright init"):
        Agent.from_workspace(tmp_path)


def test_duplicate_tool_names_are_refused() -> None:
    def ping() -> str:
        """Ping."""
        return "pong"

    with pytest.raises(ConfigError, match="two tools are named 'ping'"):
        Agent(TestModel(), tools=[ping, ping])


async def test_plain_functions_become_tools() -> None:
    def greet(name: str) -> str:
        """Greet someone."""
        return f"hello {name}"

    agent = Agent(TestModel(args={"greet": {"name": "ada"}}), tools=[greet])
    assert (await agent.run("hi")).final_text == "I used 1 tool(s). greet → hello ada."


async def test_relevant_dated_notes_are_recalled_into_the_prompt(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    (tmp_path / "memory").mkdir(exist_ok=True)
    (tmp_path / "memory" / "2026-01-05.md").write_text(
        "- 10:00 The staging database password rotates on Fridays.\n"
    )
    (tmp_path / "memory" / "2026-02-01.md").write_text("- 09:00 Lunch was pasta.\n")
    model = ScriptedModel(["noted", "ok"])
    agent = Agent(model, workspace=tmp_path)
    await agent.run("When does the staging database password rotate?")
    system = model.requests[0].system
    assert "## Relevant memory" in system and "rotates on Fridays" in system and "pasta" not in system
    quiet = Agent(ScriptedModel(["ok"]), workspace=tmp_path, config={"memory_results": 0})
    await quiet.run("When does the staging database password rotate?")
    assert "## Relevant memory" not in quiet.model.requests[0].system  # type: ignore[attr-defined]


async def test_abort_cuts_a_run_short_and_reports_whether_it_ran() -> None:
    import asyncio

    from loopwright import RunStarted
    from loopwright.testing import FunctionModel

    async def slow(messages: list[object], info: object) -> str:
        await asyncio.sleep(30)
        return "never"

    agent = Agent(FunctionModel(slow))
    started: list[RunStarted] = []
    agent.on("run_start", started.append)
    task = asyncio.create_task(agent.run("hi", session_id="s"))
    for _ in range(200):
        if started and agent.abort(started[0].run_id):
            break
        await asyncio.sleep(0.01)
    report = await task
    assert report.reason == "stopped"
    assert agent.abort(report.id) is False  # over
