"""The gateway on a shared PostgreSQL deployment (``loopwright serve --database postgresql://…``).

With a :class:`~loopwright.scaleout.ScaleOut` node, ``agent`` enqueues into the shared run queue
(queue modes, depth and idempotency keys judged across every gateway) and this process's worker runs
whatever any gateway accepted. The gateway's own run registry — what ``agent.wait`` and the event
streams read — then *mirrors* runs from the shared event log: a run accepted here, or asked about
here (``agent.wait``, a run subscription) while it runs elsewhere, gets a task that follows its event
rows in order and replays them into the registry verbatim (same ``seq``), so clients see the same
stream from whichever gateway they reach, and resume on another one from the last ``seq`` they saw.
"""

from __future__ import annotations

import asyncio
import logging

from loopwright.errors import InputError, NotFoundError
from loopwright.gateway._errors import ApiError, FieldError, from_exception
from loopwright.gateway._runs import RunRecord, RunRegistry
from loopwright.scaleout import QueueRefused, ScaleOut

__all__ = ["ScaledRuns"]

log = logging.getLogger("loopwright.gateway")


class ScaledRuns:
    """Accepts into the shared queue and mirrors shared runs into the local registry."""

    def __init__(self, node: ScaleOut, registry: RunRegistry, *, retry_after: float) -> None:
        self.node = node
        self.registry = registry
        self.retry_after = retry_after
        self._tasks: asyncio.TaskGroup | None = None
        self._mirrors: dict[str, asyncio.Task[None]] = {}

    def bind(self, tasks: asyncio.TaskGroup | None) -> None:
        self._tasks = tasks

    async def accept(
        self,
        name: str,
        message: str,
        session_id: str | None,
        mode: str | None,
        idempotency_key: str | None,
    ) -> tuple[RunRecord, bool]:
        try:
            accepted = await self.node.submit(
                message,
                agent=name,
                session_id=session_id,
                mode=mode,
                idempotency_key=idempotency_key,
                retry_after=self.retry_after,
            )
        except QueueRefused as exc:
            if exc.kind == "drop":
                raise ApiError(409, str(exc)) from None
            raise ApiError(503, str(exc), retry_after=self.retry_after) from None
        except InputError as exc:
            if "session id" in str(exc):
                raise ApiError(400, str(exc), fields=[FieldError("sessionId", str(exc))]) from None
            raise from_exception(exc) from None
        record = self.registry.get(accepted.run_id)
        if record is None:
            record = RunRecord(
                run_id=accepted.run_id,
                agent=name,
                session_id=accepted.session_id,
                accepted_at=accepted.accepted_at,
            )
            self.registry.add(record)
            self._follow(record)
        return record, accepted.repeated

    async def adopt(self, run_id: str) -> RunRecord | None:
        """The record of a shared run this gateway has not seen yet (mirrored from now on)."""
        record = self.registry.get(run_id)
        if record is not None:
            return record
        try:
            info = await self.node.get(run_id)
        except NotFoundError:
            return None
        record = self.registry.get(run_id)  # adopted meanwhile
        if record is None:
            record = RunRecord(
                run_id=run_id, agent=info.agent, session_id=info.session_id, accepted_at=info.accepted_at
            )
            self.registry.add(record)
            self._follow(record)
        return record

    def _follow(self, record: RunRecord) -> None:
        if self._tasks is None or record.run_id in self._mirrors:
            return
        task = self._tasks.create_task(self._mirror(record), name=f"gateway-mirror-{record.run_id}")
        self._mirrors[record.run_id] = task
        task.add_done_callback(lambda _t: self._mirrors.pop(record.run_id, None))

    async def _mirror(self, record: RunRecord) -> None:
        try:
            async for event in self.node.follow_run(record.run_id, len(record.events)):
                self.registry.mirror(record, event)
        except Exception as exc:  # the database went away: readers see the run as still going
            log.warning("run %s: following its events failed: %s", record.run_id, exc)

    def stop_mirrors(self) -> None:
        for task in list(self._mirrors.values()):
            task.cancel()
