"""What the gateway tests share: agents with gates, SSE parsing, waiting for events."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from loopwright import Agent
from loopwright.tools import tool


class Gate:
    """Holds a tool until the test opens it (from any thread or loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = False
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def wait(self) -> None:
        event = asyncio.Event()
        with self._lock:
            if self._open:
                return
            self._waiters.append((asyncio.get_running_loop(), event))
        await event.wait()

    def open(self) -> None:
        with self._lock:
            self._open = True
            for loop, event in self._waiters:
                loop.call_soon_threadsafe(event.set)
            self._waiters.clear()


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def agents(gate: Gate, **config: Any) -> dict[str, Agent]:
    """``helper`` (an instant tool), ``gated`` (a tool that waits for ``gate``) and ``careful`` (a tool
    that needs approval), all on model "test"."""

    @tool(timeout=120)
    async def hold(note: str) -> str:
        """Wait until the test lets go."""
        await gate.wait()
        return f"released {note}"

    gated_config = {"max_queue_depth": 1, **config}
    return {
        "helper": Agent("test", tools=[add], name="helper"),
        "gated": Agent("test", tools=[hold], name="gated", config=gated_config),
        "careful": Agent("test", tools=[send_email], name="careful"),
    }


@tool(permission="ask")
def send_email(to: str) -> str:
    """Send an email (a person approves each one)."""
    return f"sent to {to}"


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str | None, str, dict[str, Any]]]:
    """(id, event name, data) of each SSE message of a streaming response."""
    event_id: str | None = None
    name = "message"
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield event_id, name, json.loads("\n".join(data))
            event_id, name, data = None, "message", []
        elif line.startswith(":"):
            continue
        else:
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if key == "id":
                event_id = value
            elif key == "event":
                name = value
            elif key == "data":
                data.append(value)


async def wait_for_event(
    client: httpx.AsyncClient, run_id: str, predicate: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Read the run's SSE stream until an event matches ``predicate``; return it."""
    async with client.stream("GET", "/api/events", params={"runId": run_id}) as response:
        assert response.status_code == 200
        async for _, name, data in sse_events(response):
            if name != "end" and predicate(data):
                return data
    raise AssertionError(f"run {run_id} ended without the awaited event")


def tool_started(event: dict[str, Any]) -> bool:
    return bool(event["stream"] == "tool" and event["data"]["phase"] == "start")


async def rpc(client: httpx.AsyncClient, method: str, **params: Any) -> dict[str, Any]:
    response = await client.post(f"/api/{method}", json=params)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result
