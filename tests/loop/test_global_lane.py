"""The global lane: at most max_concurrent_runs runs at once, across sessions."""

from __future__ import annotations

import asyncio

import pytest

from loopwright import Agent, SessionBusyError
from loopwright.sessions import MemorySessionStore
from loopwright.testing import FunctionModel


async def test_at_most_n_runs_at_once_across_sessions() -> None:
    active = peak = 0

    async def model(messages: list[object], info: object) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return "ok"

    agent = Agent(FunctionModel(model), store=MemorySessionStore(), config={"max_concurrent_runs": 2})
    reports = await asyncio.gather(*(agent.run("go", session_id=f"s{i}") for i in range(6)))
    assert peak == 2 and all(r.reason == "done" for r in reports)


async def test_waiting_for_a_slot_respects_the_queue_timeout() -> None:
    gate = asyncio.Event()
    entered = asyncio.Event()

    async def model(messages: list[object], info: object) -> str:
        entered.set()
        await gate.wait()
        return "ok"

    store = MemorySessionStore()
    agent = Agent(FunctionModel(model), store=store, config={"max_concurrent_runs": 1, "queue_timeout": 0.02})
    first = asyncio.create_task(agent.run("one", session_id="a"))
    await entered.wait()
    with pytest.raises(SessionBusyError, match="one of 1 run slots"):
        await agent.run("two", session_id="b")
    assert await store.get("b") is None  # refused before anything was written
    gate.set()
    await first
    assert (await agent.run("three", session_id="b")).reason == "done"  # the slot was given back
