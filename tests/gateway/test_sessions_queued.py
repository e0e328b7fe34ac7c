"""A session whose first message is accepted but still waiting to start is already visible."""

from __future__ import annotations

import httpx

from tests.gateway.conftest import MakeServer
from tests.gateway.support import Gate, agents, rpc


async def test_sessions_get_shows_an_accepted_session_before_its_run_starts(
    make_server: MakeServer, gate: Gate
) -> None:
    server = make_server(served=agents(gate, max_concurrent_runs=1))  # one run of "gated" at a time
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        first = await rpc(client, "agent", agent="gated", message="hold on", sessionId="busy")
        second = await rpc(client, "agent", agent="gated", message="me next", sessionId="waiting")
        got = await rpc(client, "sessions.get", agent="gated", sessionId="waiting")
        assert got["session"] == {"id": "waiting", "agent": "gated", "running": True, "queued": True}
        assert (got["entries"], got["total"], got["reports"]) == ([], 0, [])
        missing = await client.post("/api/sessions.get", json={"agent": "gated", "sessionId": "never"})
        assert missing.status_code == 404
        gate.open()
        for accepted in (first, second):
            done = await rpc(client, "agent.wait", runId=accepted["runId"], timeoutMs=20000)
            assert done["status"] == "ok"
        after = await rpc(client, "sessions.get", agent="gated", sessionId="waiting")
        assert after["total"] >= 3 and "queued" not in after["session"]
