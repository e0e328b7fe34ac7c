"""A process that takes one session's PostgreSQL lock, says so on stdout, and holds it until killed.

Usage: python -m tests.scaleout.lock_holder URL SESSION_ID [LEASE_SECONDS]
"""

from __future__ import annotations

import asyncio
import sys

from loopwright.lanes.postgres import PostgresSessionLocks
from loopwright.sql import Database


async def main(url: str, session_id: str, lease: float) -> None:
    locks = PostgresSessionLocks(Database(url))
    held = await locks.acquire(session_id, "held-by-child", wait=10, lease=lease, max_waiters=10)
    print(f"locked {held.run_id}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 900.0))
