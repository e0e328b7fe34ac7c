"""One gateway's share of a scaled-out deployment: accept into the shared queue, run what it claims,
stream any run's events, sweep what dead gateways left.

>>> async with ScaleOut(db, {"helper": agent}) as node:          # doctest: +SKIP
...     accepted = await node.submit("hi", agent="helper", session_id="s1")
...     result = await node.wait(accepted.run_id, timeout=30)

Every task it starts (listener, claim loop, lease renewal, sweeper, the runs) belongs to its task
group; leaving the block drains: no new claims, running runs get ``grace`` seconds, then are asked
to stop (reason ``stopped``), then cancelled — a run cancelled that way is finished by another
gateway's sweeper once its lease runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, get_args

from loopwright.agent import Agent
from loopwright.approvals import ApprovalDecision
from loopwright.config import QueueMode
from loopwright.errors import ConfigError, InputError, NotFoundError
from loopwright.loop._intake import validate_message
from loopwright.scaleout._approvals import ApprovalTable
from loopwright.scaleout._events import Event, EventHub, EventLog
from loopwright.scaleout._migrate import upgrade
from loopwright.scaleout._pg import Pool, channel, connect, create_pool
from loopwright.scaleout._queue import Accepted, RunInfo, RunQueue
from loopwright.scaleout._sweeper import Sweeper
from loopwright.scaleout._worker import Worker
from loopwright.sessions.base import new_session_id, validate_session_id
from loopwright.sql._database import Database

__all__ = ["ScaleOut", "migrate"]

log = logging.getLogger("loopwright.scaleout")


async def migrate(database: Database) -> None:
    """Create or upgrade everything a scaled-out deployment needs: the core tables (sessions,
    transcripts, reports, checkpoints) and the scale-out tables."""
    await database.migrate()
    await upgrade(database)


class ScaleOut:
    """See the module docs. ``agents`` may be empty with ``work=False``: a node that only accepts
    and streams (its agents' settings then come from ``settings_of``)."""

    def __init__(
        self,
        database: Database,
        agents: Mapping[str, Agent] | Sequence[Agent] = (),
        *,
        gateway_id: str | None = None,
        concurrency: int = 16,
        lease: float = 30.0,
        poll: float = 1.0,
        sweep_every: float | None = None,
        retention: float = 900.0,
        grace: float = 30.0,
        work: bool = True,
        pool_size: int | None = None,
    ) -> None:
        if lease <= 0 or poll <= 0 or concurrency < 1:
            raise ConfigError("lease and poll must be positive and concurrency at least 1")
        self.database = database
        self.agents: dict[str, Agent] = (
            dict(agents) if isinstance(agents, Mapping) else {a.name: a for a in agents}
        )
        self.gateway_id = gateway_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.concurrency = concurrency
        self.lease = lease
        self.poll = poll
        self.sweep_every = sweep_every if sweep_every is not None else lease / 2
        self.retention = retention
        self.grace = grace
        self.work = work and bool(self.agents)
        self.pool_size = pool_size if pool_size is not None else min(concurrency + 2, 10)
        """Connections for short statements: a run's event writes, claims, lease renewals, readers."""
        self._pool: Pool | None = None
        self._tasks: asyncio.TaskGroup | None = None
        self._background: list[asyncio.Task[None]] = []
        self._unsubscribe: list[Any] = []
        self.hub = EventHub(
            lambda: connect(database),
            events=channel(database, "events"),
            queue=channel(database, "queue"),
            control=channel(database, "control"),
        )
        self.queue: RunQueue
        self.events: EventLog
        self.approvals: ApprovalTable
        self.worker: Worker | None = None
        self.sweeper: Sweeper

    # --- lifecycle --------------------------------------------------------------------------------

    async def __aenter__(self) -> ScaleOut:
        self._pool = pool = await create_pool(self.database, max_size=self.pool_size)
        namespace = self.database.schema or "public"
        self.queue = RunQueue(
            pool,
            namespace=namespace,
            notify_queue=self.hub.queue_channel,
            notify_control=self.hub.control_channel,
        )
        self.events = EventLog(pool, self.queue, self.hub, poll=self.poll)
        self.approvals = ApprovalTable(pool, notify_control=self.hub.control_channel)
        self.sweeper = Sweeper(
            pool, events_channel=self.hub.events_channel, queue_channel=self.hub.queue_channel
        )
        self._tasks = tasks = asyncio.TaskGroup()
        await tasks.__aenter__()
        try:
            self._background.append(tasks.create_task(self.hub.keep_listening(), name="scaleout-listen"))
            await self.hub.ready.wait()
            self._background.append(tasks.create_task(self._sweep_loop(), name="scaleout-sweep"))
            if self.work:
                worker = self.worker = Worker(
                    self.queue,
                    self.events,
                    self.agents,
                    owner=self.gateway_id,
                    concurrency=self.concurrency,
                    lease=self.lease,
                    poll=self.poll,
                    approvals=self.approvals,
                )
                self._unsubscribe = worker.listen()
                self.hub.on_queue.append(worker.wake)
                self.hub.on_control.append(worker.on_control)
                self._claims = tasks.create_task(worker.claim_loop(tasks), name="scaleout-claim")
                self._background.append(tasks.create_task(worker.heartbeat_loop(), name="scaleout-lease"))
                self._background.append(tasks.create_task(worker.approval_loop(), name="scaleout-approvals"))
        except BaseException:
            await self._close()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.drain()
        await self._close()

    async def drain(self) -> None:
        """Stop claiming; give running runs ``grace`` seconds, then ask them to stop."""
        worker = self.worker
        if worker is None:
            return
        worker.stop_claiming()
        with contextlib.suppress(Exception):
            await self._claims
        pending = [e.task for e in worker.running.values() if e.task is not None]
        if pending:
            await asyncio.wait(pending, timeout=self.grace)
            if worker.running:
                await worker.stop_all()
                pending = [e.task for e in worker.running.values() if e.task is not None]
                await asyncio.wait(pending, timeout=10.0)

    async def _close(self) -> None:
        for off in self._unsubscribe:
            off()
        for task in self._background:
            task.cancel()
        if self.worker is not None:  # after drain (or a failed start): whatever still runs is cancelled
            for execution in list(self.worker.running.values()):
                if execution.task is not None:
                    execution.task.cancel()
        tasks, self._tasks = self._tasks, None
        try:
            if tasks is not None:
                await tasks.__aexit__(None, None, None)
        finally:
            if self._pool is not None:
                await self._pool.close()
                self._pool = None

    async def _sweep_loop(self) -> None:
        while True:
            try:
                await self.sweeper.sweep(retention=self.retention)
            except Exception as exc:
                log.warning("sweeping failed: %s", exc)
            await asyncio.sleep(self.sweep_every)

    # --- the API a gateway serves -----------------------------------------------------------------

    def agent(self, name: str | None) -> tuple[str, Agent]:
        if name is None:
            if not self.agents:
                raise ConfigError("this node has no agents")
            name = next(iter(self.agents))
        found = self.agents.get(name)
        if found is None:
            raise NotFoundError("agent", name)
        return name, found

    async def submit(
        self,
        message: str,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        mode: str | None = None,
        idempotency_key: str | None = None,
        meta: dict[str, Any] | None = None,
        retry_after: float = 1.0,
    ) -> Accepted:
        """Accept a message into the shared queue (committed when this returns): any gateway's worker
        runs it. Raises :class:`~loopwright.scaleout.QueueRefused` when its mode or depth refuses it."""
        name, target = self.agent(agent)
        config = target.config
        validate_message(message, config.max_message_bytes)
        chosen = mode if mode is not None else config.queue_mode
        if chosen not in get_args(QueueMode):
            raise InputError(f"unknown queue mode {chosen!r}; use one of: {', '.join(get_args(QueueMode))}")
        sid = validate_session_id(session_id) if session_id is not None else new_session_id()
        return await self.queue.enqueue(
            run_id=str(uuid.uuid4()),
            agent=name,
            session_id=sid,
            message=message,
            mode=chosen,
            max_depth=config.max_queue_depth,
            queue_timeout=config.queue_timeout,
            meta=meta,
            idempotency_key=idempotency_key,
            retry_after=retry_after,
        )

    async def get(self, run_id: str) -> RunInfo:
        return await self.queue.get(run_id)

    async def wait(self, run_id: str, timeout: float) -> dict[str, Any]:  # noqa: ASYNC109 (agent.wait's parameter)
        """``agent.wait``: the result once the run has ended, or status ``timeout`` (it goes on)."""
        with self.hub.watch(run_id=run_id) as waker:
            info = await self.queue.get(run_id)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while not info.finished:
                left = deadline - loop.time()
                if left <= 0:
                    break
                waker.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(left, self.poll)):
                        await waker.wait()
                info = await self.queue.get(run_id)
        return info.wait_result()

    def follow_run(self, run_id: str, after_seq: int = 0) -> AsyncIterator[Event]:
        """The run's events after ``after_seq``, live, wherever it runs (see :class:`EventLog`)."""
        return self.events.follow_run(run_id, after_seq)

    def follow_session(
        self, agent: str, session_id: str, after_id: int = 0
    ) -> AsyncIterator[tuple[int, Event]]:
        return self.events.follow_session(agent, session_id, after_id)

    async def stop(
        self, *, run_id: str | None = None, agent: str | None = None, session_id: str | None = None
    ) -> int:
        """Ask running runs (on any gateway) to stop after their current step."""
        return await self.queue.request_stop(run_id=run_id, agent=agent, session_id=session_id)

    async def pending_approvals(
        self, agent: str | None = None, session_id: str | None = None
    ) -> list[dict[str, Any]]:
        """``approvals.list`` across every gateway: the calls waiting for a decision in runs of
        ``agent`` (or of every agent this node knows), as the gateway shows them (``runId`` is the
        shared run's)."""
        names = [self.agent(agent)[0]] if agent is not None else list(self.agents)
        return await self.approvals.pending(names, session_id)

    async def resolve_approval(
        self, approval_id: str, decision: ApprovalDecision, *, agent: str | None = None
    ) -> str:
        """Decide a call waiting on any gateway; its gateway continues the run. Returns the agent's
        name. Raises :class:`~loopwright.errors.NotFoundError` when no call waits for
        ``approval_id`` (unknown, decided already, or its run no longer runs)."""
        names = [self.agent(agent)[0]] if agent is not None else list(self.agents)
        decided = await self.approvals.decide(approval_id, decision, names)
        if decided.owner == self.gateway_id and self.worker is not None:
            await self.worker.apply(decided)  # waiting here: no need to wait for the notification
        return decided.agent

    def __repr__(self) -> str:
        return f"ScaleOut({self.database.display_url!r}, gateway_id={self.gateway_id!r})"
