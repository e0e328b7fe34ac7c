"""Approving and denying tool calls through the gateway."""

from __future__ import annotations

from typing import Any

import httpx

from tests.gateway.support import rpc, wait_for_event


def _pending(event: dict[str, Any]) -> bool:
    approval = event["data"].get("approval")
    return event["stream"] == "tool" and approval is not None and approval["state"] == "pending"


async def test_a_pending_call_is_listed_and_approved(client: httpx.AsyncClient) -> None:
    accepted = await rpc(client, "agent", message="email bob", agent="careful", sessionId="mail")
    event = await wait_for_event(client, accepted["runId"], _pending)
    assert event["data"]["name"] == "send_email"
    listed = await rpc(client, "approvals.list", agent="careful")
    [approval] = listed["approvals"]
    assert approval["tool"] == "send_email"
    assert approval["runId"] == accepted["runId"]
    assert approval["sessionId"] == "mail"
    assert approval["agent"] == "careful"
    assert approval["callId"] == event["data"]["callId"]
    assert approval["approvalId"].endswith(":" + approval["callId"])  # unique across runs
    assert (await rpc(client, "approvals.list", agent="careful", sessionId="other"))["approvals"] == []
    resolved = await rpc(client, "approvals.resolve", approvalId=approval["approvalId"], decision="approve")
    assert resolved["decision"] == "approve"
    result = await rpc(client, "agent.wait", runId=accepted["runId"])
    assert result["status"] == "ok"
    assert "sent to" in result["text"]
    assert (await rpc(client, "approvals.list"))["approvals"] == []
    again = await client.post(
        "/api/approvals.resolve", json={"approvalId": approval["approvalId"], "decision": "deny"}
    )
    assert again.status_code == 404


async def test_a_denied_call_does_not_run(client: httpx.AsyncClient) -> None:
    accepted = await rpc(client, "agent", message="email eve", agent="careful")
    event = await wait_for_event(client, accepted["runId"], _pending)
    await rpc(client, "approvals.resolve", approvalId=event["data"]["callId"], decision="deny", note="no")
    result = await rpc(client, "agent.wait", runId=accepted["runId"])
    assert result["status"] == "ok"
    assert "sent to" not in result["text"]
    session = await rpc(client, "sessions.get", sessionId=accepted["sessionId"], agent="careful")
    tool_results = [e for e in session["entries"] if e.get("role") == "tool"]
    assert tool_results and tool_results[0].get("is_error") is True


async def test_a_bad_decision_is_400(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/approvals.resolve", json={"approvalId": "x", "decision": "maybe"})
    assert response.status_code == 400
    assert response.json()["error"]["fields"][0]["field"] == "decision"
