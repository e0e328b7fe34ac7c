"""Raw PostgreSQL connections (asyncpg) for what SQLAlchemy's pool must not do.

Scale-out needs connections that *belong* to one thing: a session lock held for a whole run (a
session-level advisory lock lives and dies with its connection, which is the point), a ``LISTEN``
that stays subscribed, and short statements on the hot path (``FOR UPDATE SKIP LOCKED`` claims,
event inserts with ``NOTIFY``). A pooled SQLAlchemy connection would hand a held lock to the next
borrower; so these go through asyncpg directly, typed here by the few methods we call (asyncpg
ships no type information).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

import asyncpg  # type: ignore[import-untyped]

from loopwright.errors import ConfigError
from loopwright.sql._database import Database

__all__ = ["Connection", "Pool", "Record", "channel", "connect", "create_pool", "dsn_of", "lock_key"]


class Record(Protocol):
    def __getitem__(self, key: str | int) -> Any: ...

    def get(self, key: str, default: Any = None) -> Any: ...


class Transaction(Protocol):
    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc: object) -> Any: ...


class Connection(Protocol):
    async def execute(self, query: str, *args: Any) -> str: ...

    async def fetch(self, query: str, *args: Any) -> list[Record]: ...

    async def fetchrow(self, query: str, *args: Any) -> Record | None: ...

    async def fetchval(self, query: str, *args: Any) -> Any: ...

    async def executemany(self, command: str, args: Sequence[Sequence[Any]]) -> None: ...

    def transaction(self) -> Transaction: ...

    async def add_listener(self, channel: str, callback: Callable[..., object]) -> None: ...

    async def remove_listener(self, channel: str, callback: Callable[..., object]) -> None: ...

    def add_termination_listener(self, callback: Callable[..., object]) -> None: ...

    def get_server_pid(self) -> int: ...

    def is_closed(self) -> bool: ...

    async def close(self) -> None: ...

    def terminate(self) -> None: ...


class _Acquire(Protocol):
    async def __aenter__(self) -> Connection: ...

    async def __aexit__(self, *exc: object) -> Any: ...


class Pool(Protocol):
    def acquire(self) -> _Acquire: ...

    async def execute(self, query: str, *args: Any) -> str: ...

    async def fetch(self, query: str, *args: Any) -> list[Record]: ...

    async def fetchrow(self, query: str, *args: Any) -> Record | None: ...

    async def fetchval(self, query: str, *args: Any) -> Any: ...

    async def close(self) -> None: ...

    def terminate(self) -> None: ...


def dsn_of(database: Database) -> str:
    """The libpq URL of a PostgreSQL :class:`Database` (its password included: never log it)."""
    if database.dialect != "postgresql":
        raise ConfigError(
            f"scale-out needs PostgreSQL; {database.display_url!r} is {database.dialect} "
            "(use a postgresql:// URL)"
        )
    return database.url.set(drivername="postgresql").render_as_string(hide_password=False)


def _settings(database: Database) -> dict[str, str]:
    settings = {"application_name": "loopwright"}
    if database.schema is not None:
        settings["search_path"] = database.schema
    return settings


async def connect(database: Database, *, settings: dict[str, str] | None = None) -> Connection:
    """One dedicated connection (its own, never pooled), on the database's schema."""
    conn = await asyncpg.connect(
        dsn_of(database), server_settings={**_settings(database), **(settings or {})}
    )
    return cast(Connection, conn)


async def create_pool(database: Database, *, min_size: int = 1, max_size: int = 10) -> Pool:
    """A pool for short statements: every borrower gets a connection with no lock held."""
    pool = await asyncpg.create_pool(
        dsn_of(database), min_size=min_size, max_size=max_size, server_settings=_settings(database)
    )
    return cast(Pool, pool)


def lock_key(namespace: str, name: str) -> int:
    """A signed 64-bit advisory-lock key for ``name`` in ``namespace`` (the schema), stable across
    processes and machines (unlike ``hash()``)."""
    digest = hashlib.blake2b(f"{namespace}\0{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def channel(database: Database, name: str) -> str:
    """A ``LISTEN``/``NOTIFY`` channel of this deployment: channels are per database, not per
    schema, so the schema is part of the name (shortened to fit PostgreSQL's 63 bytes)."""
    schema = database.schema or "public"
    full = f"loopwright_{name}_{schema}"
    if len(full) <= 63:
        return full
    return f"loopwright_{name}_{hashlib.blake2b(schema.encode(), digest_size=8).hexdigest()}"
