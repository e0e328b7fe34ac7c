"""Scale-out throughput: the same work done by 1, 2 and 3 node processes sharing one PostgreSQL.

Each node is a process running the scale-out package (tests/scaleout/node.py: a ScaleOut with one
agent on the instant model "test", sessions in SQLSessionStore, locks in PostgresSessionLocks). This
process accepts the messages into the shared queue (a ScaleOut node that does not work) as fast as
it can and waits until every run has ended. Each round uses a fresh schema.

Printed per round: runs/s (from the first message accepted to the last run ended), the ratio to one
process, and the session-lock acquisition times measured inside the nodes (p50/p99, ms). Every run
is checked to have ended ``ok``. Also printed: the CPU time the node processes used per run (start-up
included), which shows when the machine, not the design, is the limit: here the nodes and
PostgreSQL share the same two cores.

Needs PostgreSQL: ``LOOPWRIGHT_TEST_POSTGRES_URL`` (default postgresql://postgres@127.0.0.1:5432/test).
Run: ``python bench/scaleout.py`` (1200 messages over 200 sessions); ``--messages 60`` for a smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from loopwright import Agent
from loopwright.scaleout import ScaleOut, migrate
from loopwright.sql import Database

REPO = Path(__file__).resolve().parents[1]


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _admin(url: str, statement: str) -> None:
    admin = Database(url)
    try:
        async with admin.engine.begin() as conn:
            await conn.execute(text(statement))
    finally:
        await admin.aclose()


def _start(url: str, concurrency: int) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.scaleout.node",
            url,
            "--lease",
            "10",
            "--concurrency",
            str(concurrency),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'src'}"},
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("ready "):
        raise RuntimeError(f"a node did not start: {line!r}")
    return process, f"http://127.0.0.1:{int(line.split()[1])}"


async def _round(
    base_url: str, processes: int, messages: int, sessions: int, concurrency: int
) -> dict[str, Any]:
    schema = f"lwbench_{uuid.uuid4().hex[:12]}"
    await _admin(base_url, f'CREATE SCHEMA "{schema}"')
    url = f"{base_url}{'&' if '?' in base_url else '?'}schema={schema}"
    nodes: list[tuple[subprocess.Popen[str], str]] = []
    db = Database(url)
    try:
        await migrate(db)
        nodes = await asyncio.gather(*(asyncio.to_thread(_start, url, concurrency) for _ in range(processes)))
        front = ScaleOut(
            db,
            [
                Agent(
                    "test", config={"max_queue_depth": messages, "queue_timeout": 3600, "lock_timeout": 7200}
                )
            ],
            work=False,
            poll=0.2,
            pool_size=4,
        )
        async with front:
            started = time.perf_counter()
            limit = asyncio.Semaphore(32)
            run_ids: list[str] = []

            async def send(i: int) -> None:
                async with limit:
                    accepted = await front.submit(f"message {i}", session_id=f"s{i % sessions}")
                    run_ids.append(accepted.run_id)

            await asyncio.gather(*(send(i) for i in range(messages)))
            accepted_in = time.perf_counter() - started
            while True:
                counts = await front.queue.counts()
                if counts.get("ok", 0) + counts.get("error", 0) >= messages:
                    break
                await asyncio.sleep(0.02)
            elapsed = time.perf_counter() - started
            if counts.get("ok", 0) != messages:
                reasons = await front.queue.pool.fetch(
                    "SELECT reason, result->'error'->>'message' AS why, count(*) AS n FROM scaleout_runs "
                    "WHERE status = 'error' GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 5"
                )
                raise RuntimeError(f"not every run ended ok: {counts}: {[tuple(r) for r in reasons]}")
        node_cpu = sum(_cpu_seconds(process.pid) for process, _base in nodes)
        lock_ms: list[float] = []
        per_node: list[int] = []
        async with httpx.AsyncClient() as client:
            for _process, base in nodes:
                stats = (await client.get(f"{base}/stats")).json()
                lock_ms.extend(stats["lockMs"])
                per_node.append(stats["runsDone"])
        return {
            "processes": processes,
            "runs": messages,
            "seconds": elapsed,
            "accept_seconds": accepted_in,
            "runs_per_s": messages / elapsed,
            "lock_p50": _percentile(lock_ms, 0.50),
            "lock_p99": _percentile(lock_ms, 0.99),
            "per_node": per_node,
            "cpu_ms_per_run": node_cpu * 1000 / messages,
        }
    finally:
        for process, _base in nodes:
            process.terminate()
        for process, _base in nodes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        await db.aclose()
        await _admin(base_url, f'DROP SCHEMA "{schema}" CASCADE')


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1200)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8, help="runs at once per node process")
    parser.add_argument("--max-processes", type=int, default=3)
    args = parser.parse_args()
    url = os.environ.get("LOOPWRIGHT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
    print(
        f"scale-out bench: {args.messages} messages over {args.sessions} sessions, instant model 'test', "
        f"{args.concurrency} runs at once per process, {os.cpu_count()} CPU(s)"
    )
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rounds = []
    for processes in range(1, args.max_processes + 1):
        rounds.append(await _round(url, processes, args.messages, args.sessions, args.concurrency))
    base = rounds[0]["runs_per_s"]
    print(
        f"{'processes':>9} {'runs/s':>8} {'x one':>6} {'seconds':>8} {'lock p50 ms':>12} {'lock p99 ms':>12} "
        f"{'node CPU ms/run':>16}  runs per process"
    )
    for r in rounds:
        print(
            f"{r['processes']:>9} {r['runs_per_s']:>8.1f} {r['runs_per_s'] / base:>6.2f} {r['seconds']:>8.2f} "
            f"{r['lock_p50']:>12.2f} {r['lock_p99']:>12.2f} {r['cpu_ms_per_run']:>16.1f}  {r['per_node']}"
        )


if __name__ == "__main__":
    asyncio.run(main())
