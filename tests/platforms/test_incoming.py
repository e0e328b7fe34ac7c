"""The incoming message is a trust boundary: every problem named, camelCase accepted."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from loopwright.errors import InputError
from loopwright.platforms import PlatformService, parse_incoming
from loopwright.sql import Database
from loopwright.sql.models import Conversation, User
from loopwright.testing import ScriptedModel


def test_snake_and_camel_case_both_work() -> None:
    snake = parse_incoming(
        {"platform": "slack", "platform_user_id": "U1", "platform_channel_id": "C1", "content": "hi"}
    )
    camel = parse_incoming(
        {
            "platform": "slack",
            "platformUserId": "U1",
            "platformChannelId": "C1",
            "platformThreadId": "T1",
            "content": "hi",
        }
    )
    assert (snake.platform_user_id, camel.platform_user_id, camel.platform_thread_id) == ("U1", "U1", "T1")


def test_problems_are_named() -> None:
    with pytest.raises(InputError) as info:
        parse_incoming({"platform": "bad platform!", "content": "hi", "colour": "red"})
    text = str(info.value)
    assert text.startswith("invalid platform message: ")
    for part in (
        "platform:",
        "platform_user_id: Field required",
        "platform_channel_id: Field required",
        "colour",
    ):
        assert part in text, part


async def test_an_empty_message_is_refused_before_anything_is_written(database: Database) -> None:
    model = ScriptedModel([])
    service = PlatformService(database, model=model)
    with pytest.raises(InputError, match="message is empty"):
        await service.handle(
            {"platform": "slack", "platform_user_id": "U1", "platform_channel_id": "C1", "content": "   "}
        )
    assert model.requests == []
    async with database.transaction() as s:
        assert await s.scalar(select(func.count()).select_from(User)) == 0
        assert await s.scalar(select(func.count()).select_from(Conversation)) == 0
