"""Event streams over WebSocket and SSE: shape, order, resuming without gaps or duplicates."""

from __future__ import annotations

import json
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

from loopwright.gateway import GatewayConfig, ServerThread
from tests.gateway.conftest import MakeServer
from tests.gateway.support import Gate, rpc, sse_events, tool_started, wait_for_event


class WsClient:
    """RPC by request id over one WebSocket, with the event frames kept aside."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self.ends: list[dict[str, Any]] = []
        self._id = 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        rid = self._id
        await self.ws.send(json.dumps({"id": rid, "method": method, "params": params}))
        while True:
            frame = await self.next_frame()
            if frame.get("id") == rid:
                assert frame["ok"], frame
                result: dict[str, Any] = frame["result"]
                return result

    async def next_frame(self) -> dict[str, Any]:
        frame: dict[str, Any] = json.loads(await self.ws.recv())
        if frame.get("type") == "event":
            self.events.append(frame["event"])
        elif frame.get("type") == "end":
            self.ends.append(frame)
        return frame

    async def until(self, predicate: Any) -> dict[str, Any]:
        for event in self.events:
            if predicate(event):
                return event
        while True:
            frame = await self.next_frame()
            if frame.get("type") == "event" and predicate(frame["event"]):
                found: dict[str, Any] = frame["event"]
                return found

    async def until_end(self, subscription: str) -> None:
        while not any(e["subscriptionId"] == subscription for e in self.ends):
            await self.next_frame()


def _check_run_stream(events: list[dict[str, Any]], run_id: str) -> None:
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert all(e["runId"] == run_id for e in events)
    assert all(set(e) == {"runId", "seq", "stream", "ts", "data"} for e in events)
    assert events[0]["stream"] == "lifecycle" and events[0]["data"]["phase"] == "start"
    assert events[-1]["stream"] == "lifecycle" and events[-1]["data"]["phase"] == "end"
    assert sum(e["stream"] == "lifecycle" for e in events) == 2
    assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)


async def test_a_finished_run_replays_in_order_and_resumes_from_a_seq(server: ServerThread) -> None:
    async with connect(server.ws_url, proxy=None) as ws:
        client = WsClient(ws)
        accepted = await client.call("agent", message="sum", agent="helper")
        await client.call("agent.wait", runId=accepted["runId"])
        sub = await client.call("subscribe", runId=accepted["runId"])
        await client.until_end(sub["subscriptionId"])
        full = list(client.events)
        _check_run_stream(full, accepted["runId"])
        streams = [e["stream"] for e in full]
        assert {"assistant", "tool"} <= set(streams)
        tool_start = next(e for e in full if e["stream"] == "tool" and e["data"]["phase"] == "start")
        tool_end = next(e for e in full if e["stream"] == "tool" and e["data"]["phase"] == "end")
        assert tool_start["data"]["name"] == "add" and tool_start["data"]["args"] == {"a": 1, "b": 1}
        assert tool_end["data"]["result"] == "2" and tool_end["data"]["isError"] is False
        assert tool_end["data"]["durationMs"] >= 0
        text = "".join(e["data"]["delta"] for e in full if e["stream"] == "assistant")
        assert text == full[-1]["data"]["text"]

        client.events.clear()
        sub = await client.call("subscribe", runId=accepted["runId"], afterSeq=3)
        await client.until_end(sub["subscriptionId"])
        assert client.events == full[3:]


async def test_reconnecting_mid_run_resumes_without_gaps_or_duplicates(
    server: ServerThread, gate: Gate
) -> None:
    async with connect(server.ws_url, proxy=None) as ws:
        first = WsClient(ws)
        accepted = await first.call("agent", message="hold", agent="gated")
        run_id = accepted["runId"]
        await first.call("subscribe", runId=run_id)
        await first.until(tool_started)
        seen = list(first.events)
    # Disconnected: the run goes on and emits more events.
    gate.open()
    async with httpx.AsyncClient(base_url=server.url) as http:
        await rpc(http, "agent.wait", runId=run_id)
    async with connect(server.ws_url, proxy=None) as ws:
        second = WsClient(ws)
        sub = await second.call("subscribe", runId=run_id, afterSeq=seen[-1]["seq"])
        await second.until_end(sub["subscriptionId"])
        resumed = second.events
    _check_run_stream(seen + resumed, run_id)
    assert resumed[0]["seq"] == seen[-1]["seq"] + 1


async def test_sse_resumes_with_last_event_id(server: ServerThread, gate: Gate) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        accepted = await rpc(http, "agent", message="hold", agent="gated")
        run_id = accepted["runId"]
        first: list[dict[str, Any]] = []
        last_id = None
        async with http.stream("GET", "/api/events", params={"runId": run_id}) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            async for event_id, name, data in sse_events(response):
                assert name == data["stream"]
                assert event_id == f"{run_id}:{data['seq']}"
                first.append(data)
                last_id = event_id
                if tool_started(data):
                    break
        gate.open()
        rest: list[dict[str, Any]] = []
        ended = None
        async with http.stream(
            "GET", "/api/events", params={"runId": run_id}, headers={"Last-Event-ID": str(last_id)}
        ) as response:
            async for _, name, data in sse_events(response):
                if name == "end":
                    ended = data
                else:
                    rest.append(data)
        assert ended == {"reason": "ended"}
    _check_run_stream(first + rest, run_id)


async def test_a_session_stream_carries_every_run_of_the_session(server: ServerThread) -> None:
    async with connect(server.ws_url, proxy=None) as ws:
        client = WsClient(ws)
        await client.call("subscribe", sessionId="watched", agent="helper")
        ids = []
        for text in ("one", "two"):
            accepted = await client.call("agent", message=text, agent="helper", sessionId="watched")
            ids.append(accepted["runId"])
            await client.until(
                lambda e, rid=accepted["runId"]: (
                    e["runId"] == rid and e["stream"] == "lifecycle" and e["data"]["phase"] == "end"
                )
            )
        other = await client.call("agent", message="elsewhere", agent="helper", sessionId="not-watched")
        await client.call("agent.wait", runId=other["runId"])
        by_run: dict[str, list[dict[str, Any]]] = {}
        for event in client.events:
            by_run.setdefault(event["runId"], []).append(event)
        assert list(by_run) == ids
        for run_id, events in by_run.items():
            _check_run_stream(events, run_id)

        # Resume: the client says what it saw of each run.
        client.events.clear()
        await client.call("subscribe", sessionId="watched", agent="helper", after={ids[0]: 2, ids[1]: 1})
        await client.call("health")  # frames before this answer are the replay
        replay = client.events
        assert [(e["runId"], e["seq"]) for e in replay] == [
            (ids[0], s) for s in range(3, len(by_run[ids[0]]) + 1)
        ] + [(ids[1], s) for s in range(2, len(by_run[ids[1]]) + 1)]


async def test_requests_on_one_socket_are_answered_by_id(server: ServerThread, gate: Gate) -> None:
    async with connect(server.ws_url, proxy=None) as ws:
        accepted = WsClient(ws)
        started = await accepted.call("agent", message="hold", agent="gated")
        await ws.send(
            json.dumps({"id": "wait", "method": "agent.wait", "params": {"runId": started["runId"]}})
        )
        await ws.send(json.dumps({"id": "ping", "method": "health"}))
        first = json.loads(await ws.recv())
        assert first["id"] == "ping"  # the wait does not block the socket
        gate.open()
        second = json.loads(await ws.recv())
        assert second["id"] == "wait" and second["result"]["status"] == "ok"
        await ws.send("not json")
        assert json.loads(await ws.recv())["error"]["status"] == 400
        await ws.send(json.dumps({"id": 9, "method": "subscribe", "params": {}}))
        refused = json.loads(await ws.recv())
        assert refused["id"] == 9 and refused["error"]["status"] == 400


async def test_results_stay_for_the_retention_period(make_server: MakeServer) -> None:
    assert GatewayConfig().retention >= 600
    server = make_server(GatewayConfig(retention=0))
    async with httpx.AsyncClient(base_url=server.url) as http:
        first = await rpc(http, "agent", message="one", agent="helper")
        assert (await rpc(http, "agent.wait", runId=first["runId"]))["status"] == "ok"
        second = await rpc(http, "agent", message="two", agent="helper")  # prunes what is past retention
        response = await http.post("/api/agent.wait", json={"runId": first["runId"]})
        assert response.status_code == 404
        assert (await rpc(http, "agent.wait", runId=second["runId"]))["status"] == "ok"


async def test_an_sse_request_needs_a_run_or_a_session(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/events")
    assert response.status_code == 400
    response = await client.get("/api/events", params={"runId": "nope"})
    assert response.status_code == 404
    response = await client.get("/api/events", params={"runId": "nope", "afterSeq": "x"})
    assert response.status_code == 400
    accepted = await rpc(client, "agent", message="hi", agent="helper")
    event = await wait_for_event(
        client, accepted["runId"], lambda e: e["stream"] == "lifecycle" and e["data"]["phase"] == "end"
    )
    assert event["data"]["status"] == "ok"
