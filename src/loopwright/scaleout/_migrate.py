"""The scale-out tables' migrations, run from code like :mod:`loopwright.sql.migrate`.

Their Alembic history is separate (version table ``loopwright_scaleout_alembic_version``) so the
core schema, which SQLite deployments share, never depends on PostgreSQL-only tables. Every gateway
runs :func:`upgrade` at start; an advisory lock makes simultaneous starts take turns.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

from loopwright.errors import ConfigError
from loopwright.sql._database import Database

__all__ = ["MIGRATIONS_DIR", "VERSION_TABLE", "current_revision", "downgrade", "head_revision", "upgrade"]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "loopwright_scaleout_alembic_version"
_LOCK_KEY = 0x6C6F6F71  # next to loopwright.sql.migrate's key: "loop" + 1


def _config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def _check(database: Database) -> None:
    if database.dialect != "postgresql":
        raise ConfigError(
            f"the scale-out tables need PostgreSQL, not {database.dialect} ({database.display_url!r})"
        )


async def upgrade(database: Database, revision: str = "head") -> None:
    """Create or upgrade the scale-out tables (the core schema: ``await database.migrate()``)."""
    _check(database)
    async with database.engine.begin() as conn:
        await conn.run_sync(_run, "upgrade", revision)


async def downgrade(database: Database, revision: str = "base") -> None:
    """Migrate down to ``revision`` (default ``base``: no scale-out table left)."""
    _check(database)
    async with database.engine.begin() as conn:
        await conn.run_sync(_run, "downgrade", revision)


async def current_revision(database: Database) -> str | None:
    _check(database)
    async with database.engine.connect() as conn:
        return await conn.run_sync(_current)


def _current(connection: Connection) -> str | None:
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def _run(connection: Connection, direction: str, revision: str) -> None:
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
    config = _config(connection)
    if direction == "upgrade":
        command.upgrade(config, revision)
    else:
        command.downgrade(config, revision)
