"""Random interleavings of arrivals, modes, stops and tool failures never break the invariants:
never two runs on one session at once, no message lost or duplicated, FIFO order where the mode
promises it, every lock released."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwright import Agent, SessionBusyError, ToolCall, UserMessage, tool
from loopwright.lanes import LocalSessionLocks
from loopwright.sessions import MemorySessionStore
from loopwright.testing import AgentInfo, FunctionModel

MODES = ["queue", "followup", "drop", "interrupt", "collect", "steer"]
FIFO_MODES = {"queue", "followup", "interrupt"}


@dataclass(frozen=True)
class Arrival:
    session: int
    mode: str
    delay: int  # event-loop turns to wait before sending
    fail_tool: bool
    stop: bool


arrivals = st.lists(
    st.builds(
        Arrival,
        session=st.integers(0, 1),
        mode=st.sampled_from(MODES),
        delay=st.integers(0, 6),
        fail_tool=st.booleans(),
        stop=st.booleans(),
    ),
    min_size=1,
    max_size=8,
)


async def _scenario(plan: list[Arrival]) -> None:
    running: dict[str, int] = {}
    peak: dict[str, int] = {}

    @tool
    async def work(fail: bool) -> str:
        """Some work."""
        await asyncio.sleep(0)
        if fail:
            raise RuntimeError("tool failure")
        return "worked"

    async def model(messages: list[object], info: AgentInfo) -> str | list[ToolCall]:
        session = info.request.session_id or ""
        running[session] = running.get(session, 0) + 1
        peak[session] = max(peak.get(session, 0), running[session])
        try:
            await asyncio.sleep(0)
            last = messages[-1]
            if isinstance(last, UserMessage) and info.tools:
                return [
                    ToolCall(
                        id=f"t{len(messages)}",
                        name="work",
                        arguments=f'{{"fail": {str("fail" in last.content).lower()}}}',
                    )
                ]
            return "answer"
        finally:
            running[session] -= 1

    locks = LocalSessionLocks()
    agent = Agent(
        FunctionModel(model),
        tools=[work],
        store=MemorySessionStore(),
        locks=locks,
        config={"collect_debounce": 0.001, "queue_timeout": 5},
    )
    refused: set[str] = set()
    order: dict[str, list[str]] = {}

    async def send(i: int, a: Arrival) -> None:
        for _ in range(a.delay):
            await asyncio.sleep(0)
        text = f"m{i}" + (" fail" if a.fail_tool else "")
        session = f"s{a.session}"
        if a.mode in FIFO_MODES:
            order.setdefault(session, []).append(text)
        if a.stop:
            agent.stop(session_id=session)
        try:
            await agent.run(text, session_id=session, mode=a.mode)  # type: ignore[arg-type]
        except SessionBusyError:
            refused.add(text)

    async with asyncio.timeout(20):
        await asyncio.gather(*(send(i, a) for i, a in enumerate(plan)))

    assert all(p <= 1 for p in peak.values()), peak  # never two runs on one session at once
    for s in (0, 1):
        session = f"s{s}"
        assert locks.holder(session) is None  # every lock released
        if await agent.store.get(session) is None:
            continue
        users = [e.content for e in await agent.transcript(session) if isinstance(e, UserMessage)]
        delivered = "\n".join(users)
        sent = [f"m{i}" + (" fail" if a.fail_tool else "") for i, a in enumerate(plan) if a.session == s]
        for text in sent:
            if text in refused:
                assert text not in users  # refused messages are never written
            else:
                # delivered exactly once: as its own turn, steered in, or inside a collected batch
                assert (
                    sum(u == text or f". {text}" in u.split("\n") for u in users)
                    + sum(line.endswith(f". {text}") for u in users for line in u.split("\n")[1:])
                    >= 1
                ), (text, delivered)
                assert users.count(text) <= 1
        fifo = [u for u in users if u in order.get(session, [])]
        expected = [t for t in order.get(session, []) if t in fifo]
        assert fifo == expected  # arrival order for queue, followup and interrupt


@settings(max_examples=100)
@given(arrivals)
def test_random_interleavings_keep_the_invariants(plan: list[Arrival]) -> None:
    asyncio.run(_scenario(plan))
