"""The sweeper: what no live gateway will finish, some gateway does (every gateway runs one).

- **Expired leases.** A ``running`` run whose lease ran out belongs to a gateway that died (or lost
  the database for longer than a lease). Rows are taken ``FOR UPDATE SKIP LOCKED``, so two sweepers
  never judge the same run, and the row lock waits for any event write of the old owner still in
  flight. Then:

  - its message never reached the session's transcript (no user message with its ``request_id``):
    nothing of it ran, so it goes back to ``queued`` and runs again on any gateway, continuing its
    event numbering (its stream shows a second ``start``); after ``max_attempts`` starts it fails
    instead of crashing gateways forever;
  - it did reach the transcript: it is **reported failed** (code ``interrupted``), never run twice;
    the session's transcript is repaired by its next run like any interrupted run, and a call that
    waited for approval can still be continued from its checkpoint (``Agent.checkpoints()``).

  When the transcript cannot be checked (sessions kept outside this database), a started run is
  always reported failed: never run twice wins over never failing.
- **Queue timeouts.** A ``queue``-mode run still waiting after ``queue_timeout`` fails with code
  ``busy`` and a retry hint.
- **Retention.** Finished runs (and their events) older than ``retention`` are deleted.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from loopwright.scaleout._pg import Connection, Pool

__all__ = ["MAX_ATTEMPTS", "Sweeper"]

log = logging.getLogger("loopwright.scaleout")

MAX_ATTEMPTS = 3

_EXPIRED = """
SELECT r.run_id, r.agent, r.session_id, r.attempts, r.owner,
       (SELECT coalesce(max(e.seq), 0) FROM scaleout_events e WHERE e.run_id = r.run_id) AS last_seq
FROM scaleout_runs r WHERE r.status = 'running' AND r.lease_until < now()
ORDER BY r.queue_seq LIMIT 100 FOR UPDATE OF r SKIP LOCKED
"""
_TIMED_OUT = """
SELECT r.run_id, r.agent, r.session_id,
       (SELECT coalesce(max(e.seq), 0) FROM scaleout_events e WHERE e.run_id = r.run_id) AS last_seq
FROM scaleout_runs r WHERE r.status = 'queued' AND r.queue_deadline < now()
ORDER BY r.queue_seq LIMIT 100 FOR UPDATE OF r SKIP LOCKED
"""
_RECORDED = """
SELECT EXISTS (SELECT 1 FROM session_entries WHERE session_id = $1 AND kind = 'user'
               AND (data::jsonb -> 'meta' ->> 'request_id') = $2)
"""


class Sweeper:
    def __init__(
        self, pool: Pool, *, events_channel: str, queue_channel: str, retry_after: float = 1.0
    ) -> None:
        self.pool = pool
        self.events_channel = events_channel
        self.queue_channel = queue_channel
        self.retry_after = retry_after
        self.requeued = 0
        self.failed = 0

    async def sweep(self, *, retention: float | None = None) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await self._expired(conn)
        async with self.pool.acquire() as conn, conn.transaction():
            await self._timed_out(conn)
        if retention is not None:
            await self.pool.execute(
                "DELETE FROM scaleout_runs WHERE status IN ('ok', 'error') "
                "AND ended_at < now() - make_interval(secs => $1)",
                float(retention),
            )

    async def _expired(self, conn: Connection) -> None:
        rows = await conn.fetch(_EXPIRED)
        if not rows:
            return
        can_check = await conn.fetchval("SELECT to_regclass('session_entries') IS NOT NULL")
        for row in rows:
            run_id, owner = row["run_id"], row["owner"]
            recorded = True
            if can_check:
                recorded = bool(await conn.fetchval(_RECORDED, row["session_id"], run_id))
            if not recorded and row["attempts"] < MAX_ATTEMPTS:
                await conn.execute(
                    "UPDATE scaleout_runs SET status = 'queued', owner = NULL, lease_until = NULL "
                    "WHERE run_id = $1",
                    run_id,
                )
                await conn.execute("SELECT pg_notify($1, $2)", self.queue_channel, row["agent"])
                log.warning(
                    "run %s of session %s: gateway %r stopped renewing its lease before the message was "
                    "recorded; queued again",
                    run_id,
                    row["session_id"],
                    owner,
                )
                self.requeued += 1
                continue
            if recorded:
                message = (
                    f"the gateway running it ({owner}) stopped while it ran; the session is repaired at "
                    "its next run and the message is not run again"
                )
            else:
                message = f"started {row['attempts']} times on gateways that died before it was recorded"
            error = {"code": "interrupted", "type": "RunError", "message": message}
            await self._fail(conn, row, "interrupted", error)
            log.warning("run %s of session %s: %s", run_id, row["session_id"], message)

    async def _timed_out(self, conn: Connection) -> None:
        for row in await conn.fetch(_TIMED_OUT):
            error = {
                "code": "busy",
                "type": "SessionBusyError",
                "message": f"session {row['session_id']!r} stayed busy past the queue timeout; retry later",
                "retryAfterMs": round(self.retry_after * 1000),
            }
            await self._fail(conn, row, "busy", error)

    async def _fail(self, conn: Connection, row: Any, reason: str, error: dict[str, Any]) -> None:
        """End the run with an error event (after a start event if it had none)."""
        run_id, seq = row["run_id"], int(row["last_seq"])
        now = round(time.time() * 1000)
        events: list[tuple[str, dict[str, Any]]] = []
        if seq == 0:
            events.append(
                ("lifecycle", {"phase": "start", "sessionId": row["session_id"], "agent": row["agent"]})
            )
        result = {"text": "", "error": error}
        events.append(("lifecycle", {"phase": "error", "status": "error", "reason": reason, **result}))
        for stream, data in events:
            seq += 1
            await conn.execute(
                "INSERT INTO scaleout_events (run_id, seq, agent, session_id, stream, ts, data) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)",
                run_id,
                seq,
                row["agent"],
                row["session_id"],
                stream,
                now,
                json.dumps(data),
            )
        await conn.execute(
            "UPDATE scaleout_runs SET status = 'error', reason = $2, result = $3::jsonb, ended_at = now(), "
            "started_at = coalesce(started_at, now()), lease_until = NULL WHERE run_id = $1",
            run_id,
            reason,
            json.dumps(result),
        )
        await conn.execute(
            "SELECT pg_notify($1, $2)",
            self.events_channel,
            f"{run_id}\t{seq}\t{row['agent']}\t{row['session_id']}",
        )
        self.failed += 1
