"""Session lanes under load: 1,000 sessions × 5 messages sent at once, instant model, in memory.

  no locking   the same runs with a lock backend that never waits (the floor: what locking costs
               is the difference)
  lanes        the real in-process session locks: each session's 5 runs strictly one after another

Printed: runs per second (and the ratio to the floor), and p50 / p99 of the time each run waited
for its session (``report.queued_ms``).
Run: ``python bench/lanes.py`` (``--quick`` for 200 sessions).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from loopwright import Agent
from loopwright.lanes import LocalSessionLocks, LockLease
from loopwright.sessions import MemorySessionStore
from loopwright.testing import FunctionModel

MESSAGES = 5


class NoLocks:
    """A lock backend that grants every request at once (the floor, not a safe backend)."""

    async def acquire(
        self, session_id: str, run_id: str, *, wait: float, lease: float, max_waiters: int
    ) -> LockLease:
        return LockLease.new(session_id, run_id, lease)

    async def release(self, lease: LockLease) -> None:
        return None

    def holder(self, session_id: str) -> LockLease | None:
        return None


async def _load(agent: Agent, sessions: int) -> tuple[float, list[float]]:
    async def session(i: int) -> list[float]:
        reports = await asyncio.gather(
            *(agent.run(f"message {m}", session_id=f"s{i}") for m in range(MESSAGES))
        )
        assert all(r.reason == "done" for r in reports)
        return [r.queued_ms for r in reports]

    started = time.perf_counter()
    waits = [w for ws in await asyncio.gather(*(session(i) for i in range(sessions))) for w in ws]
    return sessions * MESSAGES / (time.perf_counter() - started), waits


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def main(sessions: int, rounds: int) -> None:
    model = FunctionModel(lambda messages, info: "ok", name="instant")
    config = {"max_queue_depth": MESSAGES, "queue_timeout": 600}
    results: dict[str, list[tuple[float, list[float]]]] = {"no locking": [], "lanes": []}
    for _ in range(rounds):
        for name, locks in (("no locking", NoLocks()), ("lanes", LocalSessionLocks())):
            agent = Agent(model, store=MemorySessionStore(), locks=locks, config=config)  # type: ignore[arg-type]
            results[name].append(await _load(agent, sessions))
    floor = statistics.median(r for r, _ in results["no locking"])
    print(f"{sessions} sessions × {MESSAGES} messages, sent at once; median of {rounds} rounds")
    print(f"{'variant':<14}{'runs/s':>10}{'× floor':>10}{'wait p50 ms':>14}{'wait p99 ms':>14}")
    for name, rows in results.items():
        rate = statistics.median(r for r, _ in rows)
        waits = [w for _, ws in rows for w in ws]
        print(
            f"{name:<14}{rate:>10.0f}{rate / floor:>10.2f}{_percentile(waits, 0.5):>14.2f}{_percentile(waits, 0.99):>14.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    asyncio.run(main(200 if options.quick else 1000, 2 if options.quick else 3))
