"""Session serialization: one run per session at a time; queue modes; the global lane."""

from loopwright.lanes.base import LockLease, SessionLocks
from loopwright.lanes.capacity import RunSlots
from loopwright.lanes.file import FileSessionLocks, LockRecord
from loopwright.lanes.local import LocalSessionLocks
from loopwright.lanes.modes import ModeRouter

__all__ = [
    "FileSessionLocks",
    "LocalSessionLocks",
    "LockLease",
    "LockRecord",
    "ModeRouter",
    "PostgresSessionLocks",
    "RunSlots",
    "SessionLocks",
]


def __getattr__(name: str) -> object:
    # imported on first use: it needs asyncpg (the ``postgres`` extra) and the scale-out package
    if name == "PostgresSessionLocks":
        from loopwright.lanes.postgres import PostgresSessionLocks

        return PostgresSessionLocks
    raise AttributeError(f"module 'loopwright.lanes' has no attribute {name!r}")
