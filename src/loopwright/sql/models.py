"""The tables, as SQLAlchemy ORM classes. The Alembic migrations in ``migrations/`` create exactly
these (a test compares them), so change both together: add a migration for every change here.

Two groups share one database:

- session storage (:class:`~loopwright.sessions.sql.SQLSessionStore`): ``sessions``,
  ``session_entries`` (one row per transcript entry, the JSON of the JSONL line), ``run_reports``
  (checkpoints of runs waiting for approval are transcript entries, like everything else of a run);
- chat platforms (:mod:`loopwright.platforms`): ``users``, ``platform_links``, ``personas``,
  ``conversations``, ``messages``, ``token_logs``, ``file_records``.

Times are stored as UTC and always come back timezone-aware (SQLite keeps no zone: see :class:`UTCDateTime`).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

__all__ = [
    "Base",
    "Conversation",
    "FileRecord",
    "MessageRow",
    "Persona",
    "PlatformLink",
    "RunReportRow",
    "SessionEntryRow",
    "SessionRow",
    "TokenLog",
    "UTCDateTime",
    "User",
    "new_id",
    "utcnow",
]

ID = String(36)
#: Auto-increment keys: BIGINT on PostgreSQL, INTEGER on SQLite (only INTEGER PRIMARY KEY is a rowid).
SERIAL = BigInteger().with_variant(Integer(), "sqlite")


def new_id() -> str:
    return str(uuid.uuid4())


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite stores it naive, in UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: give times in UTC with a timezone")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        dict[str, Any]: JSON(),
        list[str]: JSON(),
    }


# --- session storage ----------------------------------------------------------------------------


class SessionRow(Base):
    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    agent: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[str] = mapped_column(String(40))
    updated_at: Mapped[str] = mapped_column(String(40), index=True)
    info: Mapped[dict[str, Any]]
    """``SessionInfo.to_dict()``, whole: what the file backend keeps in ``session.json``."""


class SessionEntryRow(Base):
    __tablename__ = "session_entries"
    __table_args__ = (Index("ix_session_entries_session", "session_id", "id"),)

    id: Mapped[int] = mapped_column(SERIAL, primary_key=True, autoincrement=True)
    """Append order (the transcript order)."""
    session_id: Mapped[str] = mapped_column(String(128), ForeignKey("sessions.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(40))
    """``user``, ``assistant``, ``tool`` for messages; the record type (``compaction``...) otherwise."""
    run_id: Mapped[str | None] = mapped_column(String(64))
    data: Mapped[str] = mapped_column(Text)
    """The entry's JSONL line (without the newline), exactly as the file backend writes it."""


class RunReportRow(Base):
    __tablename__ = "run_reports"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    session_id: Mapped[str] = mapped_column(
        String(128), ForeignKey("sessions.id", ondelete="CASCADE"), index=True
    )
    started_at: Mapped[float] = mapped_column(Float)
    data: Mapped[dict[str, Any]]


# --- chat platforms -------------------------------------------------------------------------------


