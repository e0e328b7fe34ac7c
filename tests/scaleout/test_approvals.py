"""Pending approvals shared by every gateway: a call waiting on one gateway is listed and decided on
another, and the decision reaches the waiting run (notification, or the poll when one is missed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
import pytest

from loopwright import Agent, tool
from loopwright.approvals import ApprovalDecision
from loopwright.errors import NotFoundError
from loopwright.gateway import Gateway, GatewayConfig, create_app
from loopwright.lanes.postgres import PostgresSessionLocks
from loopwright.scaleout import ScaleOut
from loopwright.sessions.sql import SQLSessionStore
from loopwright.sql import Database
from loopwright.testing import TestModel
from tests.scaleout.support import OPEN_LOCKS, eventually


class Outbox:
    """A tool that needs approval, and every time it really ran."""

    def __init__(self) -> None:
        self.sent: list[str] = []

        @tool(permission="ask")
        def send_email(to: str) -> str:
            """Send an email (a person approves each one)."""
            self.sent.append(to)
            return f"sent to {to}"

        self.tool = send_email


def careful(db: Database, outbox: Outbox, *, to: str = "bob") -> Agent:
    """Agent ``careful`` on ``db``: it calls ``send_email(to)`` once, then answers with the result."""
    locks = PostgresSessionLocks(db)
    OPEN_LOCKS.append(locks)
    return Agent(
        TestModel(args={"send_email": {"to": to}}),
        name="careful",
        tools=[outbox.tool],
        store=SQLSessionStore(db),
        locks=locks,
    )


@asynccontextmanager
async def front_and_back(db: Database, outbox: Outbox) -> AsyncIterator[tuple[ScaleOut, ScaleOut]]:
    """``front`` accepts and streams only; ``back`` runs every run."""
    async with AsyncExitStack() as stack:
        front = await stack.enter_async_context(
            ScaleOut(db, [careful(db, Outbox())], work=False, lease=2.0, poll=0.5, gateway_id="front")
        )
        back = await stack.enter_async_context(
            ScaleOut(db, [careful(db, outbox)], lease=2.0, poll=0.5, gateway_id="back")
        )
        yield front, back


async def _waiting(node: ScaleOut, **filters: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = await eventually(lambda: node.pending_approvals(**filters))
    return found


async def test_a_call_waiting_on_one_node_is_approved_from_another(db: Database) -> None:
    outbox = Outbox()
    async with front_and_back(db, outbox) as (front, back):
        accepted = await front.submit("email bob", session_id="mail")
        [approval] = await _waiting(front)
        assert approval["tool"] == "send_email"
        assert approval["arguments"] == {"to": "bob"}
        assert approval["runId"] == accepted.run_id
        assert approval["sessionId"] == "mail" and approval["agent"] == "careful"
        assert await back.pending_approvals() == [approval]  # the same row from either node
        assert await front.pending_approvals(session_id="other") == []
        assert outbox.sent == []

        assert await front.resolve_approval(approval["approvalId"], ApprovalDecision("approve")) == "careful"
        result = await front.wait(accepted.run_id, timeout=30)
        assert result["status"] == "ok"
        assert "sent to bob" in result["text"]
        assert outbox.sent == ["bob"]  # exactly once
        assert await front.pending_approvals() == []
        assert await back.pending_approvals() == []
        with pytest.raises(NotFoundError):  # decided already
            await front.resolve_approval(approval["approvalId"], ApprovalDecision("deny"))
        transcript = await back.agents["careful"].transcript("mail")
        assert [m.content for m in transcript if getattr(m, "role", "") == "tool"] == ["sent to bob"]


async def test_a_denied_call_never_runs(db: Database) -> None:
    outbox = Outbox()
    async with front_and_back(db, outbox) as (front, back):
        accepted = await front.submit("email bob", session_id="deny")
        [approval] = await _waiting(front, session_id="deny")
        await front.resolve_approval(approval["approvalId"], ApprovalDecision("deny", note="not today"))
        result = await front.wait(accepted.run_id, timeout=30)
        assert result["status"] == "ok"
        assert outbox.sent == []
        transcript = await back.agents["careful"].transcript("deny")
        [tool_result] = [m for m in transcript if getattr(m, "role", "") == "tool"]
        assert tool_result.is_error is True
        assert "not today" in tool_result.content
        assert await front.pending_approvals() == []


async def test_the_owner_decides_its_own_call_and_unknown_ids_are_not_found(db: Database) -> None:
    outbox = Outbox()
    async with front_and_back(db, outbox) as (front, back):
        with pytest.raises(NotFoundError):
            await front.resolve_approval("call_nobody", ApprovalDecision("approve"))
        accepted = await front.submit("email bob", session_id="own")
        [approval] = await _waiting(back)
        await back.resolve_approval(
            approval["approvalId"], ApprovalDecision("skip", result="queued for later")
        )
        result = await back.wait(accepted.run_id, timeout=30)
        assert result["status"] == "ok" and outbox.sent == []
        assert "queued for later" in result["text"]


async def test_a_decision_whose_notification_is_missed_is_found_by_polling(db: Database) -> None:
    outbox = Outbox()
    async with front_and_back(db, outbox) as (front, _back):
        accepted = await front.submit("email bob", session_id="poll")
        [approval] = await _waiting(front)
        # a decision written with no NOTIFY (as if the notification were lost)
        await front.approvals.pool.execute(
            "UPDATE scaleout_approvals SET decision = 'approve', decided_at = now() WHERE approval_id = $1",
            approval["approvalId"],
        )
        result = await front.wait(accepted.run_id, timeout=30)
        assert result["status"] == "ok" and outbox.sent == ["bob"]
        assert await front.approvals.pool.fetchval("SELECT count(*) FROM scaleout_approvals") == 0


@asynccontextmanager
async def gateway(node: ScaleOut, agent: Agent) -> AsyncIterator[httpx.AsyncClient]:
    """A scaled gateway served in-process over HTTP (ASGI), started and drained around the block."""
    gw = Gateway({agent.name: agent}, config=GatewayConfig(grace=5), scaleout=node)
    transport = httpx.ASGITransport(app=create_app(gw))
    async with (
        gw.running(),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=30) as client,
    ):
        yield client


async def _rpc(client: httpx.AsyncClient, method: str, **params: Any) -> dict[str, Any]:
    response = await client.post(f"/api/{method}", json=params)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def test_approvals_over_the_rpc_of_two_gateways(db: Database) -> None:
    outbox = Outbox()
    front_agent, back_agent = careful(db, Outbox(), to="zoe"), careful(db, outbox, to="zoe")
    front_node = ScaleOut(db, [front_agent], work=False, lease=2.0, poll=0.5, gateway_id="front")
    back_node = ScaleOut(db, [back_agent], lease=2.0, poll=0.5, gateway_id="back")
    async with gateway(front_node, front_agent) as a, gateway(back_node, back_agent) as b:
        accepted = await _rpc(a, "agent", message="email zoe", agent="careful", sessionId="rpc")

        async def listed() -> list[dict[str, Any]]:
            return (await _rpc(a, "approvals.list", agent="careful"))["approvals"]

        [approval] = await eventually(listed)
        assert approval["runId"] == accepted["runId"] and approval["tool"] == "send_email"
        assert (await _rpc(a, "approvals.list", sessionId="elsewhere"))["approvals"] == []
        assert (await _rpc(b, "approvals.list"))["approvals"] == [approval]

        resolved = await _rpc(a, "approvals.resolve", approvalId=approval["approvalId"], decision="approve")
        assert resolved == {"approvalId": approval["approvalId"], "decision": "approve", "agent": "careful"}
        result = await _rpc(a, "agent.wait", runId=accepted["runId"], timeoutMs=30_000)
        assert result["status"] == "ok" and "sent to zoe" in result["text"]
        assert outbox.sent == ["zoe"]
        assert (await _rpc(b, "approvals.list"))["approvals"] == []

        for client in (a, b):
            again = await client.post(
                "/api/approvals.resolve", json={"approvalId": approval["approvalId"], "decision": "deny"}
            )
            assert again.status_code == 404, again.text
        unknown = await a.post("/api/approvals.resolve", json={"approvalId": "call_x", "decision": "approve"})
        assert unknown.status_code == 404
        assert "call_x" in unknown.json()["error"]["message"]
