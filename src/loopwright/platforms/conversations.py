"""Conversations: one per (platform, channel, thread) — a thread is a conversation of its own.

The conversation's id is also the id of its session, whose transcript (in the SQL session store)
holds the history the model sees. Every message moves ``last_active_at``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from loopwright.platforms.budgets import Clock
from loopwright.sql._database import Database
from loopwright.sql.models import Conversation

__all__ = ["ConversationInfo", "resolve_conversation"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationInfo:
    id: str
    user_id: str
    persona_id: str | None
    platform: str
    platform_server_id: str | None
    platform_channel_id: str
    platform_thread_id: str | None
    started_at: datetime
    last_active_at: datetime
    created: bool = False
    """True when this message started it."""

    @property
    def session_id(self) -> str:
        return self.id


def _info(c: Conversation, created: bool = False) -> ConversationInfo:
    return ConversationInfo(
        id=c.id,
        user_id=c.user_id,
        persona_id=c.persona_id,
        platform=c.platform,
        platform_server_id=c.platform_server_id,
        platform_channel_id=c.platform_channel_id,
        platform_thread_id=c.platform_thread_id,
        started_at=c.started_at,
        last_active_at=c.last_active_at,
        created=created,
    )


async def resolve_conversation(
    database: Database,
    *,
    user_id: str,
    persona_id: str | None,
    platform: str,
    channel_id: str,
    thread_id: str | None = None,
    server_id: str | None = None,
    clock: Clock | None = None,
) -> ConversationInfo:
    """The conversation of this place, created on its first message; its last activity moves to now."""
    now = (clock or (lambda: datetime.now(UTC)))()
    key = thread_id or ""
    for _ in range(2):  # a second pass after losing a creation race
        async with database.transaction() as s:
            found = (
                await s.scalars(
                    select(Conversation).where(
                        Conversation.platform == platform,
                        Conversation.platform_channel_id == channel_id,
                        Conversation.thread_key == key,
                    )
                )
            ).one_or_none()
            if found is not None:
                found.last_active_at = max(now, found.last_active_at)
                return _info(found)
        try:
            async with database.transaction() as s:
                conversation = Conversation(
                    user_id=user_id,
                    persona_id=persona_id,
                    platform=platform,
                    platform_server_id=server_id,
                    platform_channel_id=channel_id,
                    platform_thread_id=thread_id,
                    thread_key=key,
                    started_at=now,
                    last_active_at=now,
                    is_summarized=False,
                )
                s.add(conversation)
            return _info(conversation, created=True)
        except IntegrityError:
            continue
    raise AssertionError(
        "unreachable: a conversation that exists was found on the second pass"
    )  # pragma: no cover
