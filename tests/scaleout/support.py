"""Shared helpers of the scale-out tests: schemas, agents on PostgreSQL, waiting on conditions."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from sqlalchemy import text

from loopwright import Agent
from loopwright.lanes.postgres import PostgresSessionLocks
from loopwright.scaleout import migrate
from loopwright.sessions.sql import SQLSessionStore
from loopwright.sql import Database

#: Read at import: the suite's autouse fixture clears LOOPWRIGHT_* variables before each test.
POSTGRES_URL = os.environ.get("LOOPWRIGHT_TEST_POSTGRES_URL")
SKIP_REASON = (
    "scale-out tests need PostgreSQL: set LOOPWRIGHT_TEST_POSTGRES_URL "
    "(e.g. postgresql://postgres@127.0.0.1:5432/test; .ci/run sets it)"
)


def postgres_url() -> str:
    if not POSTGRES_URL:
        pytest.skip(SKIP_REASON)
    return POSTGRES_URL


async def _admin(statement: str) -> None:
    admin = Database(postgres_url())
    try:
        async with admin.engine.begin() as conn:
            await conn.execute(text(statement))
    finally:
        await admin.aclose()


@asynccontextmanager
async def fresh_schema(*, migrate: bool) -> AsyncIterator[Database]:
    url = postgres_url()
    schema = f"lwscale_{uuid.uuid4().hex[:16]}"
    await _admin(f'CREATE SCHEMA "{schema}"')
    db = Database(url, schema=schema)
    try:
        if migrate:
            await _migrate(db)
        yield db
    finally:
        await db.aclose()
        await _admin(f'DROP SCHEMA "{schema}" CASCADE')


async def _migrate(db: Database) -> None:
    await migrate(db)


def fresh_schema_sync() -> Iterator[str]:
    url = postgres_url()
    schema = f"lwscale_{uuid.uuid4().hex[:16]}"
    asyncio.run(_admin(f'CREATE SCHEMA "{schema}"'))
    joiner = "&" if "?" in url else "?"
    full = f"{url}{joiner}schema={schema}"

    async def setup() -> None:
        db = Database(full)
        try:
            await migrate(db)
        finally:
            await db.aclose()

    try:
        asyncio.run(setup())
        yield full
    finally:
        asyncio.run(_admin(f'DROP SCHEMA "{schema}" CASCADE'))


OPEN_LOCKS: list[PostgresSessionLocks] = []
"""Lock tables the agents of a test opened (closed after each test by the conftest)."""


def pg_agent(db: Database, model: Any = "test", *, name: str = "agent", **config: Any) -> Agent:
    """An agent whose sessions and locks live in ``db`` (what each gateway of a deployment builds)."""
    locks = PostgresSessionLocks(db)
    OPEN_LOCKS.append(locks)
    return Agent(model, name=name, store=SQLSessionStore(db), locks=locks, config=config or None)


async def close_open_locks() -> None:
    while OPEN_LOCKS:
        await OPEN_LOCKS.pop().aclose()


async def eventually(check: Callable[[], Any], *, within: float = 20.0, every: float = 0.02) -> Any:
    """Wait until ``check()`` (sync or async) returns something truthy; fails the test after ``within`` seconds."""
    async with asyncio.timeout(within):
        while True:
            value = check()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return value
            await asyncio.sleep(every)
