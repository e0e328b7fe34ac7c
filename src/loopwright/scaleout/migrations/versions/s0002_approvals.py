"""Scale-out: pending approvals shared by every gateway.

Revision ID: s0002
Revises: s0001
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "s0002"
down_revision: str | None = "s0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "scaleout_approvals",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("approval_id", sa.String(length=200), nullable=False),
        sa.Column("loop_run_id", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("agent", sa.String(length=200), nullable=False),
        sa.Column("tool", sa.String(length=200), nullable=False),
        sa.Column("request", postgresql.JSONB(), nullable=False),
        sa.Column("reason", sa.Text(), server_default=sa.text("''"), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("owner", sa.String(length=200), nullable=False),
        sa.Column("decision", sa.String(length=10), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["scaleout_runs.run_id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "approval_id"),
    )
    op.create_index("ix_scaleout_approvals_id", "scaleout_approvals", ["approval_id"])
    op.create_index(
        "ix_scaleout_approvals_owner",
        "scaleout_approvals",
        ["owner"],
        postgresql_where=sa.text("decision IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_scaleout_approvals_owner", table_name="scaleout_approvals")
    op.drop_index("ix_scaleout_approvals_id", table_name="scaleout_approvals")
    op.drop_table("scaleout_approvals")
