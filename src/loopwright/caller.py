"""Who a run is for: :class:`Caller`, and the permission levels that decide which tools they see.

Levels are ordered ``guest < user < admin < owner``. A tool declares the lowest level that may see
it (``level``, default ``"user"``); a caller sees a tool when their level reaches it and, if the
caller names ``tool_groups`` (a persona's allowed modules), when the tool belongs to one of them.
A library call without a caller runs as ``owner``: every tool of the agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

__all__ = ["LEVELS", "Caller", "PermissionLevel", "check_level", "level_rank", "tool_visible"]

PermissionLevel = Literal["guest", "user", "admin", "owner"]
LEVELS: tuple[PermissionLevel, ...] = get_args(PermissionLevel)
_RANK: dict[str, int] = {name: i for i, name in enumerate(LEVELS)}


def check_level(value: str, *, what: str = "permission level") -> PermissionLevel:
    """``value`` as a level, or a :class:`ValueError` naming the known ones."""
    if value not in _RANK:
        raise ValueError(f"unknown {what} {value!r}; use one of: {', '.join(LEVELS)}")
    return value  # type: ignore[return-value]


def level_rank(level: str) -> int:
    return _RANK[level]


@dataclass(frozen=True, slots=True, kw_only=True)
class Caller:
    """The person (or system) a run acts for. Tools that declare a parameter of this type receive it."""

    user_id: str | None = None
    level: PermissionLevel = "owner"
    platform: str | None = None
    server_id: str | None = None
    channel_id: str | None = None
    thread_id: str | None = None
    conversation_id: str | None = None
    tool_groups: frozenset[str] | None = None
    """Only tools in one of these groups (a persona's allowed modules); ``None``: every group."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_level(self.level)
        if self.tool_groups is not None and not isinstance(self.tool_groups, frozenset):
            object.__setattr__(self, "tool_groups", frozenset(self.tool_groups))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"level": self.level}
        for key in ("user_id", "platform", "server_id", "channel_id", "thread_id", "conversation_id"):
            value = getattr(self, key)
            if value is not None:
                d[key] = value
        if self.tool_groups is not None:
            d["tool_groups"] = sorted(self.tool_groups)
        if self.extra:
            d["extra"] = dict(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Caller:
        groups = d.get("tool_groups")
        return cls(
            user_id=d.get("user_id"),
            level=d.get("level", "owner"),
            platform=d.get("platform"),
            server_id=d.get("server_id"),
            channel_id=d.get("channel_id"),
            thread_id=d.get("thread_id"),
            conversation_id=d.get("conversation_id"),
            tool_groups=None if groups is None else frozenset(groups),
            extra=d.get("extra") or {},
        )


def tool_visible(tool: object, caller: Caller) -> bool:
    """Whether ``caller`` may see (and call) ``tool``."""
    if _RANK.get(getattr(tool, "level", "user"), 1) > _RANK[caller.level]:
        return False
    if caller.tool_groups is None:
        return True
    return any(g in caller.tool_groups for g in getattr(tool, "groups", ()))
