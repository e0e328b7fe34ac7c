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
    "RunSlots",
    "SessionLocks",
]
