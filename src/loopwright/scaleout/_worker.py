"""A gateway's worker: claims queued runs from the shared queue and runs them on its agents.

Each claimed run gets a writer that numbers its events and writes them in order (batching what
piles up during a write). The run's loop events reach the writer through one ``agent.on("*")``
listener per agent; a context variable set around ``agent.run`` tells the listener which claimed
run a loop run belongs to (the run's task inherits it; a sub-run a tool starts is ignored).

**Leases.** The worker renews the lease of every run it holds every ``lease / 3`` seconds. A run the
renewal no longer returns was taken away (the sweeper judged this worker dead): it is cancelled here
and nothing more is written for it. If renewals keep failing for ``lease`` seconds (the database is
unreachable), every run here is cancelled: another gateway will have taken them over by then.

**Approvals.** A call of a run here that waits for a decision is also a row of the shared
approvals table (see :mod:`loopwright.scaleout._approvals`), opened before the run waits and closed
once it has its decision. Decisions written there by any gateway are applied here (through
``agent.resolve_approval``) when the control channel says so, and by polling while a call waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from loopwright.agent import Agent
from loopwright.approvals import approval_id_for
from loopwright.errors import LoopwrightError
from loopwright.events import ApprovalRequested, ApprovalResolved
from loopwright.gateway._bridge import error_of, translate
from loopwright.report import RunReport
from loopwright.scaleout._approvals import ApprovalTable, Decided
from loopwright.scaleout._events import Event, EventLog
from loopwright.scaleout._queue import Claimed, RunQueue

__all__ = ["Worker"]

log = logging.getLogger("loopwright.scaleout")


def _now_ms() -> int:
    return round(time.time() * 1000)


@dataclass(slots=True)
class _Execution:
    claimed: Claimed
    next_seq: int
    pending: list[Event] = field(default_factory=list)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    lost: bool = False
    loop_run_id: str | None = None
    stop_asked: bool = False
    interrupt: bool = False
    task: asyncio.Task[None] | None = None

    def add(self, stream: str, data: dict[str, Any]) -> Event:
        event: Event = {
            "runId": self.claimed.run_id,
            "seq": self.next_seq,
            "stream": stream,
            "ts": _now_ms(),
            "data": data,
        }
        self.next_seq += 1
        self.pending.append(event)
        self.wake.set()
        return event


_CURRENT: ContextVar[_Execution | None] = ContextVar("loopwright_scaleout_run", default=None)


class Worker:
    """Runs claimed runs on ``agents`` (by name) with at most ``concurrency`` at once."""

    def __init__(
        self,
        queue: RunQueue,
        log_: EventLog,
        agents: Mapping[str, Agent],
        *,
        owner: str,
        concurrency: int,
        lease: float,
        poll: float,
        approvals: ApprovalTable | None = None,
    ) -> None:
        self.queue = queue
        self.approvals = approvals
        self.events = log_
        self.agents = dict(agents)
        self.owner = owner
        self.concurrency = concurrency
        self.lease = lease
        self.poll = poll
        self.running: dict[str, _Execution] = {}
        self._by_loop: dict[str, _Execution] = {}
        self._wake = asyncio.Event()
        self._claiming = True
        self.runs_done = 0
        self._asking: set[tuple[str, str]] = set()
        """(run id, approval id) of the calls of runs here with an open approval row."""
        self._decisions = asyncio.Event()

    # --- wiring -----------------------------------------------------------------------------------

    def listen(self) -> list[Any]:
        """Subscribe to every agent's events; returns the unsubscribe functions."""
        off = [agent.on("*", self._on_event) for agent in self.agents.values()]
        if self.approvals is not None:
            for agent in self.agents.values():
                off.append(agent.on("approval_requested", self._on_approval_requested))
                off.append(agent.on("approval_resolved", self._on_approval_resolved))
        return off

    def wake(self, _payload: str = "") -> None:
        self._wake.set()

    def on_control(self, payload: str) -> None:
        verb, _, run_id = payload.partition(" ")
        if verb in ("stop", "interrupt"):
            self._stop(run_id, now=verb == "interrupt")
        elif verb == "approval" and run_id == self.owner:  # a decision for a call waiting here
            self._decisions.set()

    def _stop(self, run_id: str, *, now: bool = False) -> None:
        execution = self.running.get(run_id)
        if execution is None:
            return
        execution.stop_asked = True
        execution.interrupt = execution.interrupt or now
        if execution.loop_run_id is not None:
            self._halt(execution, execution.loop_run_id)

    def _halt(self, execution: _Execution, loop_run_id: str) -> None:
        agent = self.agents[execution.claimed.agent]
        if execution.interrupt and agent.abort(loop_run_id):
            return
        agent.stop(loop_run_id)

    def _on_event(self, event: Any) -> None:
        execution = self._by_loop.get(event.run_id)
        if execution is None:
            if event.type != "run_start":
                return
            current = _CURRENT.get()
            if current is None or current.loop_run_id is not None:
                return  # not a claimed run, or a sub-run started by one of its tools
            current.loop_run_id = event.run_id
            self._by_loop[event.run_id] = current
            if current.stop_asked:
                self._halt(current, event.run_id)
            return
        if event.type == "done":
            self._by_loop.pop(event.run_id, None)
            return
        found = translate(event)
        if found is not None and not execution.closed:
            execution.add(found[0], found[1])

    # --- approvals -------------------------------------------------------------------------------

    async def _on_approval_requested(self, event: Any) -> None:
        """Open the call's shared row; awaited by the run before it waits, so the row comes first."""
        execution = self._by_loop.get(event.run_id)
        if self.approvals is None or execution is None or type(event) is not ApprovalRequested:
            return  # not a claimed run's own call (a sub-run's calls stay on this gateway)
        claimed = execution.claimed
        await self.approvals.open(claimed.run_id, claimed.agent, self.owner, event.request)
        self._asking.add((claimed.run_id, event.request.approval_id))

    async def _on_approval_resolved(self, event: Any) -> None:
        execution = self._by_loop.get(event.run_id)
        if self.approvals is None or execution is None or type(event) is not ApprovalResolved:
            return
        key = (execution.claimed.run_id, approval_id_for(event.run_id, event.call_id))
        if key in self._asking:
            self._asking.discard(key)
            await self.approvals.close(*key)

    async def approval_loop(self) -> None:
        """Apply the decisions other gateways wrote for calls waiting here (see module docs)."""
        assert self.approvals is not None
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll):
                    await self._decisions.wait()
            woken = self._decisions.is_set()
            self._decisions.clear()
            if not (woken or self._asking):
                continue
            try:
                for decided in await self.approvals.decided(self.owner):
                    await self.apply(decided)
            except Exception as exc:
                log.warning("applying approval decisions failed: %s", exc)

    async def apply(self, decided: Decided) -> bool:
        """Give ``decided`` to the run waiting for it here; a row nothing here waits for any more is
        closed. True if a run got the decision."""
        assert self.approvals is not None
        execution = self.running.get(decided.run_id)
        agent = self.agents.get(decided.agent)
        applied = False
        if execution is not None and agent is not None and execution.loop_run_id is not None:
            waiting = agent.approvals.get(decided.approval_id)
            if waiting is not None and waiting.run_id == execution.loop_run_id:
                try:
                    agent.resolve_approval(decided.approval_id, decided.decision)
                    applied = True
                except LoopwrightError as exc:  # decided here meanwhile (the timeout, an approver)
                    log.info("approval %s: not applied: %s", decided.approval_id, exc)
        if not applied:
            self._asking.discard((decided.run_id, decided.approval_id))
            await self.approvals.close(decided.run_id, decided.approval_id)
        return applied

    # --- the claim loop ---------------------------------------------------------------------------

    async def claim_loop(self, tasks: asyncio.TaskGroup) -> None:
        """Claim and start runs until :meth:`stop_claiming`."""
        names = list(self.agents)
        while self._claiming:
            self._wake.clear()
            free = self.concurrency - len(self.running)
            if free > 0:
                try:
                    claimed = await self.queue.claim(names, self.owner, lease=self.lease, limit=free)
                except Exception as exc:
                    log.warning("claiming runs failed: %s", exc)
                    claimed = []
                for run in claimed:
                    self._start(run, tasks)
                if len(claimed) == free:
                    continue  # there may be more
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll):
                    await self._wake.wait()

    def stop_claiming(self) -> None:
        self._claiming = False
        self._wake.set()

    def _start(self, claimed: Claimed, tasks: asyncio.TaskGroup) -> None:
        execution = _Execution(claimed=claimed, next_seq=claimed.last_seq + 1)
        self.running[claimed.run_id] = execution
        execution.task = tasks.create_task(self._execute(execution), name=f"scaleout-run-{claimed.run_id}")

    async def heartbeat_loop(self) -> None:
        """Renew leases; cancel runs taken away, stop runs asked to stop (a missed notification)."""
        last_ok = time.monotonic()
        while True:
            await asyncio.sleep(self.lease / 3)
            if not self.running:
                last_ok = time.monotonic()
                continue
            # Only runs held before the renewal started: one claimed meanwhile is not in its answer.
            before = set(self.running)
            try:
                owned, stopping = await self.queue.heartbeat(self.owner, sorted(before), lease=self.lease)
            except Exception as exc:
                log.warning("renewing run leases failed: %s", exc)
                if time.monotonic() - last_ok > self.lease:
                    for execution in list(self.running.values()):
                        self._lose(execution, "its lease could not be renewed")
                continue
            last_ok = time.monotonic()
            for run_id in before - owned:
                taken = self.running.get(run_id)
                if taken is not None and not taken.closed:
                    self._lose(taken, "another gateway took it over")
            for run_id, verb in stopping.items():  # a missed notification
                self._stop(run_id, now=verb == "interrupt")

    def _lose(self, execution: _Execution, why: str) -> None:
        log.warning("run %s: %s; cancelling it here", execution.claimed.run_id, why)
        execution.lost = True
        if execution.task is not None:
            execution.task.cancel()

    # --- one run ----------------------------------------------------------------------------------

    async def _execute(self, execution: _Execution) -> None:
        claimed = execution.claimed
        agent = self.agents[claimed.agent]
        execution.add(
            "lifecycle",
            {
                "phase": "start",
                "sessionId": claimed.session_id,
                "agent": claimed.agent,
                "attempt": claimed.attempts,
                "gateway": self.owner,
            },
        )
        try:
            async with asyncio.TaskGroup() as tasks:
                writer = tasks.create_task(self._write(execution))
                try:
                    outcome = await self._run(agent, execution)
                finally:
                    execution.closed = True
                    execution.wake.set()
                await writer
                if not execution.lost:
                    await self._end(execution, *outcome)
        except asyncio.CancelledError:
            if not execution.lost:
                raise
        except Exception:
            log.exception("run %s: its end could not be recorded; the sweeper will", claimed.run_id)
        finally:
            self.running.pop(claimed.run_id, None)
            if execution.loop_run_id is not None:
                self._by_loop.pop(execution.loop_run_id, None)
            # A call still waiting (the run was cancelled) leaves its row: runs that no longer run
            # here hide their rows from every gateway, and the run's row takes them with it.
            self._asking = {key for key in self._asking if key[0] != claimed.run_id}
            self.runs_done += 1
            self._wake.set()

    async def _run(self, agent: Agent, execution: _Execution) -> tuple[str, str, dict[str, Any]]:
        """Run the loop; (status, reason, result for ``agent.wait``)."""
        claimed = execution.claimed
        token = _CURRENT.set(execution)
        try:
            report: RunReport = await agent.run(
                claimed.message,
                session_id=claimed.session_id,
                meta={**(claimed.meta or {}), "request_id": claimed.run_id},
                mode="followup",
            )
        except LoopwrightError as exc:
            return "error", "error", {"text": "", "error": error_of(type(exc).__name__, str(exc))}
        except Exception as exc:  # a bug or a broken plugin: the run is reported, not left running
            log.exception("run %s failed unexpectedly", claimed.run_id)
            return "error", "error", {"text": "", "error": error_of(type(exc).__name__, str(exc))}
        finally:
            _CURRENT.reset(token)
        result: dict[str, Any] = {"text": report.final_text, "usage": report.total_usage.to_dict()}
        if report.error is not None:
            result["error"] = error_of(report.error_type or "RunError", report.error)
            return "error", report.reason, result
        return "ok", report.reason, result

    async def _write(self, execution: _Execution) -> None:
        claimed = execution.claimed
        while True:
            await execution.wake.wait()
            execution.wake.clear()
            batch, execution.pending = execution.pending, []
            if batch and not execution.lost:
                ok = await self.events.write(
                    claimed.run_id, self.owner, claimed.agent, claimed.session_id, batch
                )
                if not ok:
                    self._lose(execution, "it is no longer this gateway's")
                    return
            if execution.closed and not execution.pending:
                return

    async def _end(self, execution: _Execution, status: str, reason: str, result: dict[str, Any]) -> None:
        claimed = execution.claimed
        data: dict[str, Any] = {
            "phase": "end" if status == "ok" else "error",
            "status": status,
            "reason": reason,
        }
        data.update(result)
        final: Event = {
            "runId": claimed.run_id,
            "seq": execution.next_seq,
            "stream": "lifecycle",
            "ts": _now_ms(),
            "data": data,
        }
        execution.next_seq += 1
        await self.events.end(
            claimed.run_id,
            self.owner,
            claimed.agent,
            claimed.session_id,
            final,
            status=status,
            reason=reason,
            result=result,
        )

    async def stop_all(self) -> None:
        """Ask every run here to stop after its current step (reason ``stopped``)."""
        for run_id in list(self.running):
            self._stop(run_id)
