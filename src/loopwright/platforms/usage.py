"""Token usage and cost, from the token log: by user, model, month or conversation.

Every model call of a platform run writes one ``token_logs`` row (user, conversation, run, model,
input and output tokens, cost — ``NULL`` when the model's price is unknown).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, get_args

from sqlalchemy import ColumnElement, func, select

from loopwright.errors import InputError
from loopwright.sql._database import Database
from loopwright.sql.models import TokenLog, User

__all__ = ["UsageGroup", "UsageRow", "usage_report"]

UsageGroup = Literal["user", "model", "month", "conversation"]


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRow:
    key: str
    """The user id, model name, month (``2026-11``) or conversation id."""
    label: str
    """Something a person recognises (the user's display name; otherwise the key)."""
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    """``None`` when a call of the group had no known price."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "calls": self.calls,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "totalTokens": self.total_tokens,
            "costUsd": self.cost_usd,
        }


def _month(database: Database) -> ColumnElement[str]:
    if database.dialect == "sqlite":
        return func.strftime("%Y-%m", TokenLog.created_at)
    return func.to_char(func.timezone("UTC", TokenLog.created_at), "YYYY-MM")


async def usage_report(
    database: Database,
    *,
    by: str = "user",
    user_id: str | None = None,
    month: str | None = None,
) -> list[UsageRow]:
    """Usage grouped ``by`` user, model, month or conversation; optionally of one user or one month
    (``YYYY-MM``). Largest total first (by month: oldest first)."""
    if by not in get_args(UsageGroup):
        raise InputError(f"cannot group usage by {by!r}; use one of: {', '.join(get_args(UsageGroup))}")
    if month is not None:
        try:
            datetime.strptime(month, "%Y-%m")
        except ValueError:
            raise InputError(f"invalid month {month!r}: use YYYY-MM, e.g. 2026-11") from None
    month_col = _month(database)
    key_col: Any = {
        "user": TokenLog.user_id,
        "model": TokenLog.model,
        "month": month_col,
        "conversation": TokenLog.conversation_id,
    }[by]
    missing = func.count() - func.count(TokenLog.cost_usd)
    query = select(
        key_col.label("key"),
        func.count().label("calls"),
        func.coalesce(func.sum(TokenLog.input_tokens), 0),
        func.coalesce(func.sum(TokenLog.output_tokens), 0),
        func.coalesce(func.sum(TokenLog.cost_usd), 0.0),
        missing,
    ).group_by(key_col)
    if user_id is not None:
        query = query.where(TokenLog.user_id == user_id)
    if month is not None:
        query = query.where(month_col == month)
    async with database.transaction() as s:
        rows = (await s.execute(query)).all()
        names: dict[str, str] = {}
        if by == "user" and rows:
            found = await s.execute(
                select(User.id, User.display_name).where(User.id.in_([r[0] for r in rows]))
            )
            names = {str(row[0]): str(row[1]) for row in found}
    result = [
        UsageRow(
            key=str(key) if key is not None else "(none)",
            label=names.get(str(key), str(key) if key is not None else "(none)") or str(key),
            calls=int(calls),
            input_tokens=int(inp),
            output_tokens=int(out),
            cost_usd=None if int(miss) else round(float(cost), 8),
        )
        for key, calls, inp, out, cost, miss in rows
    ]
    if by == "month":
        return sorted(result, key=lambda r: r.key)
    return sorted(result, key=lambda r: (-r.total_tokens, r.key))
