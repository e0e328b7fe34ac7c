"""One handle on the database: the engine, short transactions, and migration on open."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from loopwright.errors import StorageError
from loopwright.sql._engine import create_engine, database_url, is_sqlite
from loopwright.sql.migrate import upgrade

__all__ = ["Database"]


class Database:
    """An SQLite file or a PostgreSQL database, by URL.

    On PostgreSQL, ``schema`` (or ``?schema=NAME`` in the URL) keeps loopwright's tables in that
    schema (it must exist).

    >>> db = Database("sqlite:///workspace/loopwright.db")     # doctest: +SKIP
    >>> await db.migrate()                                     # doctest: +SKIP
    >>> async with db.transaction() as s: ...                  # doctest: +SKIP

    Every piece of work is one short transaction (:meth:`transaction`): nothing holds a connection
    while a model or a tool runs, so a small pool serves many concurrent runs.
    """

    def __init__(
        self, url: str | os.PathLike[str] | URL, *, schema: str | None = None, **engine_options: Any
    ) -> None:
        parsed = url if isinstance(url, URL) else database_url(url)
        if "schema" in parsed.query:  # postgresql://host/db?schema=loopwright
            schema = schema or str(parsed.query["schema"])
            parsed = parsed.difference_update_query(["schema"])
        self.url = parsed
        self.schema = schema
        self.engine: AsyncEngine = create_engine(self.url, schema=schema, **engine_options)
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return "sqlite" if is_sqlite(self.url) else "postgresql"

    @property
    def display_url(self) -> str:
        """The URL without its password, for messages."""
        return self.url.render_as_string(hide_password=True)

    async def migrate(self) -> None:
        """Bring the schema to the newest revision (creating the tables of an empty database)."""
        try:
            await upgrade(self.engine)
        except (SQLAlchemyError, OSError) as exc:
            raise StorageError(f"cannot open or migrate database {self.display_url!r}: {exc}") from exc

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """A session inside one transaction: committed when the block ends, rolled back if it raises."""
        async with self._sessions() as session, session.begin():
            yield session

    def session(self) -> AsyncSession:
        """A session to manage yourself (``async with db.session() as s:``)."""
        return self._sessions()

    async def aclose(self) -> None:
        await self.engine.dispose()

    async def __aenter__(self) -> Database:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"Database({self.display_url!r})"
