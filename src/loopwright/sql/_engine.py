"""Opening a database: one URL selects the backend (an SQLite file, or PostgreSQL on a server).

``database_url`` accepts what people type — ``postgresql://user@host/db``, ``sqlite:///path.db`` or a
bare file path — and names the async driver (asyncpg, aiosqlite) itself. SQLite connections get
foreign keys, WAL and a busy timeout, so several connections (and several processes: the CLI beside a
running gateway) share one file without "database is locked" errors. A PostgreSQL ``schema`` puts
every table in that schema (tests use a fresh one per run; a deployment may share one database).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from loopwright.errors import ConfigError

__all__ = ["DEFAULT_DB_FILE", "SQLITE_BUSY_TIMEOUT", "create_engine", "database_url", "is_sqlite"]

DEFAULT_DB_FILE = "loopwright.db"
"""The embedded database's file name, in the workspace folder."""
SQLITE_BUSY_TIMEOUT = 30.0
"""Seconds an SQLite connection waits for another writer before failing."""

_SCHEMA = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}


def database_url(value: str | os.PathLike[str]) -> URL:
    """The async SQLAlchemy URL for ``value``: a URL (driver optional) or a path to an SQLite file."""
    text = os.fspath(value)
    if "://" not in text:
        return make_url(f"sqlite+aiosqlite:///{Path(text).expanduser().resolve()}")
    try:
        url = make_url(text)
    except ArgumentError as exc:
        raise ConfigError(f"invalid database URL {_safe(text)!r}: {exc}") from None
    if url.drivername in ("postgres", "postgres+asyncpg"):  # the scheme libpq and Heroku use
        url = url.set(drivername=url.drivername.replace("postgres", "postgresql", 1))
    backend = url.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise ConfigError(f"unsupported database {backend!r} in {_safe(text)!r}: use sqlite or postgresql")
    if "+" not in url.drivername:
        url = url.set(drivername=_DRIVERS[url.drivername])
    elif url.drivername not in _DRIVERS.values():
        raise ConfigError(
            f"unsupported database driver {url.drivername!r}: use sqlite+aiosqlite or postgresql+asyncpg"
        )
    return url


def is_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite"


def create_engine(
    url: str | os.PathLike[str] | URL, *, schema: str | None = None, **kwargs: Any
) -> AsyncEngine:
    """An async engine for ``url``. ``schema`` (PostgreSQL only) is put first on the search path."""
    parsed = url if isinstance(url, URL) else database_url(url)
    connect_args: dict[str, Any] = dict(kwargs.pop("connect_args", {}))
    if is_sqlite(parsed):
        if schema is not None:
            raise ConfigError("a schema can only be given for PostgreSQL; SQLite keeps one schema per file")
        database = parsed.database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        connect_args.setdefault("timeout", SQLITE_BUSY_TIMEOUT)
        engine = create_async_engine(parsed, connect_args=connect_args, **kwargs)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    if schema is not None:
        if not _SCHEMA.fullmatch(schema):
            raise ConfigError(f"invalid schema name {schema!r}: use letters, digits and '_'")
        settings = dict(connect_args.get("server_settings", {}))
        settings["search_path"] = schema
        connect_args["server_settings"] = settings
    return create_async_engine(parsed, connect_args=connect_args, pool_pre_ping=True, **kwargs)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT * 1000)}")
    finally:
        cursor.close()


def _safe(text: str) -> str:
    """The URL without its password (never in messages or logs)."""
    try:
        return make_url(text).render_as_string(hide_password=True)
    except ArgumentError:
        return re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", text)
