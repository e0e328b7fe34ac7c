"""Session-wide event streams across gateways: a session subscription on one gateway delivers the
runs of that session accepted anywhere and executed on another gateway, complete and in order,
including runs that start after it began, and resumes on any gateway with no gap or duplicate."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

from loopwright.gateway import Gateway, GatewayConfig, create_app
from loopwright.gateway._http import open_subscription
from loopwright.gateway._runs import Subscription
from loopwright.scaleout import ScaleOut, is_end
from loopwright.sql import Database
from loopwright.testing import FunctionModel
from tests.scaleout.support import eventually, pg_agent
from tests.scaleout.test_nodes import Gate

Event = dict[str, Any]


@dataclass
class Member:
    """One gateway of the cluster: its node, the gateway and an HTTP client on its RPC."""

    node: ScaleOut
    gateway: Gateway
    client: httpx.AsyncClient

    async def rpc(self, method: str, **params: Any) -> dict[str, Any]:
        response = await self.client.post(f"/api/{method}", json=params)
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result

    async def subscribe(self, session_id: str, **resume: Any) -> Subscription:
        """What ``GET /api/events?sessionId=`` and the WebSocket ``subscribe`` open."""
        return await open_subscription(
            self.gateway, run_id=None, session_id=session_id, agent="agent", **resume
        )


@asynccontextmanager
async def member(
    stack: AsyncExitStack, db: Database, model: Any, *, work: bool, name: str
) -> AsyncIterator[Member]:
    agent = pg_agent(db, model)
    node = ScaleOut(db, [agent], work=work, lease=2.0, poll=0.5, gateway_id=name)
    gateway = Gateway({agent.name: agent}, config=GatewayConfig(grace=5), scaleout=node)
    transport = httpx.ASGITransport(app=create_app(gateway))
    await stack.enter_async_context(gateway.running())
    client = await stack.enter_async_context(
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=30)
    )
    yield Member(node, gateway, client)


@asynccontextmanager
async def cluster(db: Database, gate: Gate) -> AsyncIterator[tuple[Member, Member, Member]]:
    """``a`` and ``c`` accept and stream only; ``b`` executes every run (its model is ``gate``)."""
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(member(stack, db, "test", work=False, name="a"))
        b = await stack.enter_async_context(member(stack, db, FunctionModel(gate), work=True, name="b"))
        c = await stack.enter_async_context(member(stack, db, "test", work=False, name="c"))
        yield a, b, c


async def collect(sub: Subscription, until_ended: set[str]) -> list[Event]:
    """Events of ``sub`` until every run in ``until_ended`` has sent its last event."""
    events: list[Event] = []
    left = set(until_ended)
    async with asyncio.timeout(30):
        while left:
            event = await sub.next()
            assert event is not None, sub.closed_reason
            events.append(event)
            if is_end(event):
                left.discard(event["runId"])
    return events


async def truth(node: ScaleOut, run_id: str) -> list[Event]:
    """The run's event rows: what every gateway must deliver."""
    events = await node.events.read_run(run_id)
    assert events and is_end(events[-1])
    return events


async def test_a_session_stream_sees_runs_executed_on_another_gateway(db: Database) -> None:
    gate = Gate()
    async with cluster(db, gate) as (a, b, _c):
        gate.release.set()
        before = await b.rpc("agent", message="earlier", sessionId="s")
        assert (await b.rpc("agent.wait", runId=before["runId"]))["status"] == "ok"
        gate.release.clear()
        gate.entered.clear()

        running = await b.rpc("agent", message="first", sessionId="s")
        await gate.entered.wait()  # running on b, not yet answered
        sub = await a.subscribe("s")
        later = await a.rpc("agent", message="second", sessionId="s")  # starts after subscribing
        other = await a.rpc("agent", message="elsewhere", sessionId="t")
        gate.release.set()

        events = await collect(sub, {running["runId"], later["runId"]})
        first, second = await truth(b.node, running["runId"]), await truth(b.node, later["runId"])
        assert events == first + second  # complete, in order, nothing of the run that had ended
        assert first[0]["data"]["gateway"] == second[0]["data"]["gateway"] == "b"
        assert first[-1]["data"]["text"].startswith("answer ") and second[-1]["data"]["status"] == "ok"
        assert (await a.rpc("agent.wait", runId=other["runId"]))["status"] == "ok"
        assert sub.queue.empty()  # the other session's run never reached this stream
        sub.close()


