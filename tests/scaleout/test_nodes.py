"""Several ScaleOut nodes on one database (in one process here; tests/scaleout/test_cluster.py
uses separate processes): a message accepted by one node runs on another, any node waits for it and
streams its events gap-free, queue modes and depth hold across nodes, and dead gateways' runs are
requeued or reported failed by the sweeper."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest

from loopwright import Agent
from loopwright.errors import InputError, NotFoundError
from loopwright.messages import UserMessage
from loopwright.scaleout import QueueRefused, ScaleOut, is_end
from loopwright.scaleout._pg import create_pool
from loopwright.sessions import SessionInfo
from loopwright.sql import Database
from loopwright.testing import FunctionModel
from tests.scaleout.support import eventually, pg_agent


class Gate:
    """A model that answers only when released, so a run stays running as long as a test needs."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.calls = 0

    async def __call__(self, messages: list[Any], info: Any) -> str:
        self.calls += 1
        self.entered.set()
        await self.release.wait()
        return f"answer {self.calls}"


@asynccontextmanager
async def nodes(db: Database, *agents: Agent | None, **options: Any) -> AsyncIterator[list[ScaleOut]]:
    """One node per agent (None: a node that only accepts and streams, with a default agent's settings)."""
    async with AsyncExitStack() as stack:
        started = []
        for agent in agents:
            if agent is None:
                node = ScaleOut(db, [pg_agent(db)], work=False, lease=2.0, poll=0.5, **options)
            else:
                node = ScaleOut(db, [agent], lease=2.0, poll=0.5, **options)
            started.append(await stack.enter_async_context(node))
        yield started


async def _events(node: ScaleOut, run_id: str, after: int = 0) -> list[dict[str, Any]]:
    async with asyncio.timeout(30):
        return [e async for e in node.follow_run(run_id, after)]


def _check_stream(events: list[dict[str, Any]], first_seq: int = 1) -> None:
    assert [e["seq"] for e in events] == list(range(first_seq, first_seq + len(events)))
    assert is_end(events[-1]) and not any(is_end(e) for e in events[:-1])


async def test_accepted_on_one_node_runs_on_another_and_streams_everywhere(db: Database) -> None:
    async with nodes(db, None, pg_agent(db)) as (front, back):
        accepted = await front.submit("hello there", session_id="s1")
        assert accepted.session_id == "s1" and not accepted.repeated
        result = await front.wait(accepted.run_id, timeout=30)
        assert result["status"] == "ok" and result["reason"] == "done"
        assert result["text"] and result["startedAt"] and result["endedAt"]
        events = await _events(front, accepted.run_id)
        _check_stream(events)
        assert events[0]["data"]["phase"] == "start" and events[0]["data"]["gateway"] == back.gateway_id
        assert events[-1]["data"]["text"] == result["text"]
        assert "".join(e["data"]["delta"] for e in events if e["stream"] == "assistant") == result["text"]
        resumed = await _events(back, accepted.run_id, after=2)  # reconnect elsewhere, from seq 2
        assert resumed == events[2:]
        transcript = await back.agents["agent"].transcript("s1")
        users = [m for m in transcript if getattr(m, "role", "") == "user"]
        assert [u.content for u in users] == ["hello there"]
        assert users[0].meta["request_id"] == accepted.run_id


async def test_a_live_stream_sees_every_event_of_a_run_on_another_node(db: Database) -> None:
    gate = Gate()
    async with nodes(db, None, pg_agent(db, FunctionModel(gate))) as (front, _back):
        accepted = await front.submit("wait for it", session_id="live")
        follower = asyncio.ensure_future(_events(front, accepted.run_id))
        await gate.entered.wait()
        assert (await front.wait(accepted.run_id, timeout=0))["status"] == "timeout"
        gate.release.set()
        events = await follower
        _check_stream(events)
        assert events[-1]["data"]["text"] == "answer 1"


