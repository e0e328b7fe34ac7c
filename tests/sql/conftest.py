"""Every SQL test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from loopwright.sql import Database
from tests.sql.dbfixtures import BACKENDS, open_database


@pytest.fixture(params=BACKENDS)
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    """A migrated database."""
    async with open_database(request.param, tmp_path) as db:
        yield db


@pytest.fixture(params=BACKENDS)
async def blank_database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    """An empty database (never migrated)."""
    async with open_database(request.param, tmp_path, migrate=False) as db:
        yield db
