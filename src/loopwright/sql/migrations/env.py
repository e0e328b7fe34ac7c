"""Alembic's environment for loopwright's own tables: run only through :mod:`loopwright.sql.migrate`,
which hands in an open connection (no alembic.ini, no URL here)."""

from __future__ import annotations

from alembic import context

from loopwright.sql.migrate import VERSION_TABLE
from loopwright.sql.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "loopwright's migrations run through loopwright.sql.migrate.upgrade(), not the alembic CLI"
    )

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    version_table=VERSION_TABLE,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
