"""The scale-out tables (PostgreSQL only), in their own metadata with their own migrations.

- ``scaleout_runs``: every accepted message, from ``queued`` through ``running`` (owned by one
  gateway under a lease it renews) to ``ok`` / ``error``. The queue *is* this table: workers claim the
  oldest runnable row with ``FOR UPDATE SKIP LOCKED``.
- ``scaleout_events``: every stream event of every run, numbered per run (``seq`` 1, 2, 3…). The rows
  are the truth; ``NOTIFY`` only wakes readers.
- ``scaleout_session_leases``: who holds each session's advisory lock, until when (the lockTimeout
  lease), and on which database backend, so an expired holder can be cut off.
- ``scaleout_approvals``: tool calls waiting for a decision, on whichever gateway runs them, so any
  gateway lists and decides them; the owner applies the decision written into the row.

They live apart from :mod:`loopwright.sql.models` because they only exist where several gateways
share PostgreSQL: the embedded SQLite database never gets them.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

__all__ = ["APPROVALS", "EVENTS", "LEASES", "METADATA", "RUNS", "STATUSES"]

METADATA = MetaData()
STATUSES = ("queued", "running", "ok", "error")

RUNS = Table(
    "scaleout_runs",
    METADATA,
    Column("run_id", String(64), primary_key=True),
    Column("queue_seq", BigInteger, Identity(always=True), nullable=False, unique=True),
    Column("agent", String(200), nullable=False),
    Column("session_id", String(128), nullable=False),
    Column("message", Text, nullable=False),
    Column("mode", String(20), nullable=False),
    Column("meta", JSONB, nullable=True),
    Column("status", String(10), nullable=False, server_default=text("'queued'")),
    Column("idempotency_key", String(200), nullable=True),
    Column("accepted_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("queue_deadline", DateTime(timezone=True), nullable=True),
    Column("started_at", DateTime(timezone=True), nullable=True),
    Column("ended_at", DateTime(timezone=True), nullable=True),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("owner", String(200), nullable=True),
    Column("lease_until", DateTime(timezone=True), nullable=True),
    Column("stop_requested", String(10), nullable=True),
    Column("loop_run_id", String(64), nullable=True),
    Column("reason", String(40), nullable=True),
    Column("result", JSONB, nullable=True),
    Index(
        "ix_scaleout_runs_open",
        "agent",
        "session_id",
        "queue_seq",
        postgresql_where=text("status IN ('queued', 'running')"),
    ),
    Index("ix_scaleout_runs_queued", "queue_seq", postgresql_where=text("status = 'queued'")),
    Index("ix_scaleout_runs_lease", "lease_until", postgresql_where=text("status = 'running'")),
    Index("ix_scaleout_runs_key", "agent", "idempotency_key"),
    Index("ix_scaleout_runs_ended", "ended_at"),
)

EVENTS = Table(
    "scaleout_events",
    METADATA,
    Column("run_id", String(64), ForeignKey("scaleout_runs.run_id", ondelete="CASCADE"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("id", BigInteger, Identity(always=True), nullable=False, unique=True),
    Column("agent", String(200), nullable=False),
    Column("session_id", String(128), nullable=False),
    Column("stream", String(20), nullable=False),
    Column("ts", BigInteger, nullable=False),
    Column("data", JSONB, nullable=False),
    PrimaryKeyConstraint("run_id", "seq"),
    Index("ix_scaleout_events_session", "agent", "session_id", "id"),
)

LEASES = Table(
    "scaleout_session_leases",
    METADATA,
    Column("lock_key", BigInteger, primary_key=True, autoincrement=False),
    Column("session_id", String(128), nullable=False),
    Column("run_id", String(64), nullable=False),
    Column("backend_pid", Integer, nullable=False),
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("acquired_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)

APPROVALS = Table(
    "scaleout_approvals",
    METADATA,
    Column("run_id", String(64), ForeignKey("scaleout_runs.run_id", ondelete="CASCADE"), nullable=False),
    Column("approval_id", String(200), nullable=False),
    Column("loop_run_id", String(64), nullable=False),
    Column("session_id", String(128), nullable=False),
    Column("agent", String(200), nullable=False),
    Column("tool", String(200), nullable=False),
    Column("request", JSONB, nullable=False),
    Column("reason", Text, nullable=False, server_default=text("''")),
    Column("requested_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=True),
    Column("owner", String(200), nullable=False),
    Column("decision", String(10), nullable=True),
    Column("result", Text, nullable=True),
    Column("note", Text, nullable=True),
    Column("decided_at", DateTime(timezone=True), nullable=True),
    PrimaryKeyConstraint("run_id", "approval_id"),
    Index("ix_scaleout_approvals_id", "approval_id"),
    Index("ix_scaleout_approvals_owner", "owner", postgresql_where=text("decision IS NOT NULL")),
)
