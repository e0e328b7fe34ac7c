"""Run events shared by every gateway: rows in ``scaleout_events``, woken by ``LISTEN/NOTIFY``.

Each event is ``{runId, seq, stream, ts, data}`` (the gateway's wire format), ``seq`` counting 1, 2,
3… per run. One writer per run (the worker that owns it) inserts them in order, each batch in one
transaction that first checks, under a share lock on the run's row, that it still owns the run; so a
reader that asks for ``seq > n`` in order never sees a gap, and nothing lands after the run's end.

``NOTIFY`` carries only ``runId``, the last ``seq``, the agent and the session (well under
PostgreSQL's 8000-byte limit); readers then read the rows. A notification can be lost (the listening
connection drops and reconnects): readers also look every ``poll`` seconds, so a lost wake-up only
delays an event, never drops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from loopwright.scaleout._pg import Connection, Pool, Record
from loopwright.scaleout._queue import RunQueue

__all__ = ["Event", "EventHub", "EventLog", "is_end"]

log = logging.getLogger("loopwright.scaleout")

Event = dict[str, Any]

_WRITE = """
WITH owned AS (
    SELECT run_id FROM scaleout_runs WHERE run_id = $1 AND owner = $2 AND status = 'running' FOR SHARE
), written AS (
    INSERT INTO scaleout_events (run_id, seq, agent, session_id, stream, ts, data)
    SELECT owned.run_id, u.seq, $3, $4, u.stream, u.ts, u.data::jsonb
    FROM owned, unnest($5::int[], $6::text[], $7::bigint[], $8::text[]) AS u(seq, stream, ts, data)
    RETURNING 1
)
SELECT count(*) FROM written, (SELECT pg_notify($9, $10) FROM owned) AS n
"""
_END = """
WITH owned AS (
    SELECT run_id FROM scaleout_runs WHERE run_id = $1 AND owner = $2 AND status = 'running' FOR UPDATE
), written AS (
    INSERT INTO scaleout_events (run_id, seq, agent, session_id, stream, ts, data)
    SELECT owned.run_id, $5, $3, $4, 'lifecycle', $6, $7::jsonb FROM owned
    RETURNING 1
), ended AS (
    UPDATE scaleout_runs r SET status = $8, reason = $9, result = $10::jsonb, ended_at = now(),
        lease_until = NULL
    FROM owned WHERE r.run_id = owned.run_id
    RETURNING 1
)
SELECT count(*) FROM written, ended, (SELECT pg_notify($11, $12) FROM owned) AS n
"""


def is_end(event: Event) -> bool:
    """The run's last event: ``lifecycle`` with phase ``end`` or ``error``."""
    return event["stream"] == "lifecycle" and event["data"].get("phase") in ("end", "error")


def _event(run_id: str, row: Record) -> Event:
    return {
        "runId": run_id,
        "seq": row["seq"],
        "stream": row["stream"],
        "ts": row["ts"],
        "data": json.loads(row["data"]),
    }


