"""Pending approvals shared by every gateway: rows of ``scaleout_approvals``.

A tool call waits for its decision in the process that runs it (its agent's
:class:`~loopwright.approvals.ApprovalBoard`); this table makes the wait visible and decidable from
any gateway:

- the worker running the run **opens** a row when the agent announces ``ApprovalRequested`` (before
  the run starts waiting, so a decision can never precede its row) and **closes** it when
  ``ApprovalResolved`` arrives, whoever decided (the API, an approver, the timeout);
- any gateway **decides** a row: ``decision`` is written only while it is still empty (one decision
  wins; a second one, or one for a closed row, finds nothing: not found), then ``NOTIFY`` on the
  control channel (``approval <owner>``) wakes the owner;
- the owner **applies** decided rows it holds (on the notification, and by polling while any call
  of its runs waits, for a missed one) through ``agent.resolve_approval``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from loopwright.approvals import ApprovalDecision, ApprovalRequest
from loopwright.errors import NotFoundError
from loopwright.scaleout._pg import Pool, Record

__all__ = ["ApprovalTable", "Decided"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Decided:
    """A decision written into a row, for its owner to apply."""

    run_id: str
    approval_id: str
    agent: str
    owner: str
    decision: ApprovalDecision


_HELD = (
    "EXISTS (SELECT 1 FROM scaleout_runs r WHERE r.run_id = a.run_id AND r.status = 'running' "
    "AND r.owner = a.owner)"
)
"""A row whose run still runs on the gateway that opened it (a dead gateway's rows are not shown: the
gateway that takes the run over asks again)."""


def _when(value: str) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


class ApprovalTable:
    """The shared pending approvals, on a pool of the deployment's database (see module docs)."""

    def __init__(self, pool: Pool, *, notify_control: str) -> None:
        self.pool = pool
        self._control_channel = notify_control

    async def open(self, run_id: str, agent: str, owner: str, request: ApprovalRequest) -> None:
        """Record a call of ``run_id`` (a shared run ``owner`` executes) waiting for a decision."""
        requested = _when(request.requested_at)
        await self.pool.execute(
            "INSERT INTO scaleout_approvals (run_id, approval_id, loop_run_id, session_id, agent, tool, "
            "request, reason, requested_at, expires_at, owner) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, coalesce($9, now()), $10, $11) "
            "ON CONFLICT (run_id, approval_id) DO UPDATE SET loop_run_id = EXCLUDED.loop_run_id, "
            "request = EXCLUDED.request, reason = EXCLUDED.reason, requested_at = EXCLUDED.requested_at, "
            "expires_at = EXCLUDED.expires_at, owner = EXCLUDED.owner, decision = NULL, result = NULL, "
            "note = NULL, decided_at = NULL",
            run_id,
            request.approval_id,
            request.run_id,
            request.session_id,
            agent,
            request.tool,
            json.dumps(request.to_dict()),
            request.reason,
            requested,
            _when(request.expires_at),
            owner,
        )

    async def close(self, run_id: str, approval_id: str) -> None:
        """The call got its decision (whoever gave it): nothing waits any more."""
        await self.pool.execute(
            "DELETE FROM scaleout_approvals WHERE run_id = $1 AND approval_id = $2", run_id, approval_id
        )

    async def close_run(self, run_id: str, owner: str) -> None:
        """Every row ``owner`` left for ``run_id`` (the run ended or was lost while a call waited)."""
        await self.pool.execute(
            "DELETE FROM scaleout_approvals WHERE run_id = $1 AND owner = $2", run_id, owner
        )

    async def pending(self, agents: list[str], session_id: str | None = None) -> list[dict[str, Any]]:
        """Undecided calls of ``agents`` (every gateway's), oldest first, as ``approvals.list`` shows
        them: the request's fields, ``agent``, and the shared ``runId``."""
        rows = await self.pool.fetch(
            f"SELECT a.run_id, a.agent, a.request FROM scaleout_approvals a WHERE a.decision IS NULL "
            f"AND a.agent = ANY($1::text[]) AND ($2::text IS NULL OR a.session_id = $2) AND {_HELD} "
            "ORDER BY a.requested_at, a.approval_id",
            agents,
            session_id,
        )
        return [{**json.loads(r["request"]), "agent": r["agent"], "runId": r["run_id"]} for r in rows]

    async def decide(self, approval_id: str, decision: ApprovalDecision, agents: list[str]) -> Decided:
        """Write ``decision`` into the oldest undecided row of ``approval_id`` among ``agents`` and
        wake its owner. Raises :class:`~loopwright.errors.NotFoundError` when none waits (unknown,
        decided already or closed)."""
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "UPDATE scaleout_approvals a SET decision = $2, result = $3, note = $4, decided_at = now() "
                "FROM (SELECT a.run_id, a.approval_id FROM scaleout_approvals a WHERE a.approval_id = $1 "
                f"AND a.decision IS NULL AND a.agent = ANY($5::text[]) AND {_HELD} "
                "ORDER BY a.requested_at LIMIT 1 FOR UPDATE OF a) c WHERE a.run_id = c.run_id AND a.approval_id = c.approval_id "
                "AND a.decision IS NULL RETURNING a.run_id, a.approval_id, a.agent, a.owner, a.decision, "
                "a.result, a.note",
                approval_id,
                decision.decision,
                decision.result,
                decision.note,
                agents,
            )
            if row is None:
                raise NotFoundError("pending approval", approval_id)
            await conn.execute("SELECT pg_notify($1, $2)", self._control_channel, f"approval {row['owner']}")
        return _decided(row)

    async def decided(self, owner: str) -> list[Decided]:
        """Rows ``owner`` holds that have a decision it has not applied yet."""
        rows = await self.pool.fetch(
            "SELECT run_id, approval_id, agent, owner, decision, result, note FROM scaleout_approvals "
            "WHERE owner = $1 AND decision IS NOT NULL ORDER BY decided_at",
            owner,
        )
        return [_decided(r) for r in rows]


def _decided(row: Record) -> Decided:
    return Decided(
        run_id=row["run_id"],
        approval_id=row["approval_id"],
        agent=row["agent"],
        owner=row["owner"],
        decision=ApprovalDecision(row["decision"], row["result"], row["note"]),
    )