class User(Base):
    __tablename__ = "users"

    id: Mapped[str] = mapped_column(ID, primary_key=True, default=new_id)
    display_name: Mapped[str] = mapped_column(String(200), default="")
    permission_level: Mapped[str] = mapped_column(String(10), default="guest")
    token_budget_monthly: Mapped[int | None] = mapped_column(BigInteger)
    """Tokens (input + output) per period; ``NULL``: unlimited."""
    tokens_used_this_month: Mapped[int] = mapped_column(BigInteger, default=0)
    tokens_reserved: Mapped[int] = mapped_column(BigInteger, default=0)
    """Held by model calls in flight (reserved before each call, released when it is charged)."""
    budget_reset_at: Mapped[datetime]
    """When the current period ends and ``tokens_used_this_month`` starts again from 0."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class PlatformLink(Base):
    __tablename__ = "platform_links"
    __table_args__ = (UniqueConstraint("platform", "platform_user_id", name="uq_platform_links_identity"),)

    id: Mapped[str] = mapped_column(ID, primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"), index=True)
    platform: Mapped[str] = mapped_column(String(64))
    platform_user_id: Mapped[str] = mapped_column(String(200))
    platform_username: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Persona(Base):
    __tablename__ = "personas"
    __table_args__ = (
        # At most one default, one per platform, one per (platform, server).
        Index("uq_personas_default", "is_default", unique=True,
              sqlite_where=text("is_default"), postgresql_where=text("is_default")),
        Index("uq_personas_platform", "platform", unique=True,
              sqlite_where=text("platform IS NOT NULL AND platform_server_id IS NULL"),
              postgresql_where=text("platform IS NOT NULL AND platform_server_id IS NULL")),
        Index("uq_personas_server", "platform", "platform_server_id", unique=True,
              sqlite_where=text("platform_server_id IS NOT NULL"),
              postgresql_where=text("platform_server_id IS NOT NULL")),
    )  # fmt: skip

    id: Mapped[str] = mapped_column(ID, primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    platform: Mapped[str | None] = mapped_column(String(64))
    platform_server_id: Mapped[str | None] = mapped_column(String(200))
    is_default: Mapped[bool] = mapped_column(Boolean, default=False)
    system_prompt: Mapped[str] = mapped_column(Text, default="")
    allowed_modules: Mapped[list[str] | None]
    """Tool groups on offer; ``NULL``: every tool the caller's level allows."""
    default_model: Mapped[str | None] = mapped_column(String(200))
    max_tokens_per_request: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class Conversation(Base):
    __tablename__ = "conversations"
    __table_args__ = (
        UniqueConstraint("platform", "platform_channel_id", "thread_key", name="uq_conversations_place"),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True, default=new_id)
    """Also the id of the conversation's session (its transcript)."""
    user_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"), index=True)
    """Who started it (a channel conversation may hear from several users)."""
    persona_id: Mapped[str | None] = mapped_column(ID, ForeignKey("personas.id", ondelete="SET NULL"))
    platform: Mapped[str] = mapped_column(String(64))
    platform_server_id: Mapped[str | None] = mapped_column(String(200))
    platform_channel_id: Mapped[str] = mapped_column(String(200))
    platform_thread_id: Mapped[str | None] = mapped_column(String(200))
    thread_key: Mapped[str] = mapped_column(String(200), default="")
    """``platform_thread_id`` or ``""``: a unique key needs a value (``NULL`` never collides)."""
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_active_at: Mapped[datetime] = mapped_column(default=utcnow)
    is_summarized: Mapped[bool] = mapped_column(Boolean, default=False)


class MessageRow(Base):
    __tablename__ = "messages"
    __table_args__ = (Index("ix_messages_conversation", "conversation_id", "id"),)

    id: Mapped[int] = mapped_column(SERIAL, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(ID, ForeignKey("conversations.id", ondelete="CASCADE"))
    user_id: Mapped[str | None] = mapped_column(ID, ForeignKey("users.id", ondelete="SET NULL"))
    role: Mapped[str] = mapped_column(String(16))
    """``user``, ``assistant``, ``tool_call`` or ``tool_result``."""
    content: Mapped[str] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(String(64))
    token_count: Mapped[int | None] = mapped_column(Integer)
    model_used: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class TokenLog(Base):
    __tablename__ = "token_logs"
    __table_args__ = (
        Index("ix_token_logs_user_time", "user_id", "created_at"),
        Index("ix_token_logs_conversation", "conversation_id"),
    )

    id: Mapped[int] = mapped_column(SERIAL, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"))
    conversation_id: Mapped[str | None] = mapped_column(
        ID, ForeignKey("conversations.id", ondelete="SET NULL")
    )
    run_id: Mapped[str | None] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(200))
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    """``NULL`` when the model's price is unknown."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class FileRecord(Base):
    __tablename__ = "file_records"

    id: Mapped[str] = mapped_column(ID, primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"), index=True)
    conversation_id: Mapped[str | None] = mapped_column(
        ID, ForeignKey("conversations.id", ondelete="SET NULL"), index=True
    )
    origin: Mapped[str] = mapped_column(String(16))
    """``attachment`` (sent by the user) or ``tool`` (produced by a tool)."""
    filename: Mapped[str] = mapped_column(String(255))
    mime_type: Mapped[str | None] = mapped_column(String(200))
    size_bytes: Mapped[int | None] = mapped_column(BigInteger)
    url: Mapped[str | None] = mapped_column(Text)
    storage_key: Mapped[str | None] = mapped_column(Text)
    """Where the bytes are kept locally (relative to the service's files folder), if they are."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
