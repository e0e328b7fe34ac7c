"""The gateway on a shared PostgreSQL deployment (``loopwright serve --database postgresql://…``).

With a :class:`~loopwright.scaleout.ScaleOut` node, ``agent`` enqueues into the shared run queue
(queue modes, depth and idempotency keys judged across every gateway) and this process's worker runs
whatever any gateway accepted. The gateway's own run registry — what ``agent.wait`` and the event
streams read — then *mirrors* runs from the shared event log: a run accepted here, or asked about
here (``agent.wait``, a run subscription) while it runs elsewhere, gets a task that follows its event
rows in order and replays them into the registry verbatim (same ``seq``), so clients see the same
stream from whichever gateway they reach, and resume on another one from the last ``seq`` they saw.

A session subscription finds the session's runs in the shared runs table (wherever they were
accepted), adopts the ones it must deliver before it subscribes, and, while anyone here is
subscribed to the session, a watcher adopts every run of it that appears later (woken by the
session's event notifications, and every ``poll`` seconds in case one is lost). Each run then
arrives through its mirror in ``seq`` order; the subscription drops what it already delivered or
what the client said it had read, so a resumed stream has no gap and no duplicate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from loopwright.errors import InputError, NotFoundError
from loopwright.gateway._errors import ApiError, FieldError, from_exception
from loopwright.gateway._runs import RunRecord, RunRegistry, Subscription
from loopwright.scaleout import QueueRefused, RunInfo, ScaleOut

__all__ = ["ScaledRuns"]

log = logging.getLogger("loopwright.gateway")

TURN_TIMEOUT = 30.0
"""How long a run's mirror waits for the session's earlier runs to be mirrored (see ``_turn``)."""


class ScaledRuns:
    """Accepts into the shared queue and mirrors shared runs into the local registry."""

    def __init__(self, node: ScaleOut, registry: RunRegistry, *, retry_after: float) -> None:
        self.node = node
        self.registry = registry
        self.retry_after = retry_after
        self._tasks: asyncio.TaskGroup | None = None
        self._mirrors: dict[str, asyncio.Task[None]] = {}
        self._watchers: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._known: dict[tuple[str, str], set[str]] = {}
        """Per watched session: the runs its watcher has seen (adopted, or there before it began)."""

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

    def _adopt_info(self, info: RunInfo) -> RunRecord:
        record = self.registry.get(info.run_id)
        if record is None:
            record = RunRecord(
                run_id=info.run_id,
                agent=info.agent,
                session_id=info.session_id,
                accepted_at=info.accepted_at,
            )
            self.registry.add(record)
            self._follow(record)
        return record

    async def subscribe_session(
        self, agent: str, session_id: str, after: dict[str, int] | None, since_run: str | None
    ) -> Subscription:
        """The gateway's session subscription over every gateway's runs of the session, with the
        registry's resume rules judged on the shared runs table: runs in ``after`` from their next
        ``seq``, runs accepted after ``since_run`` and runs not ended in full, later runs in full."""
        after = dict(after or {})
        runs = await self.node.queue.session_runs(agent, session_id)
        plan: dict[str, int] = {}
        skip: list[str] = []
        adopted: list[RunRecord] = []
        later = False
        for info in runs:
            if info.run_id in after:
                plan[info.run_id] = after[info.run_id]
            elif later or not info.finished:
                plan[info.run_id] = 0
            else:
                skip.append(info.run_id)
            if since_run is not None and info.run_id == since_run:
                later = True
            if info.run_id in plan:
                adopted.append(self._adopt_info(info))
        # what has been written already becomes the backlog, run after run in the session's order
        # (the runs' mirrors would replay them side by side); live events then come by the mirrors
        for record in adopted:
            await self._catch_up(record)
        for run_id, seq in after.items():  # runs the table has forgotten: as the registry knows them
            plan.setdefault(run_id, seq)
        sub = self.registry.subscribe_session(agent, session_id, after=plan, skip=skip)
        key = (agent, session_id)
        if self._tasks is not None and key not in self._watchers:
            known = self._known[key] = {info.run_id for info in runs}
            task = self._tasks.create_task(
                self._watch_session(key, known), name=f"gateway-session-{agent}-{session_id}"
            )
            self._watchers[key] = task
        return sub

    async def _turn(self, record: RunRecord) -> None:
        """Before a run's first event reaches a session stream here, let the session's earlier runs
        (in queue order) finish theirs: each run's mirror reads on its own, and a session stream
        shows the session's runs one after the other, as they ran. A run has started only after
        every earlier one ended, so this waits only for mirrors still catching up."""
        key = (record.agent, record.session_id)
        if not self.registry.watched(*key):
            return
        try:
            runs = await self.node.queue.session_runs(*key)
        except Exception as exc:  # order is a nicety: never lose the run's events over it
            log.warning("session %s: looking for its runs failed: %s", record.session_id, exc)
            return
        known = self._known.get(key)
        earlier: list[RunRecord] = []
        for info in runs:
            if info.run_id == record.run_id:
                break
            if info.status == "queued":
                continue
            found = self.registry.get(info.run_id)
            if found is None and known is not None and info.run_id not in known:
                known.add(info.run_id)  # the watcher would adopt it: adopt it first
                found = self._adopt_info(info)
            if found is not None and not found.finished:
                earlier.append(found)
        if earlier:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TURN_TIMEOUT):  # an earlier mirror that failed
                    for found in earlier:
                        await found.done.wait()

    async def _catch_up(self, record: RunRecord) -> None:
        while not record.finished:
            events = await self.node.events.read_run(record.run_id, len(record.events))
            if not events:
                return
            for event in events:
                self.registry.mirror(record, event)

    async def _watch_session(self, key: tuple[str, str], known: set[str]) -> None:
        """Adopt the session's runs that appear after ``known`` while it has subscribers here."""
        agent, session_id = key
        node = self.node
        try:
            with node.hub.watch(session=key) as waker:
                while self.registry.watched(agent, session_id):
                    waker.clear()
                    try:
                        runs = await node.queue.session_runs(agent, session_id)
                    except Exception as exc:  # the database went away: look again later
                        log.warning("session %s: looking for its runs failed: %s", session_id, exc)
                        runs = []
                    for info in runs:
                        if info.run_id not in known:
                            known.add(info.run_id)
                            self._adopt_info(info)
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(node.poll):
                            await waker.wait()
        finally:
            if self._watchers.get(key) is asyncio.current_task():
                del self._watchers[key]
                self._known.pop(key, None)

    def _follow(self, record: RunRecord) -> None:
        if self._tasks is None or record.run_id in self._mirrors:
            return
        task = self._tasks.create_task(self._mirror(record), name=f"gateway-mirror-{record.run_id}")
        self._mirrors[record.run_id] = task
        task.add_done_callback(lambda _t: self._mirrors.pop(record.run_id, None))

    async def _mirror(self, record: RunRecord) -> None:
        try:
            async for event in self.node.follow_run(record.run_id, len(record.events)):
                if event["seq"] == 1 and not record.events:
                    await self._turn(record)
                self.registry.mirror(record, event)
        except Exception as exc:  # the database went away: readers see the run as still going
            log.warning("run %s: following its events failed: %s", record.run_id, exc)

    def stop_mirrors(self) -> None:
        for task in (*self._mirrors.values(), *self._watchers.values()):
            task.cancel()
