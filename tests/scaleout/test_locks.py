"""PostgresSessionLocks: exclusion across processes, FIFO waiting, release of a crashed holder's lock
by the database, lockTimeout takeover, the waiting limit, and agents serialized through it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from loopwright.errors import SessionBusyError
from loopwright.lanes import SessionLocks
from loopwright.lanes.postgres import PostgresSessionLocks
from loopwright.sql import Database
from loopwright.testing import FunctionModel
from tests.scaleout.support import eventually, pg_agent

REPO = Path(__file__).resolve().parents[2]


def _url(db: Database) -> str:
    return f"{db.url.set(drivername='postgresql').render_as_string(hide_password=False)}?schema={db.schema}"


async def test_it_implements_the_protocol_and_excludes_another_process_table(db: Database) -> None:
    a, b = PostgresSessionLocks(db), PostgresSessionLocks(db)  # two tables: two processes' worth
    try:
        assert isinstance(a, SessionLocks)
        lease = await a.acquire("s1", "run-a", wait=0, lease=900, max_waiters=10)
        assert a.holder("s1") == lease and b.holder("s1") is None
        assert lease.expires_at - lease.acquired_at == pytest.approx(900, abs=1)
        with pytest.raises(SessionBusyError, match="another run is in progress"):
            await b.acquire("s1", "run-b", wait=0, lease=900, max_waiters=10)
        other = await b.acquire("s2", "run-b", wait=0, lease=900, max_waiters=10)  # other sessions are free
        await b.release(other)
        await a.release(lease)
        await a.release(lease)  # a lease already gone: nothing happens
        again = await b.acquire("s1", "run-b", wait=0, lease=900, max_waiters=10)
        assert b.holder("s1") == again and a.holder("s1") is None
        await b.release(again)
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_waiter_gets_the_lock_when_it_is_released_and_times_out_otherwise(db: Database) -> None:
    a, b = PostgresSessionLocks(db), PostgresSessionLocks(db)
    try:
        held = await a.acquire("s", "first", wait=0, lease=900, max_waiters=10)
        with pytest.raises(SessionBusyError, match=r"waited 0\.3 s") as caught:
            await b.acquire("s", "late", wait=0.3, lease=900, max_waiters=10)
        assert caught.value.retry_after == 0.3
        waiter = asyncio.ensure_future(b.acquire("s", "second", wait=30, lease=900, max_waiters=10))
        await eventually(lambda: _waiting_in_postgres(db, b.key("s")))
        assert not waiter.done()
        await a.release(held)
        got = await waiter
        assert got.run_id == "second"
        await b.release(got)
    finally:
        await a.aclose()
        await b.aclose()


async def _waiting_in_postgres(db: Database, key: int) -> bool:
    from sqlalchemy import text

    async with db.engine.connect() as conn:
        count = await conn.scalar(
            text(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                "AND classid = :c ::bigint::oid AND objid = :o ::bigint::oid"
            ),
            {"c": (key >> 32) & 0xFFFFFFFF, "o": key & 0xFFFFFFFF},
        )
    return bool(count)


async def test_in_process_waiters_are_served_in_arrival_order(db: Database) -> None:
    locks = PostgresSessionLocks(db)
    order: list[str] = []
    try:
        first = await locks.acquire("s", "r0", wait=0, lease=900, max_waiters=10)

        async def take(run_id: str) -> None:
            lease = await locks.acquire("s", run_id, wait=30, lease=900, max_waiters=10)
            order.append(run_id)
            await locks.release(lease)

        tasks = []
        for i in range(1, 5):
            tasks.append(asyncio.ensure_future(take(f"r{i}")))
            await eventually(lambda i=i: locks.waiting("s") == i)
        await locks.release(first)
        await asyncio.gather(*tasks)
        assert order == ["r1", "r2", "r3", "r4"]
    finally:
        await locks.aclose()


async def test_the_waiting_limit_counts_waiters_of_other_processes(db: Database) -> None:
    a, b, c = PostgresSessionLocks(db), PostgresSessionLocks(db), PostgresSessionLocks(db)
    try:
        held = await a.acquire("s", "holder", wait=0, lease=900, max_waiters=10)
        waiter = asyncio.ensure_future(b.acquire("s", "waiting", wait=30, lease=900, max_waiters=10))
        await eventually(lambda: _waiting_in_postgres(db, b.key("s")))
        with pytest.raises(SessionBusyError, match=r"1 requests are already waiting \(limit 1\)"):
            await c.acquire("s", "third", wait=30, lease=900, max_waiters=1)
        await a.release(held)
        await b.release(await waiter)
    finally:
        for locks in (a, b, c):
            await locks.aclose()


def _holder(db: Database, session_id: str, lease: float = 900.0) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.scaleout.lock_holder", _url(db), session_id, str(lease)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'src'}"},
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.startswith("locked"), line
    return child


async def test_a_killed_holders_lock_is_released_by_the_database(db: Database) -> None:
    child = await asyncio.to_thread(_holder, db, "crashy")
    locks = PostgresSessionLocks(db)
    try:
        with pytest.raises(SessionBusyError):
            await locks.acquire("crashy", "mine", wait=0, lease=900, max_waiters=10)
        waiter = asyncio.ensure_future(locks.acquire("crashy", "mine", wait=30, lease=900, max_waiters=10))
        await eventually(lambda: _waiting_in_postgres(db, locks.key("crashy")))
        os.kill(child.pid, signal.SIGKILL)
        await asyncio.to_thread(child.wait)
        lease = await waiter  # no lease expiry involved: the connection died with the process
        assert lease.run_id == "mine"
        await locks.release(lease)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
        await locks.aclose()


async def test_an_expired_lease_is_taken_over_from_a_live_but_stuck_holder(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    child = await asyncio.to_thread(_holder, db, "stuck", 1.0)  # alive, never releases
    locks = PostgresSessionLocks(db)
    try:
        lease = await locks.acquire("stuck", "rescuer", wait=30, lease=900, max_waiters=10)
        assert lease.run_id == "rescuer"
        assert "taking over the lock of run 'held-by-child'" in caplog.text
        assert "lease (lockTimeout) expired" in caplog.text
        await locks.release(lease)
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
        await locks.aclose()


async def test_an_unexpired_live_holder_is_never_taken_over(db: Database) -> None:
    child = await asyncio.to_thread(_holder, db, "busy")
    locks = PostgresSessionLocks(db)
    try:
        with pytest.raises(SessionBusyError, match=r"waited 1\.5 s"):
            await locks.acquire("busy", "impatient", wait=1.5, lease=900, max_waiters=10)
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
        await locks.aclose()


async def test_keys_are_per_schema(db: Database) -> None:
    other = Database(db.url, schema="elsewhere")
    try:
        assert PostgresSessionLocks(db).key("s") != PostgresSessionLocks(other).key("s")
        assert PostgresSessionLocks(db).key("s") == PostgresSessionLocks(db).key("s")
    finally:
        await other.aclose()


async def test_two_agents_with_separate_lock_tables_never_run_one_session_at_once(db: Database) -> None:
    inside = 0
    most = 0

    async def slow(messages: list[object], info: object) -> str:
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        await asyncio.sleep(0.05)
        inside -= 1
        return "done"

    agents = [pg_agent(db, FunctionModel(slow)) for _ in range(2)]
    try:
        reports = await asyncio.gather(
            *(agents[i % 2].run(f"message {i}", session_id="shared") for i in range(6))
        )
        assert [r.reason for r in reports] == ["done"] * 6
        assert most == 1
        transcript = await agents[0].transcript("shared")
        assert len([m for m in transcript if getattr(m, "role", "") == "user"]) == 6
    finally:
        for agent in agents:
            await agent._locks.aclose()  # type: ignore[attr-defined]
