"""Conversations: one per (platform, channel, thread); threads apart; history kept; activity moved."""

from __future__ import annotations

import asyncio

from loopwright.platforms import PlatformService, resolve_conversation, resolve_user
from loopwright.sql import Database
from loopwright.testing import ScriptedModel
from tests.platforms.helpers import Clock, at, message


async def test_a_channel_and_each_of_its_threads_are_separate_conversations(database: Database) -> None:
    model = ScriptedModel(["a", "b", "c", "d", "e"])
    service = PlatformService(database, model=model)
    channel = await service.handle(message("in the channel"))
    again = await service.handle(message("still the channel"))
    thread = await service.handle(message("in a thread", platform_thread_id="t1"))
    other_thread = await service.handle(message("another thread", platform_thread_id="t2"))
    other_channel = await service.handle(message("elsewhere", platform_channel_id="c2"))
    assert channel.conversation_id == again.conversation_id
    ids = {
        channel.conversation_id,
        thread.conversation_id,
        other_thread.conversation_id,
        other_channel.conversation_id,
    }
    assert len(ids) == 4
    # the channel's second message saw the first; the thread saw neither
    assert [m.content for m in model.requests[1].messages][:2] == ["in the channel", "a"]
    assert [m.content for m in model.requests[2].messages] == ["in a thread"]


async def test_the_last_activity_moves_with_each_message(database: Database) -> None:
    clock = Clock(at("2026-11-22T10:00:00"))
    user = await resolve_user(database, "discord", "u1")
    first = await resolve_conversation(
        database, user_id=user.id, persona_id=None, platform="discord", channel_id="c1", clock=clock
    )
    assert first.created and first.started_at == first.last_active_at == clock.now
    clock.now = at("2026-11-22T11:30:00")
    later = await resolve_conversation(
        database, user_id=user.id, persona_id=None, platform="discord", channel_id="c1", clock=clock
    )
    assert later.id == first.id and not later.created
    assert later.started_at == at("2026-11-22T10:00:00") and later.last_active_at == at("2026-11-22T11:30:00")


async def test_a_new_channel_hit_by_several_messages_at_once_gets_one_conversation(
    database: Database,
) -> None:
    user = await resolve_user(database, "discord", "u1")
    found = await asyncio.gather(
        *(
            resolve_conversation(
                database, user_id=user.id, persona_id=None, platform="discord", channel_id="busy"
            )
            for _ in range(6)
        )
    )
    assert len({c.id for c in found}) == 1
    assert sum(c.created for c in found) == 1


async def test_the_conversation_is_the_session_holding_its_transcript(database: Database) -> None:
    service = PlatformService(database, model=ScriptedModel(["noted"]))
    reply = await service.handle(message("remember the kite"))
    assert reply.conversation_id is not None
    loaded = await service.store.load(reply.conversation_id)
    assert [m.content for m in loaded.messages] == ["remember the kite", "noted"]
    meta = loaded.messages[0].meta or {}
    assert meta["platform"] == {
        "platform": "discord",
        "user_id": reply.user_id,
        "platform_user_id": "u1",
        "channel_id": "c1",
    }
