"""Exactly-once tool execution across crashes: the started/finished journal and calls in doubt."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from loopwright import Agent, tool
from loopwright.context.pairing import IN_DOUBT_RESULT
from loopwright.messages import ToolCall, ToolResultMessage
from loopwright.testing import ScriptedModel
from tests.helpers import assert_paired, read_jsonl

STARTED: list[str] = []
GATE: asyncio.Event | None = None


async def _block(name: str) -> str:
    STARTED.append(name)
    assert GATE is not None
    await GATE.wait()
    return f"{name} done"


@tool(timeout=60)
async def charge_card(amount: int) -> str:
    """Charge the card (not idempotent)."""
    return await _block("charge_card")


@tool(timeout=60, idempotent=True)
async def refresh_cache() -> str:
    """Refresh the cache (safe to repeat)."""
    return await _block("refresh_cache")


@tool(permission="ask")
def notify(text: str) -> str:
    """Notify someone."""
    STARTED.append("notify")
    return "notified"


@pytest.fixture(autouse=True)
def _reset() -> None:
    global GATE
    STARTED.clear()
    GATE = asyncio.Event()


def _kill_leftovers(workspace: Path, *call_ids: str) -> None:
    """What a SIGKILL leaves: no result for the calls in flight (a cancelled run writes them)."""
    path = workspace / "sessions" / "s" / "transcript.jsonl"
    lines = [
        line
        for line in path.read_text().splitlines()
        if not any(f'"tool_call_id":"{c}"' in line for c in call_ids)
    ]
    path.write_text("\n".join(lines) + "\n")


async def _run_until_started(agent: Agent, count: int) -> None:
    task = asyncio.create_task(agent.run("go", session_id="s"))
    for _ in range(500):
        if len(STARTED) >= count and (count < 2 or agent.pending_approvals()):
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_every_call_is_journaled_before_it_runs(tmp_path: Path) -> None:
    model = ScriptedModel([[ToolCall(id="c1", name="notify", arguments='{"text": "x"}')], "ok"])
    await Agent(model, tools=[notify], workspace=tmp_path, approver=lambda r: "approve").run(
        "go", session_id="s"
    )
    lines = read_jsonl(tmp_path / "sessions" / "s" / "transcript.jsonl")
    kinds = [line.get("role") or f"{line['type']}:{line.get('state', line.get('call_id'))}" for line in lines]
    assert kinds == [
        "user",
        "assistant",
        "approval:pending",
        "approval:resolved",
        "tool_start:c1",
        "tool",
        "assistant",
    ]


async def test_a_call_cut_off_mid_execution_is_in_doubt_and_not_rerun(tmp_path: Path) -> None:
    first = Agent(
        ScriptedModel([[ToolCall(id="c1", name="charge_card", arguments='{"amount": 5}')]]),
        tools=[charge_card],
        workspace=tmp_path,
    )
    await _run_until_started(first, 1)
    _kill_leftovers(tmp_path, "c1")
    model = ScriptedModel(["I will check before charging again."])
    second = Agent(model, tools=[charge_card], workspace=tmp_path)
    report = await second.run("did it work?", session_id="s")
    result = next(m for m in model.requests[0].messages if isinstance(m, ToolResultMessage))
    assert result.content == IN_DOUBT_RESULT.format(why="the run was interrupted")
    assert result.is_error and result.synthetic
    assert STARTED == ["charge_card"] and report.reason == "done"
    assert_paired(await second.transcript("s"))  # type: ignore[arg-type]


@pytest.mark.parametrize(("tool_name", "rerun"), [("refresh_cache", True), ("charge_card", False)])
async def test_on_resume_idempotent_calls_rerun_and_others_are_in_doubt(
    tmp_path: Path, tool_name: str, rerun: bool
) -> None:
    calls = [
        ToolCall(id="c1", name=tool_name, arguments='{"amount": 5}' if tool_name == "charge_card" else "{}"),
        ToolCall(id="c2", name="notify", arguments='{"text": "hi"}'),
    ]
    first = Agent(ScriptedModel([calls]), tools=[charge_card, refresh_cache, notify], workspace=tmp_path)
    snapshots: list[dict[str, object]] = []
    first.on("approval_requested", lambda e: snapshots.append(first.dump()))
    await _run_until_started(first, 2)
    _kill_leftovers(tmp_path, "c1", "c2")
    assert GATE is not None
    GATE.set()
    STARTED.clear()
    model = ScriptedModel(["finished"])
    second = Agent.restore(
        snapshots[0], model=model, tools=[charge_card, refresh_cache, notify], workspace=tmp_path
    )
    report = await second.resume_with_approval("c2", "approve")
    results = {m.tool_call_id: m for m in model.requests[0].messages if isinstance(m, ToolResultMessage)}
    assert results["c2"].content == "notified"
    if rerun:
        assert [tool_name, "notify"] == STARTED and results["c1"].content == f"{tool_name} done"
    else:
        assert STARTED == ["notify"] and results["c1"].content.startswith("in doubt:")
    assert report.reason == "done"
    assert_paired(await second.transcript("s"))  # type: ignore[arg-type]
