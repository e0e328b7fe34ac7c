"""The shared run queue: every accepted message is a row of ``scaleout_runs``.

**Accepting** (:meth:`RunQueue.enqueue`, any gateway) runs in one transaction under an advisory
transaction lock on the (agent, session) pair — and first on the idempotency key, when there is one
— so the queue mode and depth are judged on what every gateway has accepted, never on a stale count:

- ``drop``: refused (:class:`QueueRefused`, ``kind="drop"``) while the session has a run queued or
  running;
- ``queue``: refused (``kind="depth"``) when ``max_depth`` runs already wait behind the running one;
  a run still queued after ``queue_timeout`` fails with code ``busy`` (the sweeper does it);
- ``interrupt``: the session's running run is asked to stop (on whichever gateway runs it), then this
  one queues;
- ``followup``, ``collect``, ``steer``: queue as the next turn, without depth limit or timeout.
  (Merging collected messages and steering a run that executes on another gateway are not done
  across gateways: such messages run as separate next turns.)

**Claiming** (:meth:`RunQueue.claim`, any worker): the oldest queued run whose session has nothing
older queued and nothing running, locked ``FOR UPDATE SKIP LOCKED`` and marked ``running`` with the
worker as owner and a lease, in one statement. Workers never block each other, and a session never
has two runs claimed: a later run is only eligible once every earlier one has ended.

**Ownership.** Everything a worker writes about a run (events, the end) is conditional on the row
still being ``running`` and owned by it, under a row lock; so once the sweeper has taken a run away
from a dead (or cut-off) worker, nothing that worker still does can land.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from loopwright.errors import NotFoundError, SessionBusyError
from loopwright.scaleout._pg import Connection, Pool, Record, lock_key

__all__ = ["Accepted", "Claimed", "QueueRefused", "RunInfo", "RunQueue"]

Status = Literal["queued", "running", "ok", "error"]
_TERMINAL = ("ok", "error")


class QueueRefused(SessionBusyError):
    """A message the session's queue mode or depth refuses (``kind``: ``drop`` or ``depth``)."""

    def __init__(
        self, session_id: str, kind: Literal["drop", "depth"], reason: str, retry_after: float
    ) -> None:
        super().__init__(session_id, reason, retry_after=retry_after)
        self.kind = kind


@dataclass(frozen=True, slots=True, kw_only=True)
class Accepted:
    run_id: str
    session_id: str
    accepted_at: str
    repeated: bool = False
    """The idempotency key was seen in the last ``idempotency_ttl`` seconds: the earlier run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Claimed:
    """A run a worker now owns."""

    run_id: str
    agent: str
    session_id: str
    message: str
    mode: str
    meta: dict[str, Any] | None
    attempts: int
    last_seq: int
    """The run's last event so far (a run resumed after a dead gateway continues its numbering)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    run_id: str
    agent: str
    session_id: str
    status: Status
    mode: str
    accepted_at: str
    started_at: str | None
    ended_at: str | None
    attempts: int
    owner: str | None
    reason: str | None
    result: dict[str, Any] | None

    @property
    def finished(self) -> bool:
        return self.status in _TERMINAL

    def wait_result(self) -> dict[str, Any]:
        """What ``agent.wait`` answers (status ``timeout`` while the run has not ended)."""
        out: dict[str, Any] = {
            "runId": self.run_id,
            "sessionId": self.session_id,
            "agent": self.agent,
            "status": self.status if self.finished else "timeout",
            "acceptedAt": self.accepted_at,
            "startedAt": self.started_at,
            "endedAt": self.ended_at,
        }
        if self.finished:
            out["reason"] = self.reason
            out.update(self.result or {})
        return out


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


_COLUMNS = "run_id, agent, session_id, status, mode, accepted_at, started_at, ended_at, attempts, owner, reason, result"

