"""Opening databases by URL: drivers chosen, bad URLs refused clearly, passwords never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwright.errors import ConfigError
from loopwright.sql import Database, database_url


def test_urls_get_their_async_driver(tmp_path: Path) -> None:
    assert database_url("postgresql://u@h:5432/db").drivername == "postgresql+asyncpg"
    assert database_url("postgres://u@h/db").drivername == "postgresql+asyncpg"
    assert database_url("sqlite:///x.db").drivername == "sqlite+aiosqlite"
    bare = database_url(tmp_path / "sub" / "a.db")
    assert bare.drivername == "sqlite+aiosqlite" and bare.database == str(tmp_path / "sub" / "a.db")


def test_unsupported_databases_are_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="unsupported database 'mysql'"):
        database_url("mysql://u@h/db")
    with pytest.raises(ConfigError, match="unsupported database driver 'postgresql\\+psycopg2'"):
        database_url("postgresql+psycopg2://u@h/db")


def test_passwords_never_appear_in_messages() -> None:
    with pytest.raises(ConfigError) as info:
        database_url("mysql://bob:s3cret@h/db")
    assert "s3cret" not in str(info.value)
    db = Database("postgresql://bob:s3cret@127.0.0.1:1/db")
    assert "s3cret" not in repr(db) and "s3cret" not in db.display_url


def test_a_schema_is_for_postgresql_and_must_be_a_plain_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="only be given for PostgreSQL"):
        Database(tmp_path / "a.db", schema="s")
    with pytest.raises(ConfigError, match="invalid schema name"):
        Database("postgresql://u@127.0.0.1:1/db", schema="x; drop table users")
    db = Database("postgresql://u@127.0.0.1:1/db?schema=team_a")
    assert db.schema == "team_a" and "schema" not in db.url.query


async def test_the_sqlite_file_and_its_folder_are_created(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "folder" / "lw.db"
    async with Database(path) as db:
        await db.migrate()
    assert path.is_file()
