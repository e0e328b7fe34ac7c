"""Permission levels, ``guest < user < admin < owner`` (the :class:`~loopwright.Caller` levels),
checked where people type them (the admin CLI, the database)."""

from __future__ import annotations

from loopwright.caller import LEVELS, PermissionLevel, check_level
from loopwright.errors import InputError

__all__ = ["LEVELS", "Level", "parse_level"]

Level = PermissionLevel


def parse_level(value: str) -> Level:
    """``value`` as a level, or a clear :class:`~loopwright.errors.InputError`."""
    try:
        return check_level(value)
    except ValueError as exc:
        raise InputError(str(exc)) from None
