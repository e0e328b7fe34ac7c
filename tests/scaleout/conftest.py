"""Scale-out tests run on PostgreSQL only, each in a fresh schema (dropped after); without
``LOOPWRIGHT_TEST_POSTGRES_URL`` they are skipped with that reason."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from loopwright.sql import Database
from tests.scaleout.support import close_open_locks, fresh_schema, fresh_schema_sync, postgres_url


@pytest.fixture
async def blank_db() -> AsyncIterator[Database]:
    """A PostgreSQL database in a new, empty schema."""
    async with fresh_schema(migrate=False) as db:
        yield db


@pytest.fixture
async def db() -> AsyncIterator[Database]:
    """A PostgreSQL database in a new schema with the core and scale-out tables; the lock tables of
    the test's agents are closed before it is dropped."""
    async with fresh_schema(migrate=True) as database:
        try:
            yield database
        finally:
            await close_open_locks()


@pytest.fixture
def db_url() -> Iterator[str]:
    """The URL (``?schema=``) of a new migrated schema, for tests that start processes."""
    postgres_url()
    yield from fresh_schema_sync()
