"""Scale-out: several gateways on several machines sharing sessions, runs and events through PostgreSQL.

- :class:`ScaleOut` — one gateway's node: accept into the shared run queue, run what it claims,
  stream any run's events, sweep what dead gateways left. See docs/deploy.md.
- :class:`~loopwright.lanes.postgres.PostgresSessionLocks` — session locks (advisory locks) that a
  crashed process's database connection takes with it.
- :func:`migrate` — the core tables and the scale-out tables; :func:`upgrade` / :func:`downgrade`
  move the scale-out tables alone.
"""

from typing import TYPE_CHECKING, Any

from loopwright.scaleout._events import Event, EventLog, is_end
from loopwright.scaleout._migrate import current_revision, downgrade, head_revision, upgrade
from loopwright.scaleout._node import ScaleOut, migrate
from loopwright.scaleout._queue import Accepted, QueueRefused, RunInfo, RunQueue
from loopwright.scaleout._sweeper import MAX_ATTEMPTS

if TYPE_CHECKING:
    from loopwright.lanes.postgres import PostgresSessionLocks

__all__ = [
    "MAX_ATTEMPTS",
    "Accepted",
    "Event",
    "EventLog",
    "PostgresSessionLocks",
    "QueueRefused",
    "RunInfo",
    "RunQueue",
    "ScaleOut",
    "current_revision",
    "downgrade",
    "head_revision",
    "is_end",
    "migrate",
    "upgrade",
]


def __getattr__(name: str) -> Any:
    # Imported on first use: loopwright.lanes.postgres itself imports this package's _pg module.
    if name == "PostgresSessionLocks":
        from loopwright.lanes.postgres import PostgresSessionLocks

        return PostgresSessionLocks
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
