"""Three node processes on one PostgreSQL database: 300 messages to 50 sessions through random
nodes, one node SIGKILLed mid-way. Checks: no session ever ran two runs at once, no acknowledged
message lost or duplicated, every run finished or was reported failed, every event stream complete
and in order (read from a node other than the one that ran it).

The nodes are tests/scaleout/node.py (the scale-out package behind a small HTTP front), not
``loopwright serve``: the gateway's PostgreSQL integration comes separately.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest

from loopwright.messages import UserMessage
from loopwright.scaleout import is_end
from loopwright.sessions.sql import SQLSessionStore
from loopwright.sql import Database

REPO = Path(__file__).resolve().parents[2]
SESSIONS = 50
MESSAGES = 300


class Node:
    def __init__(self, url: str, probe: Path, index: int) -> None:
        self.index = index
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.scaleout.node", url, "--probe", str(probe), "--delay", "0.01"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'src'}"},
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith("ready "), f"node {index} did not start: {line!r}"
        self.base = f"http://127.0.0.1:{int(line.split()[1])}"
        self.alive = True

    def kill(self) -> float:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.alive = False
        return time.time()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.mark.timeout(120)
async def test_three_nodes_300_messages_one_killed(db_url: str, tmp_path: Path) -> None:
    probe = tmp_path / "probe.log"
    nodes = await asyncio.gather(*(asyncio.to_thread(Node, db_url, probe, i) for i in range(3)))
    rng = random.Random(9)
    acknowledged: dict[str, tuple[str, str]] = {}  # message -> (runId, sessionId)
    killed_at = 0.0
    halfway = asyncio.Event()
    try:
        async with httpx.AsyncClient(timeout=60) as client:

            async def send(i: int) -> None:
                session = f"session-{i % SESSIONS}"
                message = f"message {i} to {session}"
                key = f"key-{i}"
                while True:  # a node that dies mid-request: send again elsewhere, same key
                    node = rng.choice([n for n in nodes if n.alive])
                    try:
                        reply = await client.post(
                            f"{node.base}/agent",
                            json={"message": message, "sessionId": session, "idempotencyKey": key},
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
            # Mid-way, while messages arrive and runs are in flight everywhere: kill one node.
            await halfway.wait()
            killed_at = await asyncio.to_thread(nodes[0].kill)
            await asyncio.gather(*sending)
            assert len(acknowledged) == MESSAGES

            # Every acknowledged run ends: finished, or reported failed (never left running).
            async def result(run_id: str) -> dict[str, Any]:
                while True:
                    node = rng.choice([n for n in nodes if n.alive])
                    reply = await client.post(f"{node.base}/wait", json={"runId": run_id, "timeoutMs": 30000})
                    data: dict[str, Any] = reply.json()
                    if data["status"] != "timeout":
                        return data

            results = dict(
                zip(
                    acknowledged,
                    await asyncio.gather(*(result(run_id) for run_id, _ in acknowledged.values())),
                    strict=True,
                )
            )
            statuses = defaultdict(list)
            for message, data in results.items():
                statuses[(data["status"], data["reason"])].append(message)
                if data["status"] == "ok":
                    assert data["text"] == f"ok: {message}"
                else:
                    assert data["reason"] == "interrupted", data
            assert set(statuses) <= {("ok", "done"), ("error", "interrupted")}, dict(statuses)

            # Every event stream is complete and in order, read from a live node (any of them).
            async def stream(run_id: str) -> list[dict[str, Any]]:
                node = rng.choice([n for n in nodes if n.alive])
                reply = await client.get(f"{node.base}/events", params={"runId": run_id, "after": 0})
                events: list[dict[str, Any]] = reply.json()
                return events

            streams = await asyncio.gather(*(stream(run_id) for run_id, _ in acknowledged.values()))
            for events, (message, data) in zip(streams, results.items(), strict=True):
                assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), message
                assert events[0]["data"]["phase"] == "start"
                assert is_end(events[-1]) and sum(is_end(e) for e in events) == 1
                assert events[-1]["data"]["status"] == data["status"]
    finally:
        for node in nodes:
            node.close()

    # No acknowledged message lost or duplicated: each is in its session's transcript exactly once
    # (a run reported failed had recorded its message before its node died), in sending order.
    db = Database(db_url)
    try:
        store = SQLSessionStore(db)
        by_session: dict[str, list[str]] = defaultdict(list)
        for message, (_run_id, session) in acknowledged.items():
            by_session[session].append(message)
        for session, sent in by_session.items():
            users = [e for e in (await store.load(session)).entries if type(e) is UserMessage]
            assert sorted(u.content for u in users) == sorted(sent), session
            assert {u.meta["request_id"] for u in users if u.meta} == {acknowledged[m][0] for m in sent}
    finally:
        await db.aclose()

    # No session ever ran two runs at once (the probe's enter/exit lines, from every process; a run
    # of the killed node that never exited counts as running until the kill).
    spans: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for line in probe.read_text().splitlines():
        kind, session, request_id, _pid, at = line.split()
        span = spans[session].setdefault(request_id + _pid, [0.0, killed_at])
        span[0 if kind == "enter" else 1] = float(at)
    assert spans, "the probe saw no model call"
    for session, runs in spans.items():
        ordered = sorted(runs.values())
        for (_, end), (start, _) in itertools.pairwise(ordered):
            assert end <= start, f"{session}: two runs overlapped"
    interrupted = sum(len(v) for k, v in statuses.items() if k[0] == "error")
    print(f"\n{len(results)} runs: {len(statuses[('ok', 'done')])} ok, {interrupted} reported failed")
