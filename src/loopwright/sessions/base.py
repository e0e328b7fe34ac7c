"""The session store contract: session metadata, an append-only transcript and run reports.

Durability contract (every backend): :meth:`SessionStore.append` hands the entry to the backend
(for files: written and flushed to the OS, no disk sync); :meth:`SessionStore.sync` makes everything
appended so far durable (fsync). The loop syncs when a user message is acknowledged and at the end of
every run, so a crash loses at most the step in flight and never an acknowledged message.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from loopwright.errors import InputError
from loopwright.messages import Message, Usage, now_iso
from loopwright.report import RunReport
from loopwright.sessions._codec import Entry, TranscriptRecord

__all__ = ["LoadedTranscript", "SessionInfo", "SessionStore", "new_session_id", "validate_session_id"]

_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def new_session_id() -> str:
    return str(uuid.uuid4())


def validate_session_id(session_id: str) -> str:
    """Session ids name folders: letters, digits, ``.``, ``_``, ``-``; at most 128 characters."""
    if not _SESSION_ID.fullmatch(session_id) or ".." in session_id:
        raise InputError(
            f"invalid session id {session_id!r}: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return session_id


@dataclass(slots=True, kw_only=True)
class SessionInfo:
    """Session metadata, kept beside the transcript."""

    id: str
    agent: str = "agent"
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    title: str = ""
    message_count: int = 0
    run_count: int = 0
    usage: Usage = Usage()
    cost_usd: float | None = 0.0
    """Total cost of the session's model calls; ``None`` once a call could not be priced."""
    terminated: bool = False
    awaiting_approval: bool = False
    """A run of this session was waiting for an approval when it was last saved: the session's
    transcript holds a checkpoint (:meth:`Agent.checkpoints` looks only at such sessions)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "agent": self.agent,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "title": self.title,
            "messageCount": self.message_count,
            "runCount": self.run_count,
            "usage": self.usage.to_dict(),
            "costUsd": self.cost_usd,
            "terminated": self.terminated,
            **({"awaitingApproval": True} if self.awaiting_approval else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SessionInfo:
        return cls(
            id=str(d["id"]),
            agent=str(d.get("agent", "agent")),
            created_at=str(d.get("createdAt", "")),
            updated_at=str(d.get("updatedAt", "")),
            title=str(d.get("title", "")),
            message_count=int(d.get("messageCount", 0)),
            run_count=int(d.get("runCount", 0)),
            usage=Usage.from_dict(d.get("usage") or {}),
            cost_usd=d.get("costUsd", 0.0),
            terminated=bool(d.get("terminated", False)),
            awaiting_approval=bool(d.get("awaitingApproval", False)),
        )

    def copy(self) -> SessionInfo:
        return SessionInfo(
            id=self.id,
            agent=self.agent,
            created_at=self.created_at,
            updated_at=self.updated_at,
            title=self.title,
            message_count=self.message_count,
            run_count=self.run_count,
            usage=self.usage,
            cost_usd=self.cost_usd,
            terminated=self.terminated,
            awaiting_approval=self.awaiting_approval,
        )


@dataclass(slots=True, kw_only=True)
class LoadedTranscript:
    """A transcript as loaded: its entries, and what had to be set aside or repaired to load it."""

    entries: list[Entry]
    warnings: list[str] = field(default_factory=list)

    @property
    def messages(self) -> list[Message]:
        return [e for e in self.entries if type(e) is not TranscriptRecord]  # type: ignore[misc]


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions live. Implementations: :class:`MemorySessionStore`, :class:`FileSessionStore`,
    :class:`~loopwright.sessions.sql.SQLSessionStore`. A store whose sessions do not survive the
    process sets ``durable = False`` (the loop then skips the crash journal)."""

    async def get(self, session_id: str) -> SessionInfo | None: ...

    async def create(self, info: SessionInfo) -> None: ...

    async def save_info(self, info: SessionInfo) -> None: ...

    async def list_sessions(self) -> list[SessionInfo]: ...

    async def load(self, session_id: str) -> LoadedTranscript:
        """All entries of the transcript (torn or invalid lines set aside, with a warning each)."""
        ...

    async def append(self, session_id: str, entries: Sequence[Entry]) -> None:
        """Append entries in order; each is complete when this returns (flushed, not synced)."""
        ...

    async def sync(self, session_id: str) -> None:
        """Make every appended entry durable."""
        ...

    async def close(self, session_id: str) -> None:
        """Release per-session resources (open files); the session stays readable."""
        ...

    async def save_report(self, session_id: str, report: RunReport) -> None: ...

    async def list_reports(self, session_id: str) -> list[RunReport]:
        """The session's run reports, oldest first."""
        ...
