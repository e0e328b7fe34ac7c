"""``loopwright serve --database postgresql://…``: three gateway processes sharing one PostgreSQL.

300 messages to 50 sessions through random gateways, one gateway SIGKILLed mid-way. Checks: no
session ever ran two runs at once, no acknowledged message lost or duplicated, every run finished or
was reported failed, and every run's event stream — read over SSE from a random live gateway, often
not the one that ran it — complete and in order. Skipped without ``LOOPWRIGHT_TEST_POSTGRES_URL``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from loopwright.messages import UserMessage
from loopwright.sessions.sql import SQLSessionStore
from loopwright.sql import Database
from tests.gateway.support import sse_events
from tests.scaleout.support import fresh_schema_sync, postgres_url

CLI = Path(sys.executable).parent / "loopwright"
SESSIONS = 50
MESSAGES = 300


@pytest.fixture
def db_url() -> Iterator[str]:
    postgres_url()
    yield from fresh_schema_sync()


class Serve:
    def __init__(self, workspace: Path, url: str, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [
                str(CLI),
                "serve",
                "-w",
                str(workspace),
                "--port",
                "0",
                "--database",
                url,
                "--lease",
                "2",
                "--concurrency",
                "4",
                "--grace",
                "5",
            ],
            cwd=cwd,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "http://" in line, f"the gateway did not start: {line!r}"
        self.url = "http://" + line.split("http://", 1)[1].split()[0]
        self.alive = True

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.alive = False

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


async def _stream(client: httpx.AsyncClient, base: str, run_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with client.stream("GET", f"{base}/api/events", params={"runId": run_id}) as response:
        assert response.status_code == 200
        async for _, name, data in sse_events(response):
            if name == "end":
                break
            events.append(data)
    return events


@pytest.mark.timeout(150)
async def test_three_gateways_share_one_postgres_and_survive_a_sigkill(db_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "agent"
    await asyncio.to_thread(
        subprocess.run, [str(CLI), "init", str(workspace)], check=True, capture_output=True
    )
    gateways = await asyncio.gather(
        *(asyncio.to_thread(Serve, workspace, db_url, tmp_path) for _ in range(3))
    )
    rng = random.Random(9)
    acknowledged: dict[str, tuple[str, str]] = {}
    halfway = asyncio.Event()

    def live() -> Serve:
        return rng.choice([g for g in gateways if g.alive])

    try:
        async with httpx.AsyncClient(timeout=60) as client:

            async def send(i: int) -> None:
                session = f"session-{i % SESSIONS}"
                message = f"message {i} to {session}"
                while True:  # a gateway that dies mid-request: send again elsewhere, same key
                    try:
                        reply = await client.post(
                            f"{live().url}/api/agent",
                            json={"message": message, "sessionId": session, "idempotencyKey": f"k{i}"},
                        )
                    except httpx.TransportError:
                        continue
                    assert reply.status_code == 200, reply.text
                    acknowledged[message] = (reply.json()["runId"], session)
                    if len(acknowledged) >= MESSAGES // 2:
                        halfway.set()
                    return

            limit = asyncio.Semaphore(24)

            async def limited(i: int) -> None:
                async with limit:
                    await send(i)

            sending = [asyncio.ensure_future(limited(i)) for i in range(MESSAGES)]
            await halfway.wait()
            await asyncio.to_thread(gateways[0].kill)  # mid-way, runs in flight everywhere
            await asyncio.gather(*sending)
            assert len(acknowledged) == MESSAGES

            async def result(run_id: str) -> dict[str, Any]:
                while True:  # any live gateway answers for any run
                    reply = await client.post(f"{live().url}/api/agent.wait", json={"runId": run_id})
                    assert reply.status_code == 200, reply.text
                    data: dict[str, Any] = reply.json()
                    if data["status"] != "timeout":
                        return data

            limit_wait = asyncio.Semaphore(32)

            async def bounded(run_id: str) -> dict[str, Any]:
                async with limit_wait:
                    return await result(run_id)

            results = dict(
                zip(
                    acknowledged,
                    await asyncio.gather(*(bounded(r) for r, _ in acknowledged.values())),
                    strict=True,
                )
            )
            outcomes = defaultdict(int)
            for data in results.values():
                outcomes[(data["status"], data["reason"])] += 1
                if data["status"] == "error":
                    assert data["reason"] == "interrupted" and data["error"]["code"] == "interrupted", data
            assert set(outcomes) <= {("ok", "done"), ("error", "interrupted")}, dict(outcomes)

            async def stream(run_id: str) -> list[dict[str, Any]]:
                async with limit_wait:
                    return await _stream(client, live().url, run_id)

            streams = await asyncio.gather(*(stream(r) for r, _ in acknowledged.values()))
            spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
            for events, (message, data) in zip(streams, results.items(), strict=True):
                run_id, session = acknowledged[message]
                assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), message
                assert all(e["runId"] == run_id for e in events)
                assert events[0]["data"]["phase"] == "start"
                ends = [
                    e for e in events if e["stream"] == "lifecycle" and e["data"]["phase"] in ("end", "error")
                ]
                assert ends == [events[-1]]
                assert events[-1]["data"]["status"] == data["status"]
                if data["status"] == "ok":
                    text = "".join(
                        e["data"].get("delta", "")
                        for e in events
                        if e["stream"] == "assistant" and e["data"].get("kind") == "text"
                    )
                    assert data["text"] and data["text"] in text
                last_start = max(e["ts"] for e in events if e["data"].get("phase") == "start")
                spans[session].append((last_start, events[-1]["ts"]))
    finally:
        for gateway in gateways:
            gateway.close()

    db = Database(db_url)
    try:
        store = SQLSessionStore(db)
        sent: dict[str, list[str]] = defaultdict(list)
        for message, (_run_id, session) in acknowledged.items():
            sent[session].append(message)
        for session, messages in sent.items():
            users = [e for e in (await store.load(session)).entries if type(e) is UserMessage]
            # every acknowledged message exactly once (a run reported failed had recorded it)
            assert sorted(u.content for u in users) == sorted(messages), session
            # the loop's own run reports (taken under the session lock) never overlap
            reports = sorted((r.started_at, r.completed_at) for r in await store.list_reports(session))
            for (_, end), (start, _) in itertools.pairwise(reports):
                assert end <= start, f"{session}: two runs overlapped"
    finally:
        await db.aclose()
    # and neither do the runs as the queue saw them (claimed → ended), ms clock
    for session, intervals in spans.items():
        for (_, end), (start, _) in itertools.pairwise(sorted(intervals)):
            assert end <= start, f"{session}: two runs were running at once"
    print(f"\n{MESSAGES} runs over 3 gateways, one killed: {dict(outcomes)}")
