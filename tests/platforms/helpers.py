"""Helpers for platform tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select

from loopwright.platforms import IncomingMessage
from loopwright.sql import Database
from loopwright.sql.models import TokenLog, User


def message(content: str = "hello", **fields: Any) -> IncomingMessage:
    """A Discord-like message from user ``u1`` in channel ``c1`` (override any field)."""
    values: dict[str, Any] = {
        "platform": "discord",
        "platform_user_id": "u1",
        "platform_channel_id": "c1",
        "content": content,
    }
    values.update(fields)
    return IncomingMessage(**values)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


async def used_tokens(db: Database, user_id: str) -> tuple[int, int]:
    """(tokens_used_this_month, tokens_reserved) of a user."""
    async with db.transaction() as s:
        row = (
            await s.execute(
                select(User.tokens_used_this_month, User.tokens_reserved).where(User.id == user_id)
            )
        ).one()
    return int(row[0]), int(row[1])


async def logged_tokens(db: Database, user_id: str) -> tuple[int, int]:
    """(model calls logged, input + output tokens logged) of a user."""
    async with db.transaction() as s:
        row = (
            await s.execute(
                select(
                    func.count(), func.coalesce(func.sum(TokenLog.input_tokens + TokenLog.output_tokens), 0)
                ).where(TokenLog.user_id == user_id)
            )
        ).one()
    return int(row[0]), int(row[1])
