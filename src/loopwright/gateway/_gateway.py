"""The gateway: agents by name, the runs it accepted, and its lifecycle (start, drain, stop).

A message is accepted through the agent's durable queue (:meth:`Agent.submit`): it is on disk when
``agent`` answers, so a restart runs it (or reports it) instead of losing it. The run's events reach
the gateway through one ``agent.on("*")`` listener; a context variable set around ``submit`` tells
the listener which accepted message a loop run belongs to (the worker task inherits it).

Shutdown (:meth:`Gateway.drain`): new messages are refused with 503, running runs get ``grace``
seconds, then the agents' workers are cancelled: runs in flight end with reason ``stopped`` (their
partial answer kept), and messages that had not started go back into the durable queue for the next
start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast, get_args

from loopwright.agent import Agent, Ticket
from loopwright.config import QueueMode
from loopwright.errors import InputError, LoopwrightError, NotFoundError
from loopwright.gateway._auth import AuthGuard
from loopwright.gateway._bridge import RunBridge, error_of
from loopwright.gateway._config import GatewayConfig
from loopwright.gateway._errors import ApiError, FieldError, from_exception
from loopwright.gateway._keys import SessionKeys
from loopwright.gateway._runs import RunRecord, RunRegistry
from loopwright.hooks import GatewayHook
from loopwright.loop._intake import validate_message
from loopwright.sessions.base import new_session_id, validate_session_id
from loopwright.sessions.queue import QueuedRequest

if TYPE_CHECKING:
    from loopwright.gateway._scaled import ScaledRuns
    from loopwright.platforms import PlatformService
    from loopwright.scaleout import ScaleOut
    from loopwright.sql import Database

__all__ = ["Gateway"]

log = logging.getLogger("loopwright.gateway")


class Gateway:
    """Serves one or more agents by name over HTTP / WebSocket (see :func:`create_app`).

    >>> gateway = Gateway({"helper": Agent("test"), "coder": Agent("test")})   # doctest: +SKIP
    """

    def __init__(
        self,
        agents: Agent | Mapping[str, Agent] | Sequence[Agent],
        *,
        config: GatewayConfig | None = None,
        scaleout: ScaleOut | None = None,
        database: Database | None = None,
    ) -> None:
        self.agents: dict[str, Agent] = _by_name(agents)
        self.config = config or GatewayConfig()
        cfg = self.config
        self.registry = RunRegistry(
            retention=cfg.retention,
            max_retained=cfg.max_retained_runs,
            idempotency_ttl=cfg.idempotency_ttl,
            max_backlog=cfg.max_subscriber_backlog,
        )
        self.auth = AuthGuard(
            cfg.token,
            max_failures=cfg.auth_failures_before_lockout,
            lockout=cfg.auth_lockout,
            slowdown=cfg.auth_slowdown,
        )
        self.bridge = RunBridge(self.registry, self.agents, busy_retry_after=cfg.busy_retry_after)
        self.keys = {name: SessionKeys(_keys_path(agent)) for name, agent in self.agents.items()}
        self.draining = False
        self.address: tuple[str, int] | None = None
        """Where the server listens (set by :func:`serve` / :class:`ServerThread` once bound)."""
        self.started = asyncio.Event()
        self.stopped = asyncio.Event()
        self._hosts: dict[str, asyncio.Task[None]] = {}
        self._release = asyncio.Event()
        self._hurry = asyncio.Event()
        self._accepting: dict[tuple[str, str], asyncio.Future[RunRecord]] = {}
        self._tasks: asyncio.TaskGroup | None = None
        self._watchers: set[asyncio.Task[None]] = set()
        self._drain_task: asyncio.Task[None] | None = None
        self._started_at = time.monotonic()
        self.scaleout = scaleout
        """Several gateways on one PostgreSQL (see :mod:`loopwright.gateway._scaled`): runs go through
        the shared queue and the agents run on this node's worker instead of their own."""
        self.database = database if database is not None else (scaleout.database if scaleout else None)
        """The SQL database (migrated) of chat-platform messages: users, budgets, conversations."""
        self._platforms: dict[str, PlatformService] = {}
        self._scaled: ScaledRuns | None = None
        if scaleout is not None:
            from loopwright.gateway._scaled import ScaledRuns

            self._scaled = ScaledRuns(scaleout, self.registry, retry_after=cfg.busy_retry_after)

    @property
    def scaled(self) -> ScaledRuns | None:
        """The scale-out side of this gateway (None when it runs alone)."""
        return self._scaled

    def __repr__(self) -> str:
        return f"Gateway(agents={list(self.agents)!r}, host={self.config.host!r}, port={self.config.port})"

    # --- agents -----------------------------------------------------------------------------------

    def agent(self, name: str | None) -> tuple[str, Agent]:
        """The agent called ``name`` (the only one, or the first, when ``name`` is None)."""
        if name is None:
            first = next(iter(self.agents))
            return first, self.agents[first]
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(repr(n) for n in self.agents)
            raise ApiError(404, f"unknown agent {name!r}; this gateway serves {known}")
        return name, agent

    # --- lifecycle --------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        """Start every agent's worker (resuming what a restart left queued); on exit, drain."""
        if self.scaleout is not None:
            async with self._running_scaled():
                yield self
            return
        unsubscribe = []
        async with asyncio.TaskGroup() as tasks:
            self._tasks = tasks
            try:
                for name, agent in self.agents.items():
                    unsubscribe.append(agent.on("*", self.bridge.listener(name)))
                    await self._start_agent(name, agent, tasks)
                self._started_at = time.monotonic()
                self.started.set()
                await self._fire("gateway_start")
                yield self
            finally:
                await self.drain()
                await self._fire("gateway_stop")
                self._release.set()
                for task in list(self._watchers):
                    task.cancel()
                for off in unsubscribe:
                    off()
                self.stopped.set()

    @contextlib.asynccontextmanager
    async def _running_scaled(self) -> AsyncIterator[None]:
        """The scale-out node runs the agents (its worker claims from the shared queue)."""
        assert self.scaleout is not None and self._scaled is not None
        async with asyncio.TaskGroup() as tasks:
            self._tasks = tasks
            self._scaled.bind(tasks)
            async with self.scaleout:
                try:
                    self._started_at = time.monotonic()
                    self.started.set()
                    await self._fire("gateway_start")
                    yield
                finally:
                    self.draining = True
                    self._scaled.stop_mirrors()
                    self.registry.close_all("the gateway stopped")
            # leaving the node drained its worker: runs here ended or were asked to stop
            await self._fire("gateway_stop")
            self._scaled.bind(None)
            self.stopped.set()

    async def _start_agent(self, name: str, agent: Agent, tasks: asyncio.TaskGroup) -> None:
        pending = await agent.queue.pending()
        for request in pending:
            if self.registry.get(request.request_id) is None:
                self.registry.add(
                    RunRecord(
                        run_id=request.request_id,
                        agent=name,
                        session_id=request.session_id,
                        accepted_at=request.accepted_at,
                    )
                )
        ready = asyncio.Event()
        host = tasks.create_task(self._host(name, agent, ready), name=f"gateway-agent-{name}")
        self._hosts[name] = host
        waiter = asyncio.ensure_future(ready.wait())
        await asyncio.wait({waiter, host}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.is_set():
            waiter.cancel()
            await host  # re-raises why the agent could not start
        for request in pending:
            record = self.registry.get(request.request_id)
            if record is not None and not record.finished:
                ticket = Ticket(
                    request_id=request.request_id,
                    session_id=request.session_id,
                    accepted_at=request.accepted_at,
                )
                self._watch(record, agent, ticket)
        if pending:
            log.info("agent %r: %d queued message(s) from before the restart", name, len(pending))

    async def _host(self, name: str, agent: Agent, ready: asyncio.Event) -> None:
        self.bridge.recovering(name)
        async with agent:
            self.bridge.done_recovering()
            ready.set()
            await self._release.wait()

    def hurry(self) -> None:
        """Cut the grace period short (a second SIGTERM / Ctrl-C)."""
        self._hurry.set()

    def begin_drain(self) -> asyncio.Task[None]:
        """Start draining (from a signal handler's loop callback); the task ends when drained."""
        if self._drain_task is None:
            self._drain_task = asyncio.get_running_loop().create_task(self.drain())
        return self._drain_task

    async def drain(self) -> None:
        """Refuse new messages, give running runs ``grace`` seconds, then stop what is left."""
        if self.stopped.is_set():
            return
        if self._drain_task is not None and asyncio.current_task() is not self._drain_task:
            await asyncio.shield(self._drain_task)
            return
        if not self.draining:
            self.draining = True
            log.info("gateway draining: %d run(s) in flight", len(self.registry.active()))
        if self.scaleout is not None:
            return  # the node drains its own worker when `running` ends; mirrored runs go on elsewhere
        active = self.registry.active()
        if active and not self._hurry.is_set():
            ended: asyncio.Future[Any] = asyncio.ensure_future(
                asyncio.gather(*(r.done.wait() for r in active))
            )
            hurry: asyncio.Future[Any] = asyncio.ensure_future(self._hurry.wait())
            await asyncio.wait({ended, hurry}, timeout=self.config.grace, return_when=asyncio.FIRST_COMPLETED)
            for waiter in (ended, hurry):
                waiter.cancel()
            await asyncio.gather(ended, hurry, return_exceptions=True)
        left = self.registry.active()
        if left:
            await self._force_stop(left)
        self.registry.close_all("the gateway stopped")

    async def _force_stop(self, left: list[RunRecord]) -> None:
        agents = {r.agent for r in left}
        log.warning("grace period over: stopping %d run(s) of %s", len(left), sorted(agents))
        requeue: dict[str, list[QueuedRequest]] = {}
        for name in agents:
            waiting = {r.run_id for r in left if r.agent == name and not r.entered}
            requeue[name] = [q for q in await self.agents[name].queue.pending() if q.request_id in waiting]
        hosts = [self._hosts[n] for n in agents if n in self._hosts]
        self.bridge.forcing = True
        for host in hosts:
            host.cancel()
        await asyncio.wait(hosts)
        for name, requests in requeue.items():
            for request in requests:
                record = self.registry.get(request.request_id)
                if record is not None and record.entered:
                    continue
                request.attempts = max(0, request.attempts - 1)  # it never started
                await self.agents[name].queue.put(request)
                if record is not None:
                    self.bridge.finish(
                        record,
                        status="error",
                        reason="requeued",
                        error={
                            "code": "requeued",
                            "message": "the gateway stopped before this message ran; it runs when the "
                            "gateway starts again (same runId)",
                        },
                    )
        for record in self.registry.active():
            self.bridge.finish(record, status="ok", reason="stopped")

    async def _fire(self, hook: str) -> None:
        for agent in self.agents.values():
            bus = getattr(agent, "hooks", None)
            if bus is None:
                continue
            try:
                host, port = self.address or (self.config.host, self.config.port)
                await bus.fire(hook, GatewayHook(host=host, port=port, agents=list(self.agents)))
            except Exception:  # a plugin must not stop the gateway from starting or stopping
                log.exception("%s hook of agent %r failed", hook, agent.name)

    # --- accepting --------------------------------------------------------------------------------

    async def submit(
        self,
        message: str,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        queue_mode: str | None = None,
        idempotency_key: str | None = None,
    ) -> tuple[RunRecord, bool]:
        """Accept a message; returns its run and whether it repeats an earlier one (same key)."""
        if self.draining or not self.started.is_set():
            raise ApiError(
                503,
                "the gateway is shutting down; send again once it is back",
                retry_after=self.config.busy_retry_after,
            )
        name, target = self.agent(agent)
        if self._scaled is not None:
            mode = _mode(queue_mode) if queue_mode is not None else None
            return await self._scaled.accept(name, message, session_id, mode, idempotency_key)
        if idempotency_key is None:
            return await self._accept(name, target, message, session_id, queue_mode, None), False
        earlier = self.registry.by_key(name, idempotency_key)
        if earlier is not None:
            return earlier, True
        key = (name, idempotency_key)
        accepting = self._accepting.get(key)
        if accepting is not None:  # the same key, still being accepted: the same answer
            return await asyncio.shield(accepting), True
        future: asyncio.Future[RunRecord] = asyncio.get_running_loop().create_future()
        self._accepting[key] = future
        try:
            record = await self._accept(name, target, message, session_id, queue_mode, idempotency_key)
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: nobody else waiting is fine
            raise
        except BaseException:
            future.cancel()
            raise
        finally:
            del self._accepting[key]
        future.set_result(record)
        return record, False

    async def _accept(
        self,
        name: str,
        target: Agent,
        message: str,
        session_id: str | None,
        queue_mode: str | None,
        idempotency_key: str | None,
    ) -> RunRecord:
        mode = _mode(queue_mode) if queue_mode is not None else target.config.queue_mode
        try:
            validate_message(message, target.config.max_message_bytes)
        except InputError as exc:
            raise from_exception(exc) from None
        if session_id is not None:
            try:
                validate_session_id(session_id)
            except InputError as exc:
                raise ApiError(400, str(exc), fields=[FieldError("sessionId", str(exc))]) from None
        else:
            session_id = new_session_id()
        if mode == "drop" and self.registry.busy(name, session_id):
            raise ApiError(409, f"session {session_id!r} is running a message and the queue mode is 'drop'")
        unfinished = sum(1 for r in self.registry.session_runs(name, session_id) if not r.finished)
        depth = target.config.max_queue_depth
        if mode == "queue" and unfinished and unfinished - 1 >= depth:
            raise ApiError(
                503,
                f"session {session_id!r} already has {unfinished - 1} message(s) waiting, its queue depth "
                f"({depth})",
                retry_after=self.config.busy_retry_after,
            )
        info = await target.store.get(session_id)
        if info is not None and info.terminated:
            raise ApiError(409, f"session {session_id!r} was reset; send to a new session", code="terminated")
        record = RunRecord(run_id="", agent=name, session_id=session_id, accepted_at="")
        try:
            with self.bridge.accepting(record):
                ticket = await target.submit(message, session_id=session_id, mode=mode)
        except LoopwrightError as exc:
            raise from_exception(exc) from None
        # No await between submit and here: the run's task has not started yet.
        record.run_id, record.accepted_at = ticket.request_id, ticket.accepted_at
        self.registry.add(record, idempotency_key)
        self._watch(record, target, ticket)
        return record

    def _watch(self, record: RunRecord, agent: Agent, ticket: Ticket) -> None:
        """Finish ``record`` from the queue's ticket when no run event of its own will (a message
        steered into or collected with another run's, or a request a restart left behind)."""
        assert self._tasks is not None
        task = self._tasks.create_task(self._await_ticket(record, agent, ticket))
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    async def _await_ticket(self, record: RunRecord, agent: Agent, ticket: Ticket) -> None:
        try:
            report = await agent.wait(ticket)
        except NotFoundError:
            if record.finished:
                return
            failed = {q.request_id: q for q in await agent.queue.failed()}
            if record.run_id in failed:
                message = f"set aside after repeated failed starts: {failed[record.run_id].failure}"
            else:
                message = "interrupted by a restart after it started; its session was repaired and it is not run again"
            self.bridge.finish(
                record,
                status="error",
                reason="interrupted",
                error={"code": "interrupted", "message": message},
            )
        except LoopwrightError as exc:
            self.bridge.finish(
                record, status="error", reason="error", error=error_of(type(exc).__name__, str(exc))
            )
        else:
            if not record.finished:
                self.bridge.finish_report(record, report)

    # --- chat platforms --------------------------------------------------------------------------

    async def platform_reply(self, agent: str | None, message: dict[str, Any]) -> dict[str, Any]:
        """Answer a chat-platform message through the agent's PlatformService (built once per agent):
        the reply dict, after the run. Refused with 503 while draining, 400 without a database."""
        if self.draining or not self.started.is_set():
            raise ApiError(
                503,
                "the gateway is shutting down; send again once it is back",
                retry_after=self.config.busy_retry_after,
            )
        name, target = self.agent(agent)
        if self.database is None:
            message_ = "platform messages need a database: start the gateway with --database URL"
            raise ApiError(400, message_, fields=[FieldError("platform", message_)])
        service = self._platforms.get(name)
        if service is None:
            from loopwright.platforms import PlatformService

            service = self._platforms[name] = PlatformService.from_agent(self.database, target)
        try:
            reply = await service.handle(message)
        except InputError as exc:
            raise from_exception(exc) from None
        return reply.to_dict()

    # --- waiting and stopping ---------------------------------------------------------------------

    def record(self, run_id: str) -> RunRecord:
        record = self.registry.get(run_id)
        if record is None:
            raise ApiError(
                404,
                f"run {run_id!r} not found (unknown, or finished more than {self.config.retention:g} s ago)",
            )
        return record

    async def known(self, run_id: str) -> RunRecord:
        """The run's record; with scale-out, a run of another gateway is adopted (mirrored) here."""
        if self._scaled is not None and self.registry.get(run_id) is None:
            await self._scaled.adopt(run_id)
        return self.record(run_id)

    async def wait(self, run_id: str, timeout: float) -> dict[str, Any]:  # noqa: ASYNC109 (the RPC's parameter)
        """``agent.wait``: the result once the run ends, or status ``timeout`` (the run goes on)."""
        record = await self.known(run_id)
        if not record.finished and timeout > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await record.done.wait()
        return record.result()

    def stop(
        self, *, run_id: str | None = None, session_id: str | None = None, agent: str | None = None
    ) -> int:
        """Ask runs to stop after their current step; returns how many were asked."""
        if run_id is not None:
            record = self.record(run_id)
            if record.finished:
                return 0
            targets = [record]
        else:
            name = self.agent(agent)[0] if agent is not None else None
            targets = [
                r for r in self.registry.active(name) if session_id is None or r.session_id == session_id
            ]
        count = 0
        for record in targets:
            if record.loop_run_id is not None:
                count += self.agents[record.agent].stop(record.loop_run_id)
        return count

    def health(self) -> dict[str, Any]:
        from loopwright import __version__

        return {
            "ok": not self.draining,
            "status": "draining" if self.draining else "ok",
            "version": __version__,
            "agents": [
                {"name": n, "model": a.model.name, "tools": list(a.tools)} for n, a in self.agents.items()
            ],
            "activeRuns": len(self.registry.active()),
            "retainedRuns": len(self.registry.runs),
            "eventsPublished": self.registry.events_published,
            "subscribers": self.registry.subscribers(),
            "uptimeMs": round((time.monotonic() - self._started_at) * 1000),
            "auth": self.auth.required,
        }


def _mode(value: str) -> QueueMode:
    if value not in get_args(QueueMode):
        known = ", ".join(get_args(QueueMode))
        message = f"unknown queue mode {value!r}; use one of: {known}"
        raise ApiError(400, message, fields=[FieldError("queueMode", message)])
    return cast(QueueMode, value)


def _by_name(agents: Agent | Mapping[str, Agent] | Sequence[Agent]) -> dict[str, Agent]:
    if isinstance(agents, Agent):
        return {agents.name: agents}
    if isinstance(agents, Mapping):
        named = dict(agents)
    else:
        named = {}
        for agent in agents:
            if agent.name in named:
                raise ValueError(f"two agents are named {agent.name!r}; pass a mapping of unique names")
            named[agent.name] = agent
    if not named:
        raise ValueError("a gateway needs at least one agent")
    for name in named:
        if not name or "/" in name:
            raise ValueError(f"invalid agent name {name!r}")
    return named


def _keys_path(agent: Agent) -> Path | None:
    if agent.workspace is None:
        return None
    return agent.workspace.sessions_dir / ".gateway-session-keys.json"
