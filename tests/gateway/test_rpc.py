"""The RPC methods over real HTTP: results, and every refusal with its status and fields."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from loopwright.gateway import GatewayConfig, ServerThread
from tests.gateway.conftest import MakeServer
from tests.gateway.support import Gate, agents, rpc, sse_events, tool_started, wait_for_event


async def test_agent_returns_at_once_and_wait_gives_the_result(client: httpx.AsyncClient) -> None:
    accepted = await rpc(client, "agent", message="add two numbers", agent="helper")
    assert set(accepted) >= {"runId", "sessionId", "acceptedAt"}
    assert accepted["deduplicated"] is False
    assert accepted["acceptedAt"].endswith("Z")
    result = await rpc(client, "agent.wait", runId=accepted["runId"])
    assert result["status"] == "ok"
    assert result["reason"] == "done"
    assert "add → 2" in result["text"]
    assert result["startedAt"] <= result["endedAt"]
    assert result["usage"]["outputTokens"] > 0
    session = await rpc(client, "sessions.get", sessionId=accepted["sessionId"], agent="helper")
    roles = [e.get("role") for e in session["entries"]]
    assert roles[0] == "user" and roles[-1] == "assistant"
    assert session["entries"][0]["content"] == "add two numbers"
    assert [r["reason"] for r in session["reports"]] == ["done"]


async def test_the_first_agent_is_the_default(client: httpx.AsyncClient) -> None:
    accepted = await rpc(client, "agent", message="hello")
    assert accepted["agent"] == "helper"


async def test_same_idempotency_key_gives_the_first_run(client: httpx.AsyncClient) -> None:
    first = await rpc(
        client, "agent", message="once", agent="helper", sessionId="idem-1", idempotencyKey="k-1"
    )
    again = await rpc(
        client, "agent", message="once", agent="helper", sessionId="idem-1", idempotencyKey="k-1"
    )
    assert again["runId"] == first["runId"]
    assert again["deduplicated"] is True
    await rpc(client, "agent.wait", runId=first["runId"])
    other = await rpc(
        client, "agent", message="twice", agent="helper", sessionId="idem-1", idempotencyKey="k-2"
    )
    assert other["runId"] != first["runId"]
    await rpc(client, "agent.wait", runId=other["runId"])
    session = await rpc(client, "sessions.get", sessionId="idem-1", agent="helper")
    users = [e["content"] for e in session["entries"] if e.get("role") == "user"]
    assert users == ["once", "twice"]


async def test_idempotency_keys_expire(make_server: MakeServer) -> None:
    server = make_server(GatewayConfig(idempotency_ttl=0.0))
    async with httpx.AsyncClient(base_url=server.url) as client:
        first = await rpc(client, "agent", message="a", agent="helper", idempotencyKey="k")
        second = await rpc(client, "agent", message="a", agent="helper", idempotencyKey="k")
    assert second["runId"] != first["runId"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "message"),
        ({"message": 42}, "message"),
        ({"message": "hi", "colour": "red"}, "colour"),
        ({"message": "hi", "queueMode": "shout"}, "queueMode"),
        ({"message": "hi", "sessionId": "../etc"}, "sessionId"),
        ({"message": "   "}, "message"),
        ({"message": "hi", "idempotencyKey": ""}, "idempotencyKey"),
    ],
)
async def test_invalid_params_are_400_with_the_field(
    client: httpx.AsyncClient, params: dict[str, object], field: str
) -> None:
    response = await client.post("/api/agent", json=params)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert field in [f["field"] for f in error["fields"]]


async def test_a_body_that_is_not_json_is_400(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/agent", content=b"{not json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"][0]["field"] == "body"
    response = await client.post("/api/agent", json=["a", "list"])
    assert response.status_code == 400


async def test_wait_params_are_checked(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/agent.wait", json={"runId": "x", "timeoutMs": -1})
    assert response.status_code == 400
    assert response.json()["error"]["fields"][0]["field"] == "timeoutMs"


@pytest.mark.parametrize(
    ("method", "params", "needle"),
    [
        ("agent", {"message": "hi", "agent": "nobody"}, "unknown agent 'nobody'"),
        ("agent.wait", {"runId": "no-such-run"}, "run 'no-such-run' not found"),
        ("agent.stop", {"runId": "no-such-run"}, "run 'no-such-run' not found"),
        ("sessions.get", {"sessionId": "no-such-session"}, "session 'no-such-session' not found"),
        ("sessions.reset", {"sessionId": "no-such-session"}, "session 'no-such-session' not found"),
        ("approvals.resolve", {"approvalId": "nope", "decision": "approve"}, "no pending approval 'nope'"),
        ("no.such.method", {}, "unknown method 'no.such.method'"),
    ],
)
async def test_unknown_things_are_404(
    client: httpx.AsyncClient, method: str, params: dict[str, object], needle: str
) -> None:
    response = await client.post(f"/api/{method}", json=params)
    assert response.status_code == 404
    assert needle in response.json()["error"]["message"]
    assert response.json()["error"]["code"] == "not_found"


async def test_drop_mode_refuses_a_busy_session_with_409(client: httpx.AsyncClient, gate: Gate) -> None:
    first = await rpc(client, "agent", message="hold on", agent="gated", sessionId="busy-1")
    await wait_for_event(client, first["runId"], tool_started)
    response = await client.post(
        "/api/agent", json={"message": "me too", "agent": "gated", "sessionId": "busy-1", "queueMode": "drop"}
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "busy"
    assert "'busy-1'" in response.json()["error"]["message"]
    gate.open()
    assert (await rpc(client, "agent.wait", runId=first["runId"]))["status"] == "ok"
    # Idle again: drop mode runs at once.
    again = await rpc(client, "agent", message="now", agent="gated", sessionId="busy-1", queueMode="drop")
    assert (await rpc(client, "agent.wait", runId=again["runId"]))["status"] == "ok"


async def test_a_full_session_queue_is_503_with_a_retry_hint(client: httpx.AsyncClient, gate: Gate) -> None:
    running = await rpc(client, "agent", message="one", agent="gated", sessionId="full-1")
    waiting = await rpc(client, "agent", message="two", agent="gated", sessionId="full-1")
    response = await client.post(
        "/api/agent", json={"message": "three", "agent": "gated", "sessionId": "full-1"}
    )
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "unavailable"
    assert error["retryAfterMs"] > 0
    assert int(response.headers["retry-after"]) >= 1
    gate.open()
    for accepted in (running, waiting):
        assert (await rpc(client, "agent.wait", runId=accepted["runId"]))["status"] == "ok"


async def test_a_body_over_1_mib_is_413(client: httpx.AsyncClient) -> None:
    big = json.dumps({"message": "x" * (1024 * 1024)})
    response = await client.post("/api/agent", content=big, headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert "1048576" in response.json()["error"]["message"]


async def test_a_chunked_body_over_1_mib_is_413(client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"message": "'
        for _ in range(20):
            yield b"y" * 65536
        yield b'"}'

    response = await client.post("/api/agent", content=chunks())
    assert response.status_code == 413


async def test_a_message_over_the_agents_limit_is_413(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/agent", json={"message": "z" * 300_000, "agent": "helper"})
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "too_large"
    assert error["fields"][0]["field"] == "message"


async def test_a_wait_timeout_does_not_stop_the_run(client: httpx.AsyncClient, gate: Gate) -> None:
    accepted = await rpc(client, "agent", message="slow", agent="gated")
    early = await rpc(client, "agent.wait", runId=accepted["runId"], timeoutMs=50)
    assert early["status"] == "timeout"
    assert "endedAt" in early and early["endedAt"] is None
    gate.open()
    final = await rpc(client, "agent.wait", runId=accepted["runId"], timeoutMs=30_000)
    assert final["status"] == "ok"
    assert final["reason"] == "done"
    assert "released" in final["text"]


async def test_stop_ends_a_run_with_reason_stopped(client: httpx.AsyncClient, gate: Gate) -> None:
    accepted = await rpc(client, "agent", message="stop me", agent="gated")
    await wait_for_event(client, accepted["runId"], tool_started)
    assert (await rpc(client, "agent.stop", runId=accepted["runId"]))["stopped"] == 1
    gate.open()
    result = await rpc(client, "agent.wait", runId=accepted["runId"])
    assert result["status"] == "ok"
    assert result["reason"] == "stopped"
    response = await client.post("/api/agent.stop", json={})
    assert response.status_code == 400


async def test_sessions_list_and_paged_transcript(client: httpx.AsyncClient) -> None:
    for text in ("first", "second", "third"):
        accepted = await rpc(client, "agent", message=text, agent="helper", sessionId="paged")
        await rpc(client, "agent.wait", runId=accepted["runId"])
    listed = await rpc(client, "sessions.list", agent="helper")
    assert [s["id"] for s in listed["sessions"]] == ["paged"]
    assert listed["sessions"][0]["title"] == "first"
    whole = await rpc(client, "sessions.get", sessionId="paged", agent="helper", limit=1000)
    total = whole["total"]
    assert total == len(whole["entries"]) >= 9
    pages = []
    offset: int | None = 0
    while offset is not None:
        page = await rpc(client, "sessions.get", sessionId="paged", agent="helper", offset=offset, limit=4)
        pages.extend(page["entries"])
        offset = page["nextOffset"]
    assert pages == whole["entries"]
    everywhere = await rpc(client, "sessions.list")
    assert {s["agent"] for s in everywhere["sessions"]} == {"helper"}


async def test_reset_starts_over_and_keeps_the_old_transcript(client: httpx.AsyncClient) -> None:
    accepted = await rpc(client, "agent", message="remember me", agent="helper", sessionId="resettable")
    await rpc(client, "agent.wait", runId=accepted["runId"])
    reset = await rpc(client, "sessions.reset", sessionId="resettable", agent="helper")
    assert reset["previousSessionId"] == "resettable"
    assert reset["sessionId"] != "resettable"
    old = await rpc(client, "sessions.get", sessionId="resettable", agent="helper")
    assert old["session"]["terminated"] is True
    assert old["entries"][0]["content"] == "remember me"
    response = await client.post(
        "/api/agent", json={"message": "again", "agent": "helper", "sessionId": "resettable"}
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "terminated"


async def test_health(client: httpx.AsyncClient) -> None:
    health = await rpc(client, "health")
    assert health["ok"] is True
    assert [a["name"] for a in health["agents"]] == ["helper", "gated", "careful"]
    assert health["agents"][0]["tools"] == ["add"]
    assert health["auth"] is False


async def test_draining_refuses_new_messages_with_503(
    server: ServerThread, client: httpx.AsyncClient, gate: Gate
) -> None:
    running = await rpc(client, "agent", message="finish me", agent="gated")
    await wait_for_event(client, running["runId"], tool_started)
    server.drain()
    response = await client.post("/api/agent", json={"message": "late", "agent": "helper"})
    assert response.status_code == 503
    assert "shutting down" in response.json()["error"]["message"]
    waiting = asyncio.create_task(rpc(client, "agent.wait", runId=running["runId"]))
    assert (await rpc(client, "health"))["status"] == "draining"  # the wait is with the server now
    gate.open()
    result = await waiting
    assert (result["status"], result["reason"]) == ("ok", "done")


async def test_unknown_routes_are_json_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/nothing-here")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    response = await client.get("/api/agent")
    assert response.status_code == 405


async def test_concurrent_requests_with_one_key_start_one_run(client: httpx.AsyncClient) -> None:
    params = {"message": "only once", "agent": "helper", "sessionId": "idem-race", "idempotencyKey": "race"}
    answers = await asyncio.gather(*(client.post("/api/agent", json=params) for _ in range(8)))
    run_ids = {a.json()["runId"] for a in answers}
    assert len(run_ids) == 1
    assert sorted(a.json()["deduplicated"] for a in answers) == [False] + [True] * 7
    await rpc(client, "agent.wait", runId=run_ids.pop())
    session = await rpc(client, "sessions.get", sessionId="idem-race", agent="helper")
    assert [e["content"] for e in session["entries"] if e.get("role") == "user"] == ["only once"]


async def test_collected_messages_each_get_the_turns_result(make_server: MakeServer, gate: Gate) -> None:
    server = make_server(served=agents(gate, collect_debounce=0.05))
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        first = await rpc(client, "agent", message="hold", agent="gated", sessionId="col")
        await wait_for_event(client, first["runId"], tool_started)
        later = [
            await rpc(client, "agent", message=text, agent="gated", sessionId="col", queueMode="collect")
            for text in ("two", "three")
        ]
        gate.open()
        results = [await rpc(client, "agent.wait", runId=a["runId"]) for a in later]
        assert [r["status"] for r in results] == ["ok", "ok"]
        assert results[0]["text"] == results[1]["text"]
        for accepted in later:  # each run's stream still goes from start to end
            events = []
            async with client.stream("GET", "/api/events", params={"runId": accepted["runId"]}) as response:
                async for _, name, data in sse_events(response):
                    if name != "end":
                        events.append(data)
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            assert events[0]["data"]["phase"] == "start" and events[-1]["data"]["phase"] == "end"
        session = await rpc(client, "sessions.get", sessionId="col", agent="gated")
    users = [e["content"] for e in session["entries"] if e.get("role") == "user"]
    assert users[0] == "hold"
    assert users[1].startswith("[2 messages sent while you were busy]")
    assert "1. two" in users[1] and "2. three" in users[1]