async def test_bad_input_is_refused_before_anything_is_queued(db: Database) -> None:
    async with nodes(db, None) as (front,):
        with pytest.raises(InputError, match="unknown queue mode 'sideways'"):
            await front.submit("x", mode="sideways")
        with pytest.raises(InputError, match="invalid session id"):
            await front.submit("x", session_id="../etc")
        with pytest.raises(NotFoundError):
            await front.submit("x", agent="nobody")
        with pytest.raises(NotFoundError):
            await front.wait("no-such-run", timeout=0)
        assert await front.queue.counts() == {}


async def test_idempotency_key_returns_the_first_run_on_any_node(db: Database) -> None:
    async with nodes(db, None, None) as (a, b):
        first = await a.submit("pay once", session_id="k", idempotency_key="key-1")
        again = await b.submit("pay once", session_id="k", idempotency_key="key-1")
        assert again.repeated and again.run_id == first.run_id
        other = await b.submit("pay twice", session_id="k", idempotency_key="key-2")
        assert other.run_id != first.run_id
        assert (await a.queue.counts()) == {"queued": 2}


async def test_drop_and_depth_are_judged_across_nodes(db: Database) -> None:
    gate = Gate()
    worker = pg_agent(db, FunctionModel(gate), max_queue_depth=1)
    async with nodes(db, None, worker) as (front, back):
        front.agents["agent"] = pg_agent(db, max_queue_depth=1)
        running = await front.submit("one", session_id="s")
        await gate.entered.wait()
        with pytest.raises(QueueRefused, match="queue mode is 'drop'") as dropped:
            await back.submit("two", session_id="s", mode="drop")
        assert dropped.value.kind == "drop"
        waiting = await back.submit("two", session_id="s")
        with pytest.raises(QueueRefused, match=r"1 message\(s\) already wait, the queue depth \(1\)") as full:
            await front.submit("three", session_id="s")
        assert full.value.kind == "depth" and full.value.retry_after == 1.0
        followup = await front.submit("three", session_id="s", mode="followup")  # no depth limit
        gate.release.set()
        results = [await front.wait(r.run_id, timeout=30) for r in (running, waiting, followup)]
        assert [r["status"] for r in results] == ["ok", "ok", "ok"]
        assert [r["text"] for r in results] == ["answer 1", "answer 2", "answer 3"]  # in order, one at a time


