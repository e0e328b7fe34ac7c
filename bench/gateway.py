"""The gateway under load on loopback: many sessions at once through the HTTP API, checked event by event.

A gateway serving one agent (model "test", one instant tool: every run is two model steps and one
tool call) runs in its own process. The benchmark opens one WebSocket per session subscribed to the
session's events, then every session sends its messages one after the other through ``POST
/api/agent`` and waits for each with ``POST /api/agent.wait``. It checks that every run completed,
and that the events each session received live are, per run, seq 1..n with no gap or duplicate, a
lifecycle start first and a lifecycle end last, and text deltas that add up to the final answer.

Then the same work (same sessions, same messages, same concurrency) runs directly through the
library in this process (``Agent.run``), for comparison.

Printed: runs/s, p50/p99 of accept latency (``agent`` answered) and end-to-end latency (send to
result), events checked, the server's memory (resident set now and at its peak), and the library's
figures. ``--workspace`` stores sessions as files (the durable queue on disk) instead of in memory.

Run: ``python bench/gateway.py`` (200 sessions x 5 messages); ``--sessions 4 --messages 2`` for a smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import connect

from loopwright import Agent


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


# --- the server process ---------------------------------------------------------------------------


def serve_forever(workspace: str | None) -> None:
    from loopwright.gateway import Gateway, GatewayConfig, serve

    agent = Agent("test", tools=[add], name="bench", workspace=workspace or None)
    serve(
        Gateway({"bench": agent}, config=GatewayConfig(port=0, grace=5)),
        on_ready=lambda url: print(url, flush=True),
    )


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _memory_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process, in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields.get("VmRSS", 0), fields.get("VmHWM", 0)


# --- the load -------------------------------------------------------------------------------------


@dataclass
class SessionResult:
    accept_ms: list[float] = field(default_factory=list)
    e2e_ms: list[float] = field(default_factory=list)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


class _Countdown:
    def __init__(self, count: int) -> None:
        self.left = count
        self.done = asyncio.Event()

    def arrive(self) -> None:
        self.left -= 1
        if self.left <= 0:
            self.done.set()

    async def wait(self) -> None:
        await self.done.wait()


async def _session(
    url: str, index: int, messages: int, start: asyncio.Event, ready: _Countdown
) -> SessionResult:
    # One HTTP connection per session, like separate users (httpx's shared pool slows down with
    # hundreds of connections in use at once, which would measure the load client, not the server).
    async with httpx.AsyncClient(base_url=url, timeout=180) as http:
        return await _session_on(http, "ws" + url[len("http") :] + "/ws", index, messages, start, ready)


async def _session_on(
    http: httpx.AsyncClient, ws_url: str, index: int, messages: int, start: asyncio.Event, ready: _Countdown
) -> SessionResult:
    out = SessionResult()
    session_id = f"bench-{index}"
    # No keepalive pings: a starved load client must not drop its own connections.
    async with connect(ws_url, proxy=None, max_size=None, open_timeout=120, ping_interval=None) as ws:
        await ws.send(json.dumps({"id": 1, "method": "subscribe", "params": {"sessionId": session_id}}))
        while True:  # the subscription is confirmed before anything is sent
            frame = json.loads(await ws.recv())
            if frame.get("id") == 1:
                ready.arrive()
                if not frame["ok"]:
                    out.problems.append(f"subscribe failed: {frame}")
                    return out
                break
        ended: set[str] = set()

        async def collect() -> None:
            async for raw in ws:
                frame = json.loads(raw)
                if frame.get("type") == "event":
                    event = frame["event"]
                    out.events.setdefault(event["runId"], []).append(event)
                    if event["stream"] == "lifecycle" and event["data"]["phase"] in ("end", "error"):
                        ended.add(event["runId"])
                        if len(ended) == messages:
                            return

        collector = asyncio.create_task(collect())
        await start.wait()
        for n in range(messages):
            sent = time.perf_counter()
            response = await http.post(
                "/api/agent", json={"message": f"message {n} of session {index}", "sessionId": session_id}
            )
            accepted = time.perf_counter()
            if response.status_code != 200:
                out.problems.append(f"agent refused: {response.status_code} {response.text}")
                continue
            run_id = response.json()["runId"]
            result = (await http.post("/api/agent.wait", json={"runId": run_id, "timeoutMs": 120_000})).json()
            done = time.perf_counter()
            out.accept_ms.append((accepted - sent) * 1000)
            out.e2e_ms.append((done - sent) * 1000)
            out.results[run_id] = result
        try:
            await asyncio.wait_for(collector, 60)
        except TimeoutError:
            out.problems.append(
                f"session {session_id}: only {len(ended)} of {messages} runs ended on the stream"
            )
        except Exception as exc:  # the socket failed: reported, not raised, so every session is counted
            out.problems.append(f"session {session_id}: event stream failed: {exc!r}")
    return out


def _check(out: SessionResult) -> tuple[int, list[str]]:
    """Events checked, and every problem found."""
    problems = list(out.problems)
    checked = 0
    for run_id, result in out.results.items():
        if result.get("status") != "ok" or result.get("reason") != "done":
            problems.append(f"run {run_id} did not complete: {result}")
        events = out.events.get(run_id, [])
        checked += len(events)
        seqs = [e["seq"] for e in events]
        if seqs != list(range(1, len(events) + 1)):
            problems.append(f"run {run_id}: seq {seqs} has gaps or duplicates")
            continue
        if (
            not events
            or events[0]["data"].get("phase") != "start"
            or events[-1]["data"].get("phase") != "end"
        ):
            problems.append(f"run {run_id}: the stream does not go from lifecycle start to end")
            continue
        text = "".join(
            e["data"]["delta"] for e in events if e["stream"] == "assistant" and e["data"]["kind"] == "text"
        )
        if text != result.get("text"):
            problems.append(f"run {run_id}: streamed text {text!r} != result {result.get('text')!r}")
        tools = [e["data"]["phase"] for e in events if e["stream"] == "tool"]
        if tools != ["start", "end"]:
            problems.append(f"run {run_id}: tool events {tools}")
    for run_id in out.events.keys() - out.results.keys():
        problems.append(f"events of an unknown run {run_id}")
    return checked, problems


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def through_gateway(url: str, sessions: int, messages: int) -> dict[str, Any]:
    start = asyncio.Event()
    ready = _Countdown(sessions)
    tasks = [asyncio.create_task(_session(url, i, messages, start, ready)) for i in range(sessions)]
    # Every session connects and subscribes first, so the timed part is the messages only.
    await ready.wait()
    began = time.perf_counter()
    start.set()
    outs = await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - began
    accept = [v for o in outs for v in o.accept_ms]
    e2e = [v for o in outs for v in o.e2e_ms]
    checked = 0
    problems: list[str] = []
    for out in outs:
        n, found = _check(out)
        checked += n
        problems.extend(found)
    runs = sum(len(o.results) for o in outs)
    return {
        "runs": runs,
        "expected": sessions * messages,
        "seconds": elapsed,
        "runs_per_s": runs / elapsed,
        "accept_p50_ms": _pct(accept, 0.5),
        "accept_p99_ms": _pct(accept, 0.99),
        "e2e_p50_ms": _pct(e2e, 0.5),
        "e2e_p99_ms": _pct(e2e, 0.99),
        "events_checked": checked,
        "problems": problems,
    }


async def through_library(sessions: int, messages: int, workspace: str | None) -> dict[str, Any]:
    agent = Agent("test", tools=[add], name="bench", workspace=workspace)
    latencies: list[float] = []
    failures: list[str] = []

    async def one(index: int) -> None:
        for n in range(messages):
            sent = time.perf_counter()
            report = await agent.run(f"message {n} of session {index}", session_id=f"lib-{index}")
            latencies.append((time.perf_counter() - sent) * 1000)
            if report.reason != "done":
                failures.append(f"{report.id}: {report.reason} {report.error}")

    began = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(sessions)))
    elapsed = time.perf_counter() - began
    await agent.aclose()
    return {
        "runs": len(latencies),
        "seconds": elapsed,
        "runs_per_s": len(latencies) / elapsed,
        "e2e_p50_ms": _pct(latencies, 0.5),
        "e2e_p99_ms": _pct(latencies, 0.99),
        "problems": failures,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--messages", type=int, default=5)
    parser.add_argument("--workspace", action="store_true", help="sessions and the queue on disk")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve_forever(args.dir)
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        server_dir = str(Path(tmp) / "server") if args.workspace else ""
        command = [sys.executable, __file__, "--serve"] + (["--dir", server_dir] if server_dir else [])
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            if not url.startswith("http://"):
                raise SystemExit(f"the gateway did not start: {url!r}")
            idle_rss, _ = _memory_kib(server.pid)
            cpu_before = _cpu_seconds(server.pid)
            client_before = time.process_time()
            gateway = asyncio.run(through_gateway(url, args.sessions, args.messages))
            gateway["server_cpu_ms_per_run"] = (
                (_cpu_seconds(server.pid) - cpu_before) * 1000 / max(1, gateway["runs"])
            )
            gateway["client_cpu_ms_per_run"] = (
                (time.process_time() - client_before) * 1000 / max(1, gateway["runs"])
            )
            rss, peak = _memory_kib(server.pid)
        finally:
            server.terminate()
            server.wait(30)
        library_dir = str(Path(tmp) / "library") if args.workspace else None
        library = asyncio.run(through_library(args.sessions, args.messages, library_dir))

    gateway.update(
        server_rss_idle_mib=idle_rss / 1024, server_rss_mib=rss / 1024, server_peak_mib=peak / 1024
    )
    ok = not gateway["problems"] and not library["problems"] and gateway["runs"] == gateway["expected"]
    if args.json:
        print(json.dumps({"gateway": gateway, "library": library, "ok": ok}))
        return 0 if ok else 1
    storage = "files (workspace)" if args.workspace else "memory"
    print(
        f"{args.sessions} sessions x {args.messages} messages, model 'test', one tool call per run, sessions in {storage}"
    )
    print(f"{'':24}{'runs/s':>10}{'accept p50':>12}{'accept p99':>12}{'e2e p50':>10}{'e2e p99':>10}")
    print(
        f"{'gateway (HTTP + WS)':24}{gateway['runs_per_s']:>10.0f}{gateway['accept_p50_ms']:>10.2f}ms"
        f"{gateway['accept_p99_ms']:>10.2f}ms{gateway['e2e_p50_ms']:>8.1f}ms{gateway['e2e_p99_ms']:>8.1f}ms"
    )
    print(
        f"{'library (Agent.run)':24}{library['runs_per_s']:>10.0f}{'-':>12}{'-':>12}"
        f"{library['e2e_p50_ms']:>8.1f}ms{library['e2e_p99_ms']:>8.1f}ms"
    )
    print(
        f"runs completed: {gateway['runs']}/{gateway['expected']} through the gateway, {library['runs']} through the "
        f"library; events checked: {gateway['events_checked']} (lost or duplicated: "
        f"{sum('seq' in p for p in gateway['problems'])})"
    )
    print(
        f"server memory: {gateway['server_rss_idle_mib']:.0f} MiB idle, {gateway['server_rss_mib']:.0f} MiB after, "
        f"{gateway['server_peak_mib']:.0f} MiB peak"
    )
    print(
        f"CPU per run: server {gateway['server_cpu_ms_per_run']:.2f} ms, load client {gateway['client_cpu_ms_per_run']:.2f} ms "
        f"(both share {os.cpu_count()} cores)"
    )
    for problem in (gateway["problems"] + library["problems"])[:20]:
        print(f"PROBLEM: {problem}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
