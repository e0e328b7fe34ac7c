"""Databases for tests: an SQLite file, and PostgreSQL in a fresh schema per test (dropped after).

PostgreSQL runs when ``LOOPWRIGHT_TEST_POSTGRES_URL`` is set (``.ci/run`` sets it); otherwise those
tests are skipped with that reason. A schema per test keeps concurrent test runs apart.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from sqlalchemy import text

from loopwright.sql import Database

#: Read at import: the suite's autouse fixture clears LOOPWRIGHT_* variables before each test.
POSTGRES_URL = os.environ.get("LOOPWRIGHT_TEST_POSTGRES_URL")
BACKENDS = ["sqlite", "postgres"]
SKIP_REASON = (
    "PostgreSQL tests need LOOPWRIGHT_TEST_POSTGRES_URL "
    "(e.g. postgresql://postgres@127.0.0.1:5432/test; .ci/run sets it)"
)


@asynccontextmanager
async def open_database(backend: str, folder: Path, *, migrate: bool = True) -> AsyncIterator[Database]:
    """A database of ``backend`` for one test, migrated unless ``migrate=False``."""
    if backend == "sqlite":
        db = Database(folder / "test.db")
        try:
            if migrate:
                await db.migrate()
            yield db
        finally:
            await db.aclose()
        return
    if not POSTGRES_URL:
        pytest.skip(SKIP_REASON)
    schema = f"lwtest_{uuid.uuid4().hex[:16]}"
    admin = Database(POSTGRES_URL)
    try:
        async with admin.engine.begin() as conn:
            await conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        db = Database(POSTGRES_URL, schema=schema)
        try:
            if migrate:
                await db.migrate()
            yield db
        finally:
            await db.aclose()
            async with admin.engine.begin() as conn:
                await conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    finally:
        await admin.aclose()


def database_url_for_cli(backend: str, folder: Path) -> Iterator[str]:
    """A sync fixture body: the URL of a fresh database (a new schema on PostgreSQL, dropped after),
    for tests that drive the command line (which runs its own event loop)."""
    if backend == "sqlite":
        yield str(folder / "cli.db")
        return
    if not POSTGRES_URL:
        pytest.skip(SKIP_REASON)
    schema = f"lwtest_{uuid.uuid4().hex[:16]}"

    async def run(statement: str) -> None:
        admin = Database(POSTGRES_URL)
        try:
            async with admin.engine.begin() as conn:
                await conn.execute(text(statement))
        finally:
            await admin.aclose()

    asyncio.run(run(f'CREATE SCHEMA "{schema}"'))
    try:
        joiner = "&" if "?" in POSTGRES_URL else "?"
        yield f"{POSTGRES_URL}{joiner}schema={schema}"
    finally:
        asyncio.run(run(f'DROP SCHEMA "{schema}" CASCADE'))
