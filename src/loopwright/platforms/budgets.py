"""Monthly token budgets, safe under concurrent runs.

A user's budget (``token_budget_monthly``; ``NULL`` = unlimited) covers every model call's input +
output tokens in a calendar month (UTC); the count starts again from 0 at the start of the next
month (checked, and done in SQL, on every use — no scheduler).

**Why reservations.** Checking "used < budget" before a run is not enough: ten runs of one user that
start together all pass the check, then all spend. So each model call *reserves* first, in one
atomic ``UPDATE ... WHERE used + reserved < budget`` (a row write: PostgreSQL locks the row, SQLite
the database), which admits the call only while some budget is neither used nor held by a call in
flight; the reservation is an upper bound of the call (estimated input + its maximum output). When
the call returns, :meth:`Budgets.settle` charges the tokens it really used and releases the
reservation, in one statement. So whatever the concurrency, the month's spending exceeds the budget
by at most one call's worth (the last call admitted), and runs of different users never wait for
each other — unlike serializing a user's runs, which would also make a user's second chat channel
wait for the first.

A reservation left by a crashed process is released when the period resets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import case, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from loopwright.errors import NotFoundError
from loopwright.sql._database import Database
from loopwright.sql.models import User

__all__ = ["BUDGET_EXCEEDED", "BudgetStatus", "Budgets", "Clock", "period_end"]

Clock = Callable[[], datetime]
"""Returns the current time, timezone-aware (tests pass a fixed one)."""

BUDGET_EXCEEDED = (
    "Your monthly token budget is used up ({used:,} of {budget:,} tokens). "
    "It renews on {reset} (UTC); an administrator can raise it."
)


def period_end(now: datetime) -> datetime:
    """The start of the calendar month (UTC) after ``now``: when a budget period ends."""
    now = now.astimezone(UTC)
    year, month = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetStatus:
    budget: int | None
    used: int
    reserved: int
    reset_at: datetime

    @property
    def exceeded(self) -> bool:
        """No budget left: a run is refused before any model call."""
        return self.budget is not None and self.used >= self.budget

    @property
    def remaining(self) -> int | None:
        return None if self.budget is None else max(0, self.budget - self.used)

    def message(self) -> str:
        """The reply a user gets when a run is refused."""
        return BUDGET_EXCEEDED.format(
            used=self.used, budget=self.budget or 0, reset=self.reset_at.strftime("%Y-%m-%d")
        )


class Budgets:
    """Budget checks, reservations and charges for the users of one database."""

    def __init__(self, database: Database, *, clock: Clock | None = None) -> None:
        self.database = database
        self.clock = clock or (lambda: datetime.now(UTC))

    async def status(self, user_id: str) -> BudgetStatus:
        """The user's budget now (a period that has ended is reset first)."""
        async with self.database.transaction() as s:
            await self._reset_if_due(s, user_id)
            row = (
                await s.execute(
                    select(
                        User.token_budget_monthly,
                        User.tokens_used_this_month,
                        User.tokens_reserved,
                        User.budget_reset_at,
                    ).where(User.id == user_id)
                )
            ).one_or_none()
        if row is None:
            raise NotFoundError("user", user_id)
        return BudgetStatus(budget=row[0], used=row[1], reserved=row[2], reset_at=row[3])

    async def reserve(self, user_id: str, tokens: int) -> bool:
        """Hold ``tokens`` for a model call about to start; ``False`` (nothing held): no budget left."""
        async with self.database.transaction() as s:
            await self._reset_if_due(s, user_id)
            result = await s.execute(
                update(User)
                .where(
                    User.id == user_id,
                    (User.token_budget_monthly.is_(None))
                    | (User.tokens_used_this_month + User.tokens_reserved < User.token_budget_monthly),
                )
                .values(tokens_reserved=User.tokens_reserved + max(0, tokens))
                .execution_options(synchronize_session=False)
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    async def settle(
        self, user_id: str, reserved: int, used: int, *, session: AsyncSession | None = None
    ) -> None:
        """Charge ``used`` tokens and release the call's reservation of ``reserved``, at once."""
        statement = (
            update(User)
            .where(User.id == user_id)
            .values(
                tokens_used_this_month=User.tokens_used_this_month + max(0, used),
                tokens_reserved=case(
                    (User.tokens_reserved >= reserved, User.tokens_reserved - reserved), else_=0
                ),
            )
            .execution_options(synchronize_session=False)
        )
        if session is not None:
            await session.execute(statement)
            return
        async with self.database.transaction() as s:
            await s.execute(statement)

    async def _reset_if_due(self, s: AsyncSession, user_id: str) -> None:
        now = self.clock()
        await s.execute(
            update(User)
            .where(User.id == user_id, User.budget_reset_at <= now)
            .values(tokens_used_this_month=0, tokens_reserved=0, budget_reset_at=period_end(now))
            .execution_options(synchronize_session=False)
        )