_CLAIM = """
WITH c AS (
    SELECT r.run_id FROM scaleout_runs r
    WHERE r.status = 'queued' AND r.agent = ANY($1::text[])
      AND NOT EXISTS (
          SELECT 1 FROM scaleout_runs x
          WHERE x.agent = r.agent AND x.session_id = r.session_id AND x.run_id <> r.run_id
            AND (x.status = 'running' OR (x.status = 'queued' AND x.queue_seq < r.queue_seq)))
    ORDER BY r.queue_seq
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE scaleout_runs r
SET status = 'running', owner = $3, lease_until = now() + make_interval(secs => $4),
    started_at = coalesce(r.started_at, now()), attempts = r.attempts + 1, stop_requested = NULL
FROM c WHERE r.run_id = c.run_id
RETURNING r.run_id, r.agent, r.session_id, r.message, r.mode, r.meta, r.attempts,
    (SELECT coalesce(max(e.seq), 0) FROM scaleout_events e WHERE e.run_id = r.run_id) AS last_seq
"""


class RunQueue:
    """The queue and run records, on a pool of the deployment's database (see module docs)."""

    def __init__(self, pool: Pool, *, namespace: str, notify_queue: str, notify_control: str) -> None:
        self.pool = pool
        self._namespace = namespace
        self._queue_channel = notify_queue
        self._control_channel = notify_control

    # --- accepting --------------------------------------------------------------------------------

    async def enqueue(
        self,
        *,
        run_id: str,
        agent: str,
        session_id: str,
        message: str,
        mode: str,
        max_depth: int,
        queue_timeout: float | None = None,
        meta: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        idempotency_ttl: float = 600.0,
        retry_after: float = 1.0,
    ) -> Accepted:
        """Accept a message (committed when this returns) or refuse it (:class:`QueueRefused`)."""
        async with self.pool.acquire() as conn, conn.transaction():
            if idempotency_key is not None:
                await conn.execute(
                    "SELECT pg_advisory_xact_lock($1)",
                    lock_key(self._namespace, f"key\0{agent}\0{idempotency_key}"),
                )
                row = await conn.fetchrow(
                    "SELECT run_id, session_id, accepted_at FROM scaleout_runs WHERE agent = $1 "
                    "AND idempotency_key = $2 AND accepted_at > now() - make_interval(secs => $3) "
                    "ORDER BY accepted_at DESC LIMIT 1",
                    agent,
                    idempotency_key,
                    float(idempotency_ttl),
                )
                if row is not None:
                    return Accepted(
                        run_id=row["run_id"],
                        session_id=row["session_id"],
                        accepted_at=iso(row["accepted_at"]) or "",
                        repeated=True,
                    )
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1)", lock_key(self._namespace, f"queue\0{agent}\0{session_id}")
            )
            open_runs = int(
                await conn.fetchval(
                    "SELECT count(*) FROM scaleout_runs WHERE agent = $1 AND session_id = $2 "
                    "AND status IN ('queued', 'running')",
                    agent,
                    session_id,
                )
            )
            if mode == "drop" and open_runs:
                raise QueueRefused(
                    session_id, "drop", "a run is in progress and the queue mode is 'drop'", retry_after
                )
            if mode == "queue" and open_runs > max_depth:
                raise QueueRefused(
                    session_id,
                    "depth",
                    f"{open_runs - 1} message(s) already wait, the queue depth ({max_depth})",
                    retry_after,
                )
            if mode == "interrupt" and open_runs:
                await self._request_stop(
                    conn, "interrupt", "agent = $1 AND session_id = $2", agent, session_id
                )
            deadline = queue_timeout if mode == "queue" else None
            accepted = await conn.fetchval(
                "INSERT INTO scaleout_runs (run_id, agent, session_id, message, mode, meta, "
                "idempotency_key, queue_deadline) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, "
                "CASE WHEN $8::float8 IS NULL THEN NULL ELSE now() + make_interval(secs => $8::float8) END) "
                "RETURNING accepted_at",
                run_id,
                agent,
                session_id,
                message,
                mode,
                None if meta is None else json.dumps(meta),
                idempotency_key,
                deadline,
            )
            await conn.execute("SELECT pg_notify($1, $2)", self._queue_channel, agent)
        return Accepted(run_id=run_id, session_id=session_id, accepted_at=iso(accepted) or "")

    # --- working ----------------------------------------------------------------------------------

    async def claim(self, agents: list[str], owner: str, *, lease: float, limit: int = 1) -> list[Claimed]:
        """Take up to ``limit`` runnable runs (oldest first) for ``owner``; see module docs."""
        rows = await self.pool.fetch(_CLAIM, agents, limit, owner, float(lease))
        return [
            Claimed(
                run_id=r["run_id"],
                agent=r["agent"],
                session_id=r["session_id"],
                message=r["message"],
                mode=r["mode"],
                meta=None if r["meta"] is None else json.loads(r["meta"]),
                attempts=r["attempts"],
                last_seq=int(r["last_seq"]),
            )
            for r in rows
        ]

    async def heartbeat(
        self, owner: str, run_ids: list[str], *, lease: float
    ) -> tuple[set[str], dict[str, str]]:
        """Renew the lease of ``run_ids`` (runs ``owner`` is executing right now: a run whose
        execution failed here is not renewed, so the sweeper ends it). Returns (runs still owned,
        runs asked to stop: ``stop`` or ``interrupt`` by run id)."""
        rows = await self.pool.fetch(
            "UPDATE scaleout_runs SET lease_until = now() + make_interval(secs => $3) "
            "WHERE owner = $1 AND run_id = ANY($2::text[]) AND status = 'running' "
            "RETURNING run_id, stop_requested",
            owner,
            run_ids,
            float(lease),
        )
        return {r["run_id"] for r in rows}, {
            r["run_id"]: r["stop_requested"] for r in rows if r["stop_requested"]
        }

    async def request_stop(
        self, *, run_id: str | None = None, agent: str | None = None, session_id: str | None = None
    ) -> int:
        """Ask running runs to stop after their current step, on whichever gateway runs them."""
        if run_id is not None:
            where, args = "run_id = $1", [run_id]
        elif agent is not None and session_id is not None:
            where, args = "agent = $1 AND session_id = $2", [agent, session_id]
        elif agent is not None:
            where, args = "agent = $1", [agent]
        else:
            where, args = "TRUE", []
        async with self.pool.acquire() as conn, conn.transaction():
            return await self._request_stop(conn, "stop", where, *args)

    async def _request_stop(self, conn: Connection, verb: str, where: str, *args: Any) -> int:
        """``stop``: after the current step; ``interrupt``: now, the step in flight cut short (an
        interrupt already asked is never weakened to a stop)."""
        assert verb in ("stop", "interrupt")  # a constant of this module, put into the statement
        rows = await conn.fetch(
            f"UPDATE scaleout_runs SET stop_requested = CASE WHEN stop_requested = 'interrupt' "
            f"THEN 'interrupt' ELSE '{verb}' END WHERE status = 'running' AND {where} RETURNING run_id",
            *args,
        )
        for row in rows:
            await conn.execute("SELECT pg_notify($1, $2)", self._control_channel, f"{verb} {row['run_id']}")
        return len(rows)

    # --- reading ----------------------------------------------------------------------------------

    async def get(self, run_id: str) -> RunInfo:
        row = await self.pool.fetchrow(f"SELECT {_COLUMNS} FROM scaleout_runs WHERE run_id = $1", run_id)
        if row is None:
            raise NotFoundError("run", run_id)
        return _info(row)

    async def session_runs(self, agent: str, session_id: str) -> list[RunInfo]:
        rows = await self.pool.fetch(
            f"SELECT {_COLUMNS} FROM scaleout_runs WHERE agent = $1 AND session_id = $2 ORDER BY queue_seq",
            agent,
            session_id,
        )
        return [_info(r) for r in rows]

    async def counts(self) -> dict[str, int]:
        rows = await self.pool.fetch("SELECT status, count(*) AS n FROM scaleout_runs GROUP BY status")
        return {r["status"]: int(r["n"]) for r in rows}


def _info(row: Record) -> RunInfo:
    result = row["result"]
    return RunInfo(
        run_id=row["run_id"],
        agent=row["agent"],
        session_id=row["session_id"],
        status=row["status"],
        mode=row["mode"],
        accepted_at=iso(row["accepted_at"]) or "",
        started_at=iso(row["started_at"]),
        ended_at=iso(row["ended_at"]),
        attempts=row["attempts"],
        owner=row["owner"],
        reason=row["reason"],
        result=None if result is None else json.loads(result),
    )
