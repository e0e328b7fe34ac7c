"""Queue modes: what a message does when its session is already running.

=============  ===========================================================================================
``queue``      wait for the session (in arrival order) and run; more than ``max_queue_depth`` waiting, or
               a wait over ``queue_timeout``, is refused with ``SessionBusyError`` (the default)
``followup``   wait for the session without ``queue_timeout`` and run as the next turn
``drop``       refused at once with ``SessionBusyError`` when the session is running
``interrupt``  the running run is stopped (reason ``stopped``; its partial text and every completed tool
               call kept), then this message runs
``collect``    messages arriving while the session runs are gathered (``collect_debounce`` after the last
               one) and delivered as one turn, marked as queued while the agent was busy; every sender
               gets that turn's report
``steer``      the message joins the running run before its next model call; tool calls of the current
               step that have not started are skipped. The sender gets the run's report
=============  ===========================================================================================

A message to an idle session runs at once in every mode.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from loopwright.config import QueueMode
from loopwright.errors import RunError
from loopwright.loop._state import RunState
from loopwright.report import RunReport

__all__ = ["ModeRouter", "StartRun"]

StartRun = Callable[[str, "dict[str, Any] | None", "float | None"], Awaitable[RunReport]]
"""Start a normal run: (message, meta, wait seconds or None for the configured queue timeout)."""


@dataclass(slots=True)
class _Batch:
    messages: list[str]
    done: asyncio.Future[RunReport] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class ModeRouter:
    """Keeps track of an agent's runs per session and routes each message by its mode."""

    def __init__(self) -> None:
        self._runs: dict[str, list[RunState]] = {}
        self._batches: dict[str, _Batch] = {}

    def track(self, run: RunState) -> None:
        self._runs.setdefault(run.session_id, []).append(run)

    def untrack(self, run: RunState) -> None:
        runs = self._runs.get(run.session_id)
        if runs is not None and run in runs:
            runs.remove(run)
            if not runs:
                del self._runs[run.session_id]

    def idle(self, session_id: str) -> bool:
        """Nothing of this agent's is running, waiting or being collected for the session."""
        return session_id not in self._runs and session_id not in self._batches

    def active(self, session_id: str) -> RunState | None:
        """The run holding the session (accepted, not finished), if one of this agent's."""
        for run in self._runs.get(session_id, ()):
            if run.lease is not None and not run.finished.is_set():
                return run
        return None

    async def route(
        self,
        mode: QueueMode,
        session_id: str | None,
        message: str,
        meta: dict[str, Any] | None,
        start: StartRun,
        *,
        lock_timeout: float,
        debounce: float,
    ) -> RunReport:
        active = self.active(session_id) if session_id is not None else None
        if active is None and (session_id is None or session_id not in self._batches):
            return await start(message, meta, 0.0 if mode == "drop" else None)
        assert session_id is not None
        if mode == "drop":
            return await start(message, meta, 0.0)
        if mode == "followup":
            return await start(message, meta, lock_timeout)
        if mode == "interrupt":
            if active is not None:
                active.abort()
            return await start(message, meta, lock_timeout)
        if mode == "steer" and active is not None:
            return await self._steer(active, message, meta, start, lock_timeout)
        if mode == "collect" or (mode == "steer" and active is None):
            return await self._collect(session_id, message, start, debounce)
        return await start(message, meta, None)

    async def _steer(
        self,
        active: RunState,
        message: str,
        meta: dict[str, Any] | None,
        start: StartRun,
        lock_timeout: float,
    ) -> RunReport:
        active.steering.append(message)
        await active.finished.wait()
        if message in active.steering:  # the run ended before its next model call: run it next
            active.steering.remove(message)
            return await start(message, meta, lock_timeout)
        return active.report

    async def _collect(self, session_id: str, message: str, start: StartRun, debounce: float) -> RunReport:
        batch = self._batches.get(session_id)
        if batch is not None:
            batch.messages.append(message)
            return await asyncio.shield(batch.done)
        batch = self._batches[session_id] = _Batch([message])
        try:
            active = self.active(session_id)
            if active is not None:
                await active.finished.wait()
            while True:  # debounce: deliver once no message has arrived for `debounce` seconds
                seen = len(batch.messages)
                await asyncio.sleep(debounce)
                if len(batch.messages) == seen:
                    break
            del self._batches[session_id]
            messages = batch.messages
            if len(messages) == 1:
                text = messages[0]
            else:
                listed = "\n".join(f"{i}. {m}" for i, m in enumerate(messages, start=1))
                text = f"[{len(messages)} messages sent while you were busy]\n{listed}"
            report = await start(text, {"queued": True, "collected": len(messages)}, None)
            batch.done.set_result(report)
            return report
        except BaseException as exc:
            self._batches.pop(session_id, None)
            if not batch.done.done():
                batch.done.set_exception(RunError(f"the collected messages could not be delivered: {exc!r}"))
                batch.done.exception()  # retrieved here, so an unawaited batch never warns
            raise
