"""Scale-out: the shared run queue, the event log and the session-lock leases.

Revision ID: s0001
Revises: (none)
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "s0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "scaleout_runs",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("queue_seq", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("agent", sa.String(length=200), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("mode", sa.String(length=20), nullable=False),
        sa.Column("meta", postgresql.JSONB(), nullable=True),
        sa.Column("status", sa.String(length=10), server_default=sa.text("'queued'"), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("accepted_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("queue_deadline", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("stop_requested", sa.String(length=10), nullable=True),
        sa.Column("loop_run_id", sa.String(length=64), nullable=True),
        sa.Column("reason", sa.String(length=40), nullable=True),
        sa.Column("result", postgresql.JSONB(), nullable=True),
        sa.PrimaryKeyConstraint("run_id"),
        sa.UniqueConstraint("queue_seq"),
    )
    op.create_index(
        "ix_scaleout_runs_open",
        "scaleout_runs",
        ["agent", "session_id", "queue_seq"],
        postgresql_where=sa.text("status IN ('queued', 'running')"),
    )
    op.create_index(
        "ix_scaleout_runs_queued",
        "scaleout_runs",
        ["queue_seq"],
        postgresql_where=sa.text("status = 'queued'"),
    )
    op.create_index(
        "ix_scaleout_runs_lease",
        "scaleout_runs",
        ["lease_until"],
        postgresql_where=sa.text("status = 'running'"),
    )
    op.create_index("ix_scaleout_runs_key", "scaleout_runs", ["agent", "idempotency_key"])
    op.create_index("ix_scaleout_runs_ended", "scaleout_runs", ["ended_at"])
    op.create_table(
        "scaleout_events",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("agent", sa.String(length=200), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("stream", sa.String(length=20), nullable=False),
        sa.Column("ts", sa.BigInteger(), nullable=False),
        sa.Column("data", postgresql.JSONB(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["scaleout_runs.run_id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "seq"),
        sa.UniqueConstraint("id"),
    )
    op.create_index("ix_scaleout_events_session", "scaleout_events", ["agent", "session_id", "id"])
    op.create_table(
        "scaleout_session_leases",
        sa.Column("lock_key", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("backend_pid", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("lock_key"),
    )


def downgrade() -> None:
    op.drop_table("scaleout_session_leases")
    op.drop_index("ix_scaleout_events_session", table_name="scaleout_events")
    op.drop_table("scaleout_events")
    op.drop_index("ix_scaleout_runs_ended", table_name="scaleout_runs")
    op.drop_index("ix_scaleout_runs_key", table_name="scaleout_runs")
    op.drop_index("ix_scaleout_runs_lease", table_name="scaleout_runs")
    op.drop_index("ix_scaleout_runs_queued", table_name="scaleout_runs")
    op.drop_index("ix_scaleout_runs_open", table_name="scaleout_runs")
    op.drop_table("scaleout_runs")
