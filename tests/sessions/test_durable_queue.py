"""The durable queue: acknowledged means on disk; a restart runs or reports what was left."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from loopwright import Agent, Caller, ConfigError, EmptyMessageError, RunStarted, UserMessage, tool
from loopwright.messages import ToolCall
from loopwright.sessions.queue import FileQueue, QueuedRequest
from loopwright.testing import FunctionModel, ScriptedModel, TestModel


async def test_submit_is_on_disk_before_it_returns_and_runs_in_the_background(tmp_path: Path) -> None:
    gate = asyncio.Event()

    async def model(messages: list[object], info: object) -> str:
        await gate.wait()
        return "done later"

    async with Agent(FunctionModel(model), workspace=tmp_path) as agent:
        ticket = await agent.submit("do it", session_id="s")
        queued = list((tmp_path / "sessions/s/queue").glob("*.json"))
        assert len(queued) == 1 and json.loads(queued[0].read_text())["message"] == "do it"
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await agent.wait(ticket)  # the wait times out; the run goes on
        gate.set()
        report = await agent.wait(ticket)
    assert report.final_text == "done later"
    assert list((tmp_path / "sessions/s/queue").glob("*.json")) == []  # closed once the run ended


async def test_submit_refuses_bad_input_before_queueing(tmp_path: Path) -> None:
    async with Agent(TestModel(), workspace=tmp_path) as agent:
        with pytest.raises(EmptyMessageError):
            await agent.submit("  ", session_id="s")
    assert not (tmp_path / "sessions").exists()
    with pytest.raises(ConfigError, match="async with"):
        await Agent(TestModel()).submit("hi")


async def test_a_request_accepted_but_never_started_runs_after_a_restart(tmp_path: Path) -> None:
    queue = FileQueue(tmp_path / "sessions")
    await queue.put(
        QueuedRequest(session_id="s", message="left behind", meta={"request_id": "r1"}, request_id="r1")
    )
    async with Agent(ScriptedModel(["picked up"]), workspace=tmp_path):
        pass  # entering recovers: the request runs; leaving waits for the worker to finish it
    entries = await Agent(TestModel(), workspace=tmp_path).transcript("s")
    users = [e for e in entries if isinstance(e, UserMessage)]
    assert [u.content for u in users] == ["left behind"]
    assert entries[-1].content == "picked up"  # type: ignore[union-attr]
    assert await queue.pending() == []


async def test_a_started_request_is_reported_not_run_twice(tmp_path: Path) -> None:
    async with Agent(ScriptedModel(["first answer"]), workspace=tmp_path) as agent:
        await agent.wait(await agent.submit("once only", session_id="s"))
    # simulate a crash after the message was written: the queue file is still there
    queue = FileQueue(tmp_path / "sessions")
    user = next(
        e for e in await Agent(TestModel(), workspace=tmp_path).transcript("s") if isinstance(e, UserMessage)
    )
    request_id = (user.meta or {})["request_id"]
    await queue.put(QueuedRequest(session_id="s", message="once only", request_id=request_id, attempts=1))
    model = ScriptedModel([])
    async with Agent(model, workspace=tmp_path) as agent:
        recovery = await agent.recover()
    assert recovery.reported == [] and model.requests == []  # __aenter__ already reported it
    users = [
        e for e in await Agent(TestModel(), workspace=tmp_path).transcript("s") if isinstance(e, UserMessage)
    ]
    assert len(users) == 1 and await queue.pending() == []


async def test_a_request_that_keeps_failing_to_start_is_set_aside(tmp_path: Path) -> None:
    queue = FileQueue(tmp_path / "sessions")
    await queue.put(QueuedRequest(session_id="s", message="poison", attempts=3))
    async with Agent(ScriptedModel([]), workspace=tmp_path):
        pass
    [failed] = await queue.failed()
    assert failed.message == "poison" and failed.failure == "started 3 times and never recorded; set aside"
    assert await queue.pending() == []


async def test_a_request_cancelled_before_it_started_stays_queued(tmp_path: Path) -> None:
    gate = asyncio.Event()

    async def model(messages: list[object], info: object) -> str:
        await gate.wait()
        return "first"

    agent = Agent(FunctionModel(model), workspace=tmp_path)
    worker = asyncio.create_task(_submit_two_then_wait(agent))
    for _ in range(500):
        if len(list((tmp_path / "sessions/s/queue").glob("*.json"))) == 2:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # the first is running (waiting on the model), the second waits for the lock
    worker.cancel()  # shutdown
    with pytest.raises(asyncio.CancelledError):
        await worker
    pending = await FileQueue(tmp_path / "sessions").pending()
    # the first reached its transcript (it is over: repaired, reported); the second never started
    assert [r.message for r in pending] == ["second"] and pending[0].attempts == 0


@tool(level="guest")
def whoami(caller: Caller) -> str:
    """Who asks."""
    return str(caller.user_id)


async def _submit_two_then_wait(agent: Agent) -> None:
    async with agent:
        await agent.submit("first", session_id="s")
        await agent.submit("second", session_id="s")
        await asyncio.Event().wait()


async def test_submit_carries_the_caller_and_the_start_event_names_the_request(tmp_path: Path) -> None:
    model = ScriptedModel([[ToolCall(id="c1", name="whoami", arguments="{}")], "ok"])
    starts: list[RunStarted] = []
    async with Agent(model, tools=[whoami], workspace=tmp_path) as agent:
        agent.on("run_start", starts.append)
        ticket = await agent.submit("hi", session_id="s", caller=Caller(user_id="u9", level="guest"))
        await agent.wait(ticket)
    assert model.requests[1].messages[-1].content == "u9"
    assert [s.request_id for s in starts] == [ticket.request_id]
    assert starts[0].payload()["requestId"] == ticket.request_id
