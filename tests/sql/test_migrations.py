"""The migrations shipped in the package: from empty to head, down to nothing and back, and the
schema they build is exactly the ORM's."""

from __future__ import annotations

import asyncio

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect, select

from loopwright.sql import Database, current_revision, downgrade, head_revision, upgrade
from loopwright.sql.migrate import VERSION_TABLE
from loopwright.sql.models import Base, User, utcnow

TABLES = {
    "sessions",
    "session_entries",
    "run_reports",
    "users",
    "platform_links",
    "personas",
    "conversations",
    "messages",
    "token_logs",
    "file_records",
}


async def _tables(db: Database) -> set[str]:
    async with db.engine.connect() as conn:
        names = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
    return names - {VERSION_TABLE}


def _diff(conn: Connection) -> list[object]:
    context = MigrationContext.configure(conn, opts={"compare_type": True, "version_table": VERSION_TABLE})
    return [d for d in compare_metadata(context, Base.metadata) if not _is_version_table(d)]


def _is_version_table(diff: object) -> bool:
    return isinstance(diff, tuple) and diff[0] == "remove_table" and diff[1].name == VERSION_TABLE


async def test_upgrade_from_empty_builds_exactly_the_orm_schema(blank_database: Database) -> None:
    db = blank_database
    assert await current_revision(db.engine) is None
    assert await _tables(db) == set()
    await upgrade(db.engine)
    assert await current_revision(db.engine) == head_revision()
    assert await _tables(db) == TABLES
    async with db.engine.connect() as conn:
        assert await conn.run_sync(_diff) == []


async def test_downgrade_removes_everything_and_upgrade_restores_it(blank_database: Database) -> None:
    db = blank_database
    await db.migrate()
    await downgrade(db.engine, "base")
    assert await current_revision(db.engine) is None
    assert await _tables(db) == set()
    await db.migrate()
    assert await _tables(db) == TABLES
    async with db.transaction() as s:
        s.add(User(id="u1", budget_reset_at=utcnow()))
    async with db.transaction() as s:
        assert (await s.scalars(select(User.id))).all() == ["u1"]


async def test_upgrading_an_up_to_date_database_changes_nothing(database: Database) -> None:
    async with database.transaction() as s:
        s.add(User(id="kept", budget_reset_at=utcnow()))
    await database.migrate()
    async with database.transaction() as s:
        assert (await s.scalars(select(User.id))).all() == ["kept"]


async def test_concurrent_upgrades_run_one_after_the_other(blank_database: Database) -> None:
    """Several gateways starting at once on one fresh database (an advisory lock on PostgreSQL)."""
    if blank_database.dialect == "sqlite":
        await asyncio.gather(blank_database.migrate())  # one file, one process: nothing to race
    else:
        await asyncio.gather(*(blank_database.migrate() for _ in range(3)))
    assert await current_revision(blank_database.engine) == head_revision()
    assert await _tables(blank_database) == TABLES
