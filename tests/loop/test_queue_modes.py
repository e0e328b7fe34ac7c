"""Queue modes: what a message does when its session is already running."""

from __future__ import annotations

import asyncio

import pytest
from tests.helpers import assert_paired

from loopwright import Agent, SessionBusyError, ToolCall, UserMessage, tool
from loopwright.context.pairing import IN_DOUBT_RESULT
from loopwright.messages import ToolResultMessage
from loopwright.sessions import MemorySessionStore
from loopwright.testing import AgentInfo, FunctionModel


class Gate:
    """A tool that waits until the test opens it, and says when it started."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.open = asyncio.Event()

        @tool
        async def wait_here() -> str:
            """Wait for the gate."""
            self.started.set()
            await self.open.wait()
            return "gate passed"

        self.tool = wait_here


def scripted(seen: list[list[str]]) -> FunctionModel:
    """Calls wait_here on the first step of a turn whose message says 'wait', answers otherwise,
    and records the user messages of every request."""

    def model(messages: list[object], info: AgentInfo) -> str | list[ToolCall]:
        users = [m.content for m in messages if isinstance(m, UserMessage)]
        seen.append(users)
        last = messages[-1]
        if isinstance(last, UserMessage) and "wait" in last.content:
            return [ToolCall(id=f"w{len(messages)}", name="wait_here")]
        return f"answer to: {users[-1]}"

    return FunctionModel(model)


async def _start_waiting(agent: Agent, gate: Gate) -> asyncio.Task[object]:
    task = asyncio.create_task(agent.run("please wait", session_id="s"))
    await gate.started.wait()
    return task


async def test_drop_refuses_at_once_and_writes_nothing() -> None:
    gate, seen = Gate(), []
    agent = Agent(scripted(seen), tools=[gate.tool], store=MemorySessionStore())
    first = await _start_waiting(agent, gate)
    with pytest.raises(SessionBusyError):
        await agent.run("hello?", session_id="s", mode="drop")
    gate.open.set()
    await first
    users = [e.content for e in await agent.transcript("s") if isinstance(e, UserMessage)]
    assert users == ["please wait"]


async def test_interrupt_stops_the_running_run_and_keeps_what_it_did() -> None:
    gate, seen = Gate(), []
    agent = Agent(scripted(seen), tools=[gate.tool], store=MemorySessionStore())
    first = await _start_waiting(agent, gate)
    second = await agent.run("never mind, do this", session_id="s", mode="interrupt")
    stopped = await first
    assert stopped.reason == "stopped"  # type: ignore[attr-defined]
    assert second.reason == "done" and second.final_text == "answer to: never mind, do this"
    entries = await agent.transcript("s")
    assert_paired([e for e in entries if not hasattr(e, "data")])  # type: ignore[misc]
    [result] = [e for e in entries if isinstance(e, ToolResultMessage)]
    assert result.synthetic and result.content == IN_DOUBT_RESULT.format(
        why="run stopped"
    )  # cut off mid-call


async def test_followup_waits_past_the_queue_timeout() -> None:
    gate, seen = Gate(), []
    agent = Agent(
        scripted(seen), tools=[gate.tool], store=MemorySessionStore(), config={"queue_timeout": 0.01}
    )
    first = await _start_waiting(agent, gate)
    later = asyncio.create_task(agent.run("after that", session_id="s", mode="followup"))
    with pytest.raises(SessionBusyError):  # plain queueing gives up after queue_timeout
        await agent.run("impatient", session_id="s")
    gate.open.set()
    await first
    report = await later
    assert report.final_text == "answer to: after that"


async def test_steer_joins_the_running_run_before_its_next_model_call() -> None:
    gate, seen = Gate(), []
    agent = Agent(scripted(seen), tools=[gate.tool], store=MemorySessionStore())
    first = await _start_waiting(agent, gate)
    steering = asyncio.create_task(agent.run("also mention cats", session_id="s", mode="steer"))
    await asyncio.sleep(0)  # the steer message is handed to the running run
    gate.open.set()
    report = await first
    assert await steering is report  # the sender gets the run it joined
    assert seen[-1] == ["please wait", "also mention cats"]
    assert report.final_text == "answer to: also mention cats"  # type: ignore[attr-defined]
    steered = [
        e for e in await agent.transcript("s") if isinstance(e, UserMessage) and (e.meta or {}).get("steer")
    ]
    assert [e.content for e in steered] == ["also mention cats"]


async def test_steer_skips_tool_calls_not_yet_started() -> None:
    gate, ran = Gate(), []

    @tool
    def second() -> str:
        """The second call."""
        ran.append("second")
        return "ran"

    def model(messages: list[object], info: AgentInfo) -> str | list[ToolCall]:
        if len(messages) == 1:
            return [ToolCall(id="a", name="wait_here"), ToolCall(id="b", name="second")]
        return "done"

    agent = Agent(
        FunctionModel(model),
        tools=[gate.tool, second],
        store=MemorySessionStore(),
        config={"parallel_tool_calls": False},
    )
    first = asyncio.create_task(agent.run("go", session_id="s"))
    await gate.started.wait()
    steering = asyncio.create_task(agent.run("stop that", session_id="s", mode="steer"))
    await asyncio.sleep(0)
    gate.open.set()
    report = await first
    await steering
    assert ran == []  # the running call finished; the one not started was skipped
    calls = report.steps[0].tool_calls
    assert (calls[0].error, calls[1].skipped, calls[1].error) == (
        None,
        True,
        "skipped: a new user message arrived",
    )


async def test_steer_to_a_run_that_already_ended_runs_next() -> None:
    seen: list[list[str]] = []
    agent = Agent(scripted(seen), store=MemorySessionStore())
    report = await agent.run("hello", session_id="s", mode="steer")  # idle session: runs at once
    assert report.final_text == "answer to: hello"


async def test_collect_delivers_one_turn_for_everything_sent_while_busy() -> None:
    gate, seen = Gate(), []
    agent = Agent(
        scripted(seen), tools=[gate.tool], store=MemorySessionStore(), config={"collect_debounce": 0.02}
    )
    first = await _start_waiting(agent, gate)
    collected = [
        asyncio.create_task(agent.run(text, session_id="s", mode="collect"))
        for text in ("one", "two", "three")
    ]
    await asyncio.sleep(0)
    gate.open.set()
    await first
    reports = await asyncio.gather(*collected)
    assert reports[0] is reports[1] is reports[2]
    users = [e for e in await agent.transcript("s") if isinstance(e, UserMessage)]
    assert len(users) == 2
    assert users[1].content == "[3 messages sent while you were busy]\n1. one\n2. two\n3. three"
    assert users[1].meta == {"queued": True, "collected": 3}


async def test_modes_come_from_the_configuration() -> None:
    gate, seen = Gate(), []
    agent = Agent(
        scripted(seen), tools=[gate.tool], store=MemorySessionStore(), config={"queue_mode": "drop"}
    )
    first = await _start_waiting(agent, gate)
    with pytest.raises(SessionBusyError):
        await agent.run("x", session_id="s")
    gate.open.set()
    await first


async def test_an_unknown_mode_is_refused_before_anything_happens() -> None:
    from loopwright import InputError

    store = MemorySessionStore()
    agent = Agent(scripted([]), store=store)
    with pytest.raises(InputError, match="unknown queue mode 'shove'; use one of: queue, drop"):
        await agent.run("hi", session_id="s", mode="shove")  # type: ignore[arg-type]
    assert await store.get("s") is None