async def test_interrupt_stops_the_run_on_the_other_node(db: Database) -> None:
    calls = 0
    stopped = asyncio.Event()

    async def model(messages: list[Any], info: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            await stopped.wait()
        return f"reply {calls}"

    worker = pg_agent(db, FunctionModel(model))
    async with nodes(db, None, worker) as (front, back):
        first = await front.submit("long job", session_id="s")
        await eventually(lambda: calls == 1)
        second = await front.submit("never mind", session_id="s", mode="interrupt")
        await eventually(lambda: back.worker is not None and _stop_asked(back))
        stopped.set()
        one = await front.wait(first.run_id, timeout=30)
        two = await front.wait(second.run_id, timeout=30)
        assert one["reason"] == "stopped"
        assert two["status"] == "ok" and two["text"] == "reply 2"


def _stop_asked(node: ScaleOut) -> bool:
    assert node.worker is not None
    return any(e.stop_asked and e.interrupt for e in node.worker.running.values())


async def test_a_queued_run_past_its_queue_timeout_fails_busy(db: Database) -> None:
    gate = Gate()
    worker = pg_agent(db, FunctionModel(gate))
    async with nodes(db, None, worker) as (front, _back):
        front.agents["agent"] = pg_agent(db, queue_timeout=0.2)
        first = await front.submit("one", session_id="s")
        await gate.entered.wait()
        late = await front.submit("two", session_id="s")
        result = await front.wait(late.run_id, timeout=30)
        assert result["status"] == "error" and result["reason"] == "busy"
        assert result["error"]["code"] == "busy" and result["error"]["retryAfterMs"] == 1000
        events = await _events(front, late.run_id)
        _check_stream(events)
        assert [e["data"]["phase"] for e in events] == ["start", "error"]
        gate.release.set()
        assert (await front.wait(first.run_id, timeout=30))["status"] == "ok"
        assert gate.calls == 1  # the timed-out message never ran


async def _claim_as_dead_gateway(db: Database, node: ScaleOut, run_id: str) -> None:
    """Do what a gateway does when it claims a run, then 'die': the run stays running, unrenewed."""
    claimed = await node.queue.claim(["agent"], "dead-gateway", lease=0.5)
    assert [c.run_id for c in claimed] == [run_id]
    assert await node.events.write(
        run_id,
        "dead-gateway",
        "agent",
        claimed[0].session_id,
        [{"runId": run_id, "seq": 1, "stream": "lifecycle", "ts": 0, "data": {"phase": "start"}}],
    )


async def test_a_dead_gateways_unrecorded_run_is_queued_again_and_runs_once(db: Database) -> None:
    async with nodes(db, None) as (front,):
        accepted = await front.submit("survive me", session_id="s")
        await _claim_as_dead_gateway(db, front, accepted.run_id)
        async with nodes(db, pg_agent(db)) as (rescuer,):
            result = await rescuer.wait(accepted.run_id, timeout=30)
            assert result["status"] == "ok"
            assert front.sweeper.requeued + rescuer.sweeper.requeued == 1
            events = await _events(front, accepted.run_id)
            _check_stream(events)
            starts = [e for e in events if e["data"].get("phase") == "start"]
            assert [s["data"].get("gateway") for s in starts] == [None, rescuer.gateway_id]
            transcript = await rescuer.agents["agent"].transcript("s")
            assert [m.content for m in transcript if getattr(m, "role", "") == "user"] == ["survive me"]
        # the dead gateway's late writes are refused: the run is no longer its
        assert not await front.events.write(
            accepted.run_id,
            "dead-gateway",
            "agent",
            "s",
            [{"runId": accepted.run_id, "seq": 99, "stream": "assistant", "ts": 0, "data": {}}],
        )


async def test_a_dead_gateways_recorded_run_is_reported_failed_never_run_twice(db: Database) -> None:
    agent = pg_agent(db)
    async with nodes(db, None) as (front,):
        accepted = await front.submit("started already", session_id="s")
        await _claim_as_dead_gateway(db, front, accepted.run_id)
        # The dead gateway got as far as recording the message (what the loop does first).
        await agent.store.create(SessionInfo(id="s"))
        await agent.store.append(
            "s", [UserMessage(content="started already", meta={"request_id": accepted.run_id})]
        )
        calls = 0

        def count(messages: list[Any], info: Any) -> str:
            nonlocal calls
            calls += 1
            return "ran"

        async with nodes(db, pg_agent(db, FunctionModel(count))) as (rescuer,):
            result = await rescuer.wait(accepted.run_id, timeout=30)
            assert result["status"] == "error" and result["reason"] == "interrupted"
            assert result["error"]["code"] == "interrupted"
            assert "dead-gateway" in result["error"]["message"]
            events = await _events(rescuer, accepted.run_id)
            _check_stream(events)
            assert [e["data"]["phase"] for e in events] == ["start", "error"]
            later = await rescuer.submit("next", session_id="s")
            assert (await rescuer.wait(later.run_id, timeout=30))["status"] == "ok"
        assert calls == 1  # only the later message ran


async def test_notifications_carry_small_payloads_and_rows_hold_the_events(db: Database) -> None:
    pool = await create_pool(db, max_size=1)
    try:
        async with nodes(db, pg_agent(db)) as (node,):
            seen: list[str] = []
            node.hub.on_queue.append(seen.append)
            accepted = await node.submit("x" * 5000, session_id="big")
            await node.wait(accepted.run_id, timeout=30)
            rows = await pool.fetch(
                "SELECT seq, data FROM scaleout_events WHERE run_id = $1 ORDER BY seq", accepted.run_id
            )
            assert len(rows) >= 3 and json.loads(rows[-1]["data"])["phase"] == "end"
            assert all(len(p) < 300 for p in seen)
    finally:
        await pool.close()