async def test_a_session_stream_resumes_on_another_gateway_without_gaps_or_duplicates(db: Database) -> None:
    gate = Gate()
    async with cluster(db, gate) as (a, b, c):
        gate.release.set()
        old = await a.rpc("agent", message="old", sessionId="r")
        assert (await a.rpc("agent.wait", runId=old["runId"]))["status"] == "ok"
        gate.release.clear()

        sub = await a.subscribe("r")
        first = await b.rpc("agent", message="first", sessionId="r")
        start = await sub.next()
        assert start is not None and start["runId"] == first["runId"] and start["seq"] == 1
        sub.close("client left")  # the connection drops after the first event

        gate.release.set()
        second = await b.rpc("agent", message="second", sessionId="r")  # while nobody listens
        assert (await a.rpc("agent.wait", runId=second["runId"]))["status"] == "ok"

        # the client reconnects to c (which never saw these runs) with Last-Event-ID "<first>:1"
        resumed = await c.subscribe("r", after={first["runId"]: 1}, since_run=first["runId"])
        third = await c.rpc("agent", message="third", sessionId="r")  # and one more, live
        events = await collect(resumed, {first["runId"], second["runId"], third["runId"]})
        one, two, three = [await truth(b.node, r["runId"]) for r in (first, second, third)]
        names = {first["runId"]: "first", second["runId"]: "second", third["runId"]: "third"}
        got = [(names[e["runId"]], e["seq"]) for e in [start, *events]]
        assert got == [(names[e["runId"]], e["seq"]) for e in one + two + three]
        assert [start, *events] == one + two + three
        resumed.close()

        # a fresh subscription (no resume position) starts with nothing: every run has ended
        fresh = await c.subscribe("r")
        gate.release.set()
        fourth = await a.rpc("agent", message="fourth", sessionId="r")
        assert await collect(fresh, {fourth["runId"]}) == await truth(b.node, fourth["runId"])
        fresh.close()


async def test_two_gateways_follow_one_session_at_once(db: Database) -> None:
    gate = Gate()
    gate.release.set()
    async with cluster(db, gate) as (a, b, c):
        on_a, on_c = await a.subscribe("both"), await c.subscribe("both")
        runs = [
            await member_.rpc("agent", message=f"m{i}", sessionId="both")
            for i, member_ in enumerate((a, b, c))
        ]
        ids = {r["runId"] for r in runs}
        seen_a, seen_c = await collect(on_a, ids), await collect(on_c, ids)
        expected = [e for r in runs for e in await truth(b.node, r["runId"])]
        assert seen_a == seen_c == expected
        on_a.close()
        on_c.close()


@asynccontextmanager
async def served(gateway: Gateway) -> AsyncIterator[str]:
    """``gateway`` (already running) on a real loopback HTTP server; yields its base URL."""
    config = uvicorn.Config(
        create_app(gateway), host="127.0.0.1", port=0, lifespan="off", ws="none", log_level="warning"
    )
    server = uvicorn.Server(config)
    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(server.serve())
        await eventually(lambda: server.started)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


async def read_sse(
    url: str, session_id: str, until_ended: set[str], last_event_id: str | None = None
) -> list[Event]:
    """Events of ``GET /api/events?sessionId=`` until every run in ``until_ended`` has ended."""
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    events: list[Event] = []
    left = set(until_ended)
    params = {"sessionId": session_id, "agent": "agent"}
    async with (
        asyncio.timeout(30),
        httpx.AsyncClient(base_url=url, timeout=30) as client,
        client.stream("GET", "/api/events", params=params, headers=headers) as response,
    ):
        assert response.status_code == 200
        ids: list[str] = []
        async for line in response.aiter_lines():
            if line.startswith("id: "):
                ids.append(line[len("id: ") :])
            elif line.startswith("data: ") and ids:
                event = json.loads(line[len("data: ") :])
                assert ids[-1] == f"{event['runId']}:{event['seq']}"
                events.append(event)
                if is_end(event):
                    left.discard(event["runId"])
                    if not left:
                        break
    return events


async def test_a_session_event_stream_over_http_resumes_with_last_event_id(db: Database) -> None:
    gate = Gate()
    gate.release.set()
    async with cluster(db, gate) as (a, b, c), served(a.gateway) as url_a, served(c.gateway) as url_c:
        first = await b.rpc("agent", message="one", sessionId="sse")
        assert (await b.rpc("agent.wait", runId=first["runId"]))["status"] == "ok"
        gate.release.clear()
        second = await b.rpc("agent", message="two", sessionId="sse")
        await eventually(lambda: gate.calls == 2)  # running on b, not answered yet

        async def release_later() -> None:
            await eventually(lambda: a.gateway.registry.watched("agent", "sse"))
            gate.release.set()

        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(release_later())
            seen = await read_sse(url_a, "sse", {second["runId"]})
        two = await truth(b.node, second["runId"])
        assert seen == two  # the run still going when the stream opened, in full; not the ended one

        third = await a.rpc("agent", message="three", sessionId="sse")
        assert (await c.rpc("agent.wait", runId=third["runId"]))["status"] == "ok"
        # reconnect to another gateway after missing "three": Last-Event-ID resumes after "two"
        rest = await read_sse(
            url_c, "sse", {third["runId"]}, last_event_id=f"{second['runId']}:{two[-1]['seq']}"
        )
        assert rest == await truth(b.node, third["runId"])
