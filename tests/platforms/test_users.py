"""Users: guests created on first contact, one user across several platforms, admin changes."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select

from loopwright.errors import InputError, NotFoundError
from loopwright.platforms import (
    PlatformService,
    find_user,
    get_user,
    link_platform,
    list_users,
    resolve_user,
    set_budget,
    set_permission,
)
from loopwright.sql import Database
from loopwright.sql.models import PlatformLink, User
from loopwright.testing import ScriptedModel
from tests.platforms.helpers import Clock, at, message


async def test_an_unknown_identity_becomes_a_guest_with_the_default_budget(database: Database) -> None:
    clock = Clock(at("2026-11-22T10:00:00"))
    user = await resolve_user(database, "discord", "u1", platform_username="ada", clock=clock)
    assert user.permission_level == "guest"
    assert user.token_budget_monthly == 5000 and user.tokens_used_this_month == 0
    assert user.budget_reset_at == at("2026-12-01T00:00:00")
    assert user.display_name == "ada"
    assert [(k.platform, k.platform_user_id, k.platform_username) for k in user.links] == [
        ("discord", "u1", "ada")
    ]
    again = await resolve_user(database, "discord", "u1")
    assert again.id == user.id
    other = await resolve_user(database, "slack", "u1")  # same id string, other platform: someone else
    assert other.id != user.id


async def test_the_service_creates_the_guest_on_the_first_message(database: Database) -> None:
    service = PlatformService(database, model=ScriptedModel(["hi", "hi again"]), guest_budget=1234)
    first = await service.handle(message(platform_username="ada"))
    second = await service.handle(message())
    assert first.user_id == second.user_id
    user = await get_user(database, first.user_id)
    assert (user.permission_level, user.token_budget_monthly) == ("guest", 1234)


async def test_first_messages_arriving_together_create_one_user(database: Database) -> None:
    users = await asyncio.gather(*(resolve_user(database, "telegram", "42") for _ in range(6)))
    assert len({u.id for u in users}) == 1
    async with database.transaction() as s:
        assert await s.scalar(select(func.count()).select_from(User)) == 1
        assert await s.scalar(select(func.count()).select_from(PlatformLink)) == 1


async def test_one_user_can_link_several_platforms(database: Database) -> None:
    user = await resolve_user(database, "discord", "d-1")
    await set_permission(database, user.id, "admin")
    linked = await link_platform(database, user.id, "slack", "S-9", platform_username="ada")
    assert {(k.platform, k.platform_user_id) for k in linked.links} == {("discord", "d-1"), ("slack", "S-9")}
    from_slack = await resolve_user(database, "slack", "S-9")
    assert from_slack.id == user.id and from_slack.permission_level == "admin"
    assert (await find_user(database, "slack:S-9")).id == user.id
    stranger = await resolve_user(database, "discord", "d-2")
    with pytest.raises(InputError, match="slack:S-9 is already linked"):
        await link_platform(database, stranger.id, "slack", "S-9")


async def test_admin_changes_are_checked(database: Database) -> None:
    user = await resolve_user(database, "discord", "u1")
    assert (await set_permission(database, user.id, "owner")).permission_level == "owner"
    with pytest.raises(
        InputError, match="unknown permission level 'root'; use one of: guest, user, admin, owner"
    ):
        await set_permission(database, user.id, "root")
    assert (await set_budget(database, user.id, None)).token_budget_monthly is None
    assert (await set_budget(database, user.id, 20_000)).token_budget_monthly == 20_000
    with pytest.raises(InputError, match="a budget is a number of tokens"):
        await set_budget(database, user.id, -5)
    with pytest.raises(NotFoundError, match="user 'nobody' not found"):
        await set_permission(database, "nobody", "user")
    with pytest.raises(NotFoundError):
        await find_user(database, "discord:unknown")
    assert [u.id for u in await list_users(database)] == [user.id]
