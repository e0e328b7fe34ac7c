"""Alembic's environment for the scale-out tables: run only through :mod:`loopwright.scaleout._migrate`."""

from __future__ import annotations

from alembic import context

from loopwright.scaleout._migrate import VERSION_TABLE
from loopwright.scaleout._tables import METADATA

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "the scale-out migrations run through loopwright.scaleout.migrate(), not the alembic CLI"
    )

context.configure(
    connection=connection,
    target_metadata=METADATA,
    version_table=VERSION_TABLE,
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
