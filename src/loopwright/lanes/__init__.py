"""Session serialization: one run per session at a time."""

from loopwright.lanes.base import LockLease, SessionLocks
from loopwright.lanes.local import LocalSessionLocks

__all__ = ["LocalSessionLocks", "LockLease", "SessionLocks"]
