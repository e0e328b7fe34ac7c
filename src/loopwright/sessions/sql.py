"""The SQL session store: the same sessions as the file backend, in an SQLite file or PostgreSQL.

Each transcript entry is one row of ``session_entries`` holding the entry's JSONL line exactly as
:class:`~loopwright.sessions.FileSessionStore` writes it (through the codec), so every entry type
— including ones added later — passes through unchanged, and ``sessions export``/``import`` move a
session between the two backends without loss. Row ids keep append order.

Durability: every :meth:`append` is its own committed transaction (SQLite in WAL mode with
``synchronous=FULL``, PostgreSQL with ``synchronous_commit`` on), so :meth:`sync` has nothing left
to do.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from loopwright.errors import NotFoundError, StorageError
from loopwright.report import RunReport
from loopwright.sessions._codec import Entry, TranscriptRecord, decode_line, encode_entry
from loopwright.sessions.base import LoadedTranscript, SessionInfo, validate_session_id
from loopwright.sql._database import Database
from loopwright.sql.models import RunReportRow, SessionEntryRow, SessionRow

__all__ = ["SQLSessionStore"]

log = logging.getLogger("loopwright.sessions")


class SQLSessionStore:
    """Implements :class:`~loopwright.sessions.SessionStore` on a :class:`~loopwright.sql.Database`
    (migrate it first: ``await db.migrate()``)."""

    def __init__(self, database: Database) -> None:
        self.database = database

    # --- metadata -------------------------------------------------------------------------------

    async def get(self, session_id: str) -> SessionInfo | None:
        try:
            async with self.database.transaction() as s:
                row = await s.get(SessionRow, session_id)
                return None if row is None else SessionInfo.from_dict(row.info)
        except SQLAlchemyError as exc:
            raise self._error("read session", session_id, exc) from exc

    async def create(self, info: SessionInfo) -> None:
        validate_session_id(info.id)
        await self.save_info(info)

    async def save_info(self, info: SessionInfo) -> None:
        data = info.to_dict()
        try:
            async with self.database.transaction() as s:
                row = await s.get(SessionRow, info.id)
                if row is None:
                    s.add(
                        SessionRow(
                            id=validate_session_id(info.id),
                            agent=info.agent,
                            created_at=info.created_at,
                            updated_at=info.updated_at,
                            info=data,
                        )
                    )
                else:
                    row.agent, row.updated_at, row.info = info.agent, info.updated_at, data
        except SQLAlchemyError as exc:
            raise self._error("save session", info.id, exc) from exc

    async def list_sessions(self) -> list[SessionInfo]:
        try:
            async with self.database.transaction() as s:
                rows = (await s.scalars(select(SessionRow.info).order_by(SessionRow.updated_at.desc()))).all()
        except SQLAlchemyError as exc:
            raise self._error("list sessions", None, exc) from exc
        found = []
        for data in rows:
            try:
                found.append(SessionInfo.from_dict(data))
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("skipping unreadable session metadata %r: %s", data, exc)
        return found

    # --- transcript -----------------------------------------------------------------------------

    async def load(self, session_id: str) -> LoadedTranscript:
        try:
            async with self.database.transaction() as s:
                if await s.get(SessionRow, session_id) is None:
                    raise NotFoundError("session", session_id)
                rows = (
                    await s.execute(
                        select(SessionEntryRow.id, SessionEntryRow.data)
                        .where(SessionEntryRow.session_id == session_id)
                        .order_by(SessionEntryRow.id)
                    )
                ).all()
        except SQLAlchemyError as exc:
            raise self._error("load session", session_id, exc) from exc
        entries: list[Entry] = []
        warnings: list[str] = []
        for row_id, line in rows:
            try:
                entries.append(decode_line(line))
            except (ValueError, KeyError, TypeError) as exc:
                warnings.append(f"session {session_id!r}: entry row {row_id} is not a valid entry ({exc})")
        return LoadedTranscript(entries=entries, warnings=warnings)

    async def load_run(self, session_id: str, run_id: str) -> list[Entry]:
        """The entries one run wrote, in order (without reading the rest of the transcript)."""
        try:
            async with self.database.transaction() as s:
                lines = (
                    await s.scalars(
                        select(SessionEntryRow.data)
                        .where(SessionEntryRow.session_id == session_id, SessionEntryRow.run_id == run_id)
                        .order_by(SessionEntryRow.id)
                    )
                ).all()
        except SQLAlchemyError as exc:
            raise self._error("load a run of session", session_id, exc) from exc
        entries: list[Entry] = []
        for line in lines:
            try:
                entries.append(decode_line(line))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("session %s: skipping an invalid entry of run %s: %s", session_id, run_id, exc)
        return entries

    async def append(self, session_id: str, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        rows = [
            SessionEntryRow(
                session_id=session_id,
                kind=_kind(entry),
                run_id=entry.run_id,
                data=encode_entry(entry).rstrip("\n"),
            )
            for entry in entries
        ]
        try:
            async with self.database.transaction() as s:
                s.add_all(rows)
        except SQLAlchemyError as exc:
            raise self._error("append to session", session_id, exc) from exc

    async def sync(self, session_id: str) -> None:
        return None  # every append was a committed transaction

    async def close(self, session_id: str) -> None:
        return None  # nothing is held open per session

    # --- reports --------------------------------------------------------------------------------

    async def save_report(self, session_id: str, report: RunReport) -> None:
        data = report.to_dict()
        try:
            async with self.database.transaction() as s:
                row = await s.get(RunReportRow, report.id)
                if row is None:
                    s.add(
                        RunReportRow(
                            id=report.id, session_id=session_id, started_at=report.started_at, data=data
                        )
                    )
                else:
                    row.session_id, row.started_at, row.data = session_id, report.started_at, data
        except SQLAlchemyError as exc:
            raise self._error("save a report of session", session_id, exc) from exc

    async def list_reports(self, session_id: str) -> list[RunReport]:
        try:
            async with self.database.transaction() as s:
                rows = (
                    await s.scalars(
                        select(RunReportRow.data)
                        .where(RunReportRow.session_id == session_id)
                        .order_by(RunReportRow.started_at)
                    )
                ).all()
        except SQLAlchemyError as exc:
            raise self._error("list reports of session", session_id, exc) from exc
        reports = []
        for data in rows:
            try:
                reports.append(RunReport.from_dict(data))
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("skipping unreadable run report of session %s: %s", session_id, exc)
        return reports

    def _error(self, what: str, session_id: str | None, exc: Exception) -> StorageError:
        target = f" {session_id!r}" if session_id is not None else ""
        return StorageError(f"cannot {what}{target} in {self.database.display_url!r}: {exc}")

    def __repr__(self) -> str:
        return f"SQLSessionStore({self.database.display_url!r})"


def _kind(entry: Entry) -> str:
    return entry.type if type(entry) is TranscriptRecord else entry.role  # type: ignore[union-attr]
