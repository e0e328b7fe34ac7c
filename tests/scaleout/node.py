"""One scale-out node as its own process, with a small HTTP front: what a gateway process does for
scale-out, without the gateway (used by the cluster test and bench/scaleout.py).

    python -m tests.scaleout.node URL --probe FILE [--delay SECONDS] [--lease SECONDS]

Prints ``ready PORT`` once it listens on 127.0.0.1. Endpoints (JSON):

- ``POST /agent`` {message, sessionId, queueMode?, idempotencyKey?} → {runId, sessionId, acceptedAt}
  (409 drop / 503 depth refusals as ``{"error": ...}``)
- ``POST /wait`` {runId, timeoutMs} → the ``agent.wait`` result
- ``GET /events?runId=&after=`` → the run's events after ``after`` up to its end (waits for it)
- ``GET /stats`` → runs done here and lock acquisition times (ms)

The model appends ``enter``/``exit`` lines (session, run, pid, time) to the probe file around every
call, so the test can check that no session ever ran two runs at once, whatever process ran them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import time
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from loopwright import Agent
from loopwright.errors import NotFoundError
from loopwright.lanes.base import LockLease
from loopwright.lanes.postgres import PostgresSessionLocks
from loopwright.scaleout import QueueRefused, ScaleOut
from loopwright.sessions.sql import SQLSessionStore
from loopwright.sql import Database
from loopwright.testing import FunctionModel


class TimedLocks(PostgresSessionLocks):
    """Records how long each acquisition took (the bench's lock p50/p99)."""

    def __init__(self, database: Database) -> None:
        super().__init__(database)
        self.times_ms: list[float] = []

    async def acquire(
        self, session_id: str, run_id: str, *, wait: float, lease: float, max_waiters: int
    ) -> LockLease:
        started = time.perf_counter()
        held = await super().acquire(session_id, run_id, wait=wait, lease=lease, max_waiters=max_waiters)
        self.times_ms.append((time.perf_counter() - started) * 1000)
        return held


def probe_model(path: str, delay: float) -> FunctionModel:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    async def answer(messages: list[Any], info: Any) -> str:
        last = messages[-1]
        session = (getattr(last, "meta", None) or {}).get("session", "?")
        request_id = (getattr(last, "meta", None) or {}).get("request_id", "?")
        os.write(fd, f"enter {session} {request_id} {os.getpid()} {time.time():.6f}\n".encode())
        if delay:
            await asyncio.sleep(delay)
        os.write(fd, f"exit {session} {request_id} {os.getpid()} {time.time():.6f}\n".encode())
        return f"ok: {last.content}"

    return FunctionModel(answer, name="probe")


def build(url: str, probe: str, delay: float, lease: float, concurrency: int) -> tuple[ScaleOut, TimedLocks]:
    db = Database(
        url, pool_size=3, max_overflow=3
    )  # the session store's connections (kept few: see docs/deploy.md)
    locks = TimedLocks(db)
    model: Any = probe_model(probe, delay) if probe else "test"
    agent = Agent(
        model, name="agent", store=SQLSessionStore(db), locks=locks, config={"max_queue_depth": 1000}
    )
    node = ScaleOut(
        db, [agent], lease=lease, poll=0.5, concurrency=concurrency, sweep_every=lease / 2, pool_size=6
    )
    return node, locks


def app_for(node: ScaleOut, locks: TimedLocks) -> Starlette:
    async def agent(request: Request) -> JSONResponse:
        body = await request.json()
        try:
            accepted = await node.submit(
                body["message"],
                session_id=body.get("sessionId"),
                mode=body.get("queueMode"),
                idempotency_key=body.get("idempotencyKey"),
                meta={"session": body.get("sessionId")},
            )
        except QueueRefused as exc:
            return JSONResponse({"error": str(exc)}, status_code=409 if exc.kind == "drop" else 503)
        return JSONResponse(
            {"runId": accepted.run_id, "sessionId": accepted.session_id, "acceptedAt": accepted.accepted_at}
        )

    async def wait(request: Request) -> JSONResponse:
        body = await request.json()
        try:
            return JSONResponse(await node.wait(body["runId"], body.get("timeoutMs", 30000) / 1000))
        except NotFoundError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)

    async def events(request: Request) -> JSONResponse:
        run_id = request.query_params["runId"]
        after = int(request.query_params.get("after", "0"))
        found = [e async for e in node.follow_run(run_id, after)]
        return JSONResponse(found)

    async def stats(_request: Request) -> JSONResponse:
        done = node.worker.runs_done if node.worker is not None else 0
        return JSONResponse({"runsDone": done, "lockMs": locks.times_ms, "pid": os.getpid()})

    return Starlette(
        routes=[
            Route("/agent", agent, methods=["POST"]),
            Route("/wait", wait, methods=["POST"]),
            Route("/events", events),
            Route("/stats", stats),
        ]
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--probe", default="")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    node, locks = build(args.url, args.probe, args.delay, args.lease, args.concurrency)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app_for(node, locks), log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    async with node:
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
            await asyncio.sleep(0.01)
        print(f"ready {sock.getsockname()[1]}", flush=True)
        await serving


if __name__ == "__main__":
    asyncio.run(main())
