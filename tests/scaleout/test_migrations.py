"""The scale-out tables' own migrations: empty → head builds exactly the declared tables, down to
nothing and back; the core schema is untouched; SQLite is refused with a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect

from loopwright.errors import ConfigError
from loopwright.scaleout import current_revision, downgrade, head_revision, upgrade
from loopwright.scaleout._migrate import VERSION_TABLE
from loopwright.scaleout._tables import METADATA
from loopwright.sql import Database
from loopwright.sql import current_revision as core_revision
from loopwright.sql.migrate import VERSION_TABLE as CORE_VERSION_TABLE

SCALEOUT_TABLES = {"scaleout_runs", "scaleout_events", "scaleout_session_leases", "scaleout_approvals"}


async def _tables(db: Database) -> set[str]:
    async with db.engine.connect() as conn:
        return await conn.run_sync(lambda c: set(inspect(c).get_table_names()))


def _diff(conn: Connection) -> list[object]:
    context = MigrationContext.configure(conn, opts={"compare_type": True, "version_table": VERSION_TABLE})
    ignored = {VERSION_TABLE, CORE_VERSION_TABLE}
    return [
        d
        for d in compare_metadata(context, METADATA)
        if not (isinstance(d, tuple) and d[0] == "remove_table" and d[1].name not in SCALEOUT_TABLES)
        and not (isinstance(d, tuple) and d[0] == "remove_table" and d[1].name in ignored)
    ]


async def test_upgrade_builds_exactly_the_declared_tables_and_downgrade_removes_them(
    blank_db: Database,
) -> None:
    db = blank_db
    assert await current_revision(db) is None
    await upgrade(db)
    assert await current_revision(db) == head_revision()
    assert await _tables(db) == SCALEOUT_TABLES | {VERSION_TABLE}
    async with db.engine.connect() as conn:
        assert await conn.run_sync(_diff) == []
    await upgrade(db)  # already there: nothing to do
    assert await current_revision(db) == head_revision()

    await downgrade(db, "base")
    assert await current_revision(db) is None
    assert await _tables(db) == {VERSION_TABLE}
    await upgrade(db)
    assert await _tables(db) >= SCALEOUT_TABLES


async def test_core_and_scaleout_histories_are_separate(blank_db: Database) -> None:
    db = blank_db
    await db.migrate()
    core = await _tables(db)
    assert not core & SCALEOUT_TABLES
    await upgrade(db)
    await downgrade(db, "base")
    assert await _tables(db) == core | {VERSION_TABLE}, "the core tables must survive the scale-out downgrade"
    assert await core_revision(db.engine) is not None


async def test_sqlite_is_refused_before_anything_happens(tmp_path: Path) -> None:
    db = Database(tmp_path / "x.db")
    try:
        with pytest.raises(ConfigError, match="need PostgreSQL"):
            await upgrade(db)
    finally:
        await db.aclose()
    assert not (tmp_path / "x.db").exists()
