"""Users and their platform identities.

A message from an identity never seen before (``platform`` + ``platform_user_id``) creates a
**guest** user with the default monthly budget and links the identity to it; later messages from it
find the same user. One user may link several platforms (:func:`link_platform`), so their budget and
permissions follow them. Two first messages of one new identity arriving together still create one
user: the link is unique in the database, and the loser of the race takes the winner's user.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from loopwright.errors import InputError, NotFoundError
from loopwright.platforms.budgets import Clock, period_end
from loopwright.platforms.levels import Level, parse_level
from loopwright.sql._database import Database
from loopwright.sql.models import PlatformLink, User

__all__ = [
    "DEFAULT_GUEST_BUDGET",
    "LinkInfo",
    "UserInfo",
    "find_user",
    "get_user",
    "link_platform",
    "list_users",
    "resolve_user",
    "set_budget",
    "set_permission",
]

DEFAULT_GUEST_BUDGET = 5000
"""Tokens per month of a guest created on first contact."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkInfo:
    platform: str
    platform_user_id: str
    platform_username: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class UserInfo:
    id: str
    display_name: str
    permission_level: Level
    token_budget_monthly: int | None
    tokens_used_this_month: int
    tokens_reserved: int
    budget_reset_at: datetime
    created_at: datetime
    links: tuple[LinkInfo, ...] = field(default=())

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "displayName": self.display_name,
            "permissionLevel": self.permission_level,
            "tokenBudgetMonthly": self.token_budget_monthly,
            "tokensUsedThisMonth": self.tokens_used_this_month,
            "tokensReserved": self.tokens_reserved,
            "budgetResetAt": self.budget_reset_at.isoformat(),
            "createdAt": self.created_at.isoformat(),
            "links": [
                {
                    "platform": k.platform,
                    "platformUserId": k.platform_user_id,
                    "platformUsername": k.platform_username,
                }
                for k in self.links
            ],
        }


def _info(user: User, links: list[PlatformLink]) -> UserInfo:
    return UserInfo(
        id=user.id,
        display_name=user.display_name,
        permission_level=parse_level(user.permission_level),
        token_budget_monthly=user.token_budget_monthly,
        tokens_used_this_month=user.tokens_used_this_month,
        tokens_reserved=user.tokens_reserved,
        budget_reset_at=user.budget_reset_at,
        created_at=user.created_at,
        links=tuple(
            LinkInfo(
                platform=k.platform,
                platform_user_id=k.platform_user_id,
                platform_username=k.platform_username,
            )
            for k in links
        ),
    )


async def resolve_user(
    database: Database,
    platform: str,
    platform_user_id: str,
    *,
    platform_username: str | None = None,
    guest_budget: int | None = DEFAULT_GUEST_BUDGET,
    clock: Clock | None = None,
) -> UserInfo:
    """The user behind a platform identity, created as a guest (with a link) on first contact."""
    found = await _by_identity(database, platform, platform_user_id)
    if found is not None:
        return found
    now = (clock or _utcnow)()
    user = User(
        display_name=platform_username or platform_user_id,
        permission_level="guest",
        token_budget_monthly=guest_budget,
        tokens_used_this_month=0,
        tokens_reserved=0,
        budget_reset_at=period_end(now),
        created_at=now,
    )
    try:
        async with database.transaction() as s:
            s.add(user)
            await s.flush()
            s.add(
                PlatformLink(
                    user_id=user.id,
                    platform=platform,
                    platform_user_id=platform_user_id,
                    platform_username=platform_username,
                    created_at=now,
                )
            )
    except IntegrityError:
        found = await _by_identity(database, platform, platform_user_id)  # created concurrently
        if found is None:
            raise
        return found
    created = await get_user(database, user.id)
    return created


async def _by_identity(database: Database, platform: str, platform_user_id: str) -> UserInfo | None:
    async with database.transaction() as s:
        user = (
            await s.scalars(
                select(User)
                .join(PlatformLink, PlatformLink.user_id == User.id)
                .where(PlatformLink.platform == platform, PlatformLink.platform_user_id == platform_user_id)
            )
        ).one_or_none()
        if user is None:
            return None
        links = (await s.scalars(select(PlatformLink).where(PlatformLink.user_id == user.id))).all()
        return _info(user, list(links))


async def get_user(database: Database, user_id: str) -> UserInfo:
    async with database.transaction() as s:
        user = await s.get(User, user_id)
        if user is None:
            raise NotFoundError("user", user_id)
        links = (
            await s.scalars(
                select(PlatformLink).where(PlatformLink.user_id == user_id).order_by(PlatformLink.created_at)
            )
        ).all()
        return _info(user, list(links))


async def find_user(database: Database, ref: str) -> UserInfo:
    """A user by id, or by ``platform:platform_user_id`` (how admins know people)."""
    async with database.transaction() as s:
        if await s.get(User, ref) is not None:
            user_id = ref
        else:
            platform, sep, platform_user_id = ref.partition(":")
            link = None
            if sep:
                link = (
                    await s.scalars(
                        select(PlatformLink).where(
                            PlatformLink.platform == platform,
                            PlatformLink.platform_user_id == platform_user_id,
                        )
                    )
                ).one_or_none()
            if link is None:
                raise NotFoundError("user", ref)
            user_id = link.user_id
    return await get_user(database, user_id)


async def list_users(database: Database) -> list[UserInfo]:
    async with database.transaction() as s:
        users = (await s.scalars(select(User).order_by(User.created_at, User.id))).all()
        links = (await s.scalars(select(PlatformLink).order_by(PlatformLink.created_at))).all()
    by_user: dict[str, list[PlatformLink]] = {}
    for link in links:
        by_user.setdefault(link.user_id, []).append(link)
    return [_info(u, by_user.get(u.id, [])) for u in users]


async def set_permission(database: Database, user_id: str, level: str) -> UserInfo:
    await _update(database, user_id, permission_level=parse_level(level))
    return await get_user(database, user_id)


async def set_budget(database: Database, user_id: str, budget: int | None) -> UserInfo:
    """Set the monthly budget (``None``: unlimited); the tokens used so far this month stay counted."""
    if budget is not None and (not isinstance(budget, int) or budget < 0):
        raise InputError(f"a budget is a number of tokens (0 or more) or unlimited, not {budget!r}")
    await _update(database, user_id, token_budget_monthly=budget)
    return await get_user(database, user_id)


async def link_platform(
    database: Database,
    user_id: str,
    platform: str,
    platform_user_id: str,
    *,
    platform_username: str | None = None,
) -> UserInfo:
    """Link another platform identity to an existing user. An identity already linked (to anyone) is
    refused: merge users deliberately, never by accident."""
    try:
        async with database.transaction() as s:
            if await s.get(User, user_id) is None:
                raise NotFoundError("user", user_id)
            s.add(
                PlatformLink(
                    user_id=user_id,
                    platform=platform,
                    platform_user_id=platform_user_id,
                    platform_username=platform_username,
                )
            )
    except IntegrityError:
        raise InputError(f"{platform}:{platform_user_id} is already linked to a user") from None
    return await get_user(database, user_id)


async def _update(database: Database, user_id: str, **values: object) -> None:
    async with database.transaction() as s:
        result = await s.execute(
            update(User)
            .where(User.id == user_id)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if not result.rowcount:  # type: ignore[attr-defined]
            raise NotFoundError("user", user_id)


def _utcnow() -> datetime:
    return datetime.now(UTC)