class EventHub:
    """One process's ``LISTEN`` connection: wakes the readers of runs and sessions, the worker
    (new runs queued) and stop requests. Kept alive by :meth:`keep_listening`."""

    def __init__(self, connect: Callable[[], Any], *, events: str, queue: str, control: str) -> None:
        self._connect = connect
        self.events_channel, self.queue_channel, self.control_channel = events, queue, control
        self._runs: dict[str, set[asyncio.Event]] = {}
        self._sessions: dict[tuple[str, str], set[asyncio.Event]] = {}
        self.on_queue: list[Callable[[str], None]] = []
        self.on_control: list[Callable[[str], None]] = []
        self._conn: Connection | None = None
        self._lost = asyncio.Event()
        self.ready = asyncio.Event()

    async def keep_listening(self) -> None:
        """Listen until cancelled, reconnecting (and waking every reader) when the connection drops."""
        delay = 0.1
        while True:
            try:
                conn: Connection = await self._connect()
            except Exception as exc:
                log.warning("event listener cannot connect (%s); retrying in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = 0.1
            self._lost.clear()
            conn.add_termination_listener(lambda _conn: self._lost.set())
            try:
                await conn.add_listener(self.events_channel, self._on_event)
                await conn.add_listener(self.queue_channel, self._on_queue)
                await conn.add_listener(self.control_channel, self._on_control)
                self._conn = conn
                self.ready.set()
                self._wake_all()  # anything missed while (re)connecting
                await self._lost.wait()
                log.warning("event listener lost its connection; reconnecting")
            finally:
                self._conn = None
                with contextlib.suppress(Exception):
                    conn.terminate()

    def _on_event(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        parts = payload.split("\t")
        if len(parts) != 4:
            return
        run_id, _seq, agent, session_id = parts
        for waker in self._runs.get(run_id, ()):
            waker.set()
        for waker in self._sessions.get((agent, session_id), ()):
            waker.set()

    def _on_queue(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        for callback in self.on_queue:
            callback(payload)

    def _on_control(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        for callback in self.on_control:
            callback(payload)

    def _wake_all(self) -> None:
        for wakers in (*self._runs.values(), *self._sessions.values()):
            for waker in wakers:
                waker.set()
        for callback in self.on_queue:
            callback("")

    @contextlib.contextmanager
    def watch(self, *, run_id: str | None = None, session: tuple[str, str] | None = None) -> Any:
        waker = asyncio.Event()
        table: dict[Any, set[asyncio.Event]] = self._runs if run_id is not None else self._sessions
        key: Any = run_id if run_id is not None else session
        table.setdefault(key, set()).add(waker)
        try:
            yield waker
        finally:
            wakers = table.get(key)
            if wakers is not None:
                wakers.discard(waker)
                if not wakers:
                    del table[key]


class EventLog:
    """Writes and reads the event rows (see module docs)."""

    def __init__(self, pool: Pool, queue: RunQueue, hub: EventHub, *, poll: float = 1.0) -> None:
        self.pool = pool
        self.queue = queue
        self.hub = hub
        self.poll = poll

    async def write(self, run_id: str, owner: str, agent: str, session_id: str, events: list[Event]) -> bool:
        """Append ``events`` (already numbered) if ``owner`` still owns the run; False otherwise.
        One statement (one round trip): the share lock on the run's row, the inserts, the notify."""
        if not events:
            return True
        written = await self.pool.fetchval(
            _WRITE,
            run_id,
            owner,
            agent,
            session_id,
            [e["seq"] for e in events],
            [e["stream"] for e in events],
            [e["ts"] for e in events],
            [json.dumps(e["data"]) for e in events],
            self.hub.events_channel,
            f"{run_id}\t{events[-1]['seq']}\t{agent}\t{session_id}",
        )
        return bool(written)

    async def end(
        self,
        run_id: str,
        owner: str,
        agent: str,
        session_id: str,
        final: Event,
        *,
        status: str,
        reason: str,
        result: dict[str, Any],
    ) -> bool:
        """Write the run's last event and mark it ended, in one statement, if still owned."""
        ended = await self.pool.fetchval(
            _END,
            run_id,
            owner,
            agent,
            session_id,
            final["seq"],
            final["ts"],
            json.dumps(final["data"]),
            status,
            reason,
            json.dumps(result),
            self.hub.events_channel,
            f"{run_id}\t{final['seq']}\t{agent}\t{session_id}",
        )
        return bool(ended)

    async def read_run(self, run_id: str, after_seq: int = 0, limit: int = 1000) -> list[Event]:
        rows = await self.pool.fetch(
            "SELECT seq, stream, ts, data FROM scaleout_events WHERE run_id = $1 AND seq > $2 "
            "ORDER BY seq LIMIT $3",
            run_id,
            after_seq,
            limit,
        )
        return [_event(run_id, r) for r in rows]

    async def read_session(
        self, agent: str, session_id: str, after_id: int = 0, limit: int = 1000
    ) -> list[tuple[int, Event]]:
        rows = await self.pool.fetch(
            "SELECT id, run_id, seq, stream, ts, data FROM scaleout_events WHERE agent = $1 "
            "AND session_id = $2 AND id > $3 ORDER BY id LIMIT $4",
            agent,
            session_id,
            after_id,
            limit,
        )
        return [(int(r["id"]), _event(r["run_id"], r)) for r in rows]

    async def follow_run(self, run_id: str, after_seq: int = 0) -> AsyncIterator[Event]:
        """Every event of the run after ``after_seq``, in order, live, ending with its last event.
        Raises :class:`~loopwright.errors.NotFoundError` for an unknown run."""
        await self.queue.get(run_id)
        last = after_seq
        with self.hub.watch(run_id=run_id) as waker:
            while True:
                waker.clear()
                events = await self.read_run(run_id, last)
                for event in events:
                    yield event
                    last = event["seq"]
                    if is_end(event):
                        return
                if events:
                    continue
                woken = await _wait(waker, self.poll)
                if not woken and (await self.queue.get(run_id)).finished:
                    for event in await self.read_run(run_id, last):
                        yield event
                    return

    async def follow_session(
        self, agent: str, session_id: str, after_id: int = 0
    ) -> AsyncIterator[tuple[int, Event]]:
        """Every event of the session's runs after cursor ``after_id``, in order, live, until the
        caller stops iterating. Each comes with its cursor (resume with it)."""
        last = after_id
        with self.hub.watch(session=(agent, session_id)) as waker:
            while True:
                waker.clear()
                found = await self.read_session(agent, session_id, last)
                for cursor, event in found:
                    yield cursor, event
                    last = cursor
                if not found:
                    await _wait(waker, self.poll)


async def _wait(waker: asyncio.Event, seconds: float) -> bool:
    try:
        async with asyncio.timeout(seconds):
            await waker.wait()
    except TimeoutError:
        return False
    return True
