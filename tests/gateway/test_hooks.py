"""Every hook fires through the gateway too (the library and the CLI: tests/safety/test_hooks.py)."""

from __future__ import annotations

from collections import Counter

import httpx

from loopwright import Agent, tool
from loopwright.gateway import Gateway, GatewayConfig, ServerThread
from loopwright.hooks import HOOKS
from tests.gateway.support import rpc


@tool(inline=True)
def echo(text: str) -> str:
    """Echo text."""
    return text


async def test_each_hook_fires_through_the_gateway() -> None:
    fired: Counter[str] = Counter()
    agent = Agent("test", name="hooked", tools=[echo], config={"context_window": 1500, "reserve_floor": 200})
    for name in HOOKS:
        agent.hooks.on(name, lambda event, name=name: fired.update([name]))
    server = ServerThread(Gateway({"hooked": agent}, config=GatewayConfig(grace=5))).start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            for i in range(8):  # enough words for the context to be compacted along the way
                accepted = await rpc(client, "agent", message=f"message {i} " + "words " * 120, sessionId="s")
                waited = await rpc(client, "agent.wait", runId=accepted["runId"], timeoutMs=20000)
                assert waited["status"] == "ok", waited
            await rpc(client, "sessions.reset", sessionId="s")
    finally:
        server.stop()
    assert sorted(set(HOOKS) - set(fired)) == []
    assert fired["gateway_start"] == fired["gateway_stop"] == 1
    assert fired["message_received"] == fired["agent_end"] == 8  # once per run, never twice
