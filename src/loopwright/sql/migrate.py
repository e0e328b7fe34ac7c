"""Schema migrations, shipped inside the package and run from code (no ``alembic.ini`` needed).

``await upgrade(engine)`` brings a database to the newest schema (an empty one included) and is a
no-op when it is already there; ``await downgrade(engine, "base")`` removes every loopwright table.
Alembic's version row lives in its own table, ``loopwright_alembic_version``, so a database that
also holds an application's Alembic history is not confused. On PostgreSQL an advisory lock makes
concurrent upgrades (several gateways starting at once) run one after the other.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["MIGRATIONS_DIR", "VERSION_TABLE", "current_revision", "downgrade", "head_revision", "upgrade"]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "loopwright_alembic_version"
_LOCK_KEY = 0x6C6F6F70  # "loop": the advisory lock that serializes migrations on PostgreSQL


def _config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest revision this version of loopwright knows."""
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Migrate the database up to ``revision`` (default: the newest)."""
    async with engine.begin() as conn:
        await conn.run_sync(_run, "upgrade", revision)


async def downgrade(engine: AsyncEngine, revision: str = "base") -> None:
    """Migrate down to ``revision`` (default ``base``: no loopwright tables left)."""
    async with engine.begin() as conn:
        await conn.run_sync(_run, "downgrade", revision)


async def current_revision(engine: AsyncEngine) -> str | None:
    """The database's revision (``None``: never migrated)."""
    async with engine.connect() as conn:
        return await conn.run_sync(_current)


def _current(connection: Connection) -> str | None:
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def _run(connection: Connection, direction: str, revision: str) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
    config = _config(connection)
    if direction == "upgrade":
        command.upgrade(config, revision)
    else:
        command.downgrade(config, revision)
