"""A session store in process memory: the default without a workspace, and the benchmark's floor."""

from __future__ import annotations

from collections.abc import Sequence

from loopwright.errors import NotFoundError
from loopwright.report import RunReport
from loopwright.sessions._codec import Entry
from loopwright.sessions.base import LoadedTranscript, SessionInfo

__all__ = ["MemorySessionStore"]


class MemorySessionStore:
    """Implements :class:`~loopwright.sessions.SessionStore`; nothing survives the process."""

    durable = False
    """Nothing here outlives the process: the loop skips the crash journal (``tool_start``) for it."""

    def __init__(self) -> None:
        self._info: dict[str, SessionInfo] = {}
        self._entries: dict[str, list[Entry]] = {}
        self._reports: dict[str, list[RunReport]] = {}

    async def get(self, session_id: str) -> SessionInfo | None:
        info = self._info.get(session_id)
        return info.copy() if info is not None else None

    async def create(self, info: SessionInfo) -> None:
        self._info[info.id] = info.copy()
        self._entries.setdefault(info.id, [])

    async def save_info(self, info: SessionInfo) -> None:
        self._info[info.id] = info.copy()

    async def list_sessions(self) -> list[SessionInfo]:
        return sorted((i.copy() for i in self._info.values()), key=lambda i: i.updated_at, reverse=True)

    async def load(self, session_id: str) -> LoadedTranscript:
        if session_id not in self._info:
            raise NotFoundError("session", session_id)
        return LoadedTranscript(entries=list(self._entries.get(session_id, ())))

    async def append(self, session_id: str, entries: Sequence[Entry]) -> None:
        self._entries.setdefault(session_id, []).extend(entries)

    async def sync(self, session_id: str) -> None:
        return None

    async def close(self, session_id: str) -> None:
        return None

    async def save_report(self, session_id: str, report: RunReport) -> None:
        self._reports.setdefault(session_id, []).append(report)

    async def list_reports(self, session_id: str) -> list[RunReport]:
        return list(self._reports.get(session_id, ()))
