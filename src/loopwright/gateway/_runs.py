"""The gateway's memory of runs: each accepted message's events, numbered, and its result.

Every event a client sees is ``{runId, seq, stream, ts, data}``; ``seq`` counts 1, 2, 3… per run. A
subscriber is registered and handed the backlog in one synchronous step (no ``await`` between), so a
client resuming from the last ``seq`` it saw gets every later event exactly once: no gaps, no
duplicates. A finished run stays for ``retention`` seconds (``agent.wait``, late subscribers), then
is forgotten.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = ["Event", "RunRecord", "RunRegistry", "Status", "Stream", "Subscription"]

Stream = Literal["lifecycle", "assistant", "tool"]
Status = Literal["accepted", "running", "ok", "error"]
Event = dict[str, Any]


@dataclass(slots=True, kw_only=True)
class RunRecord:
    """One accepted message (``runId`` is the durable queue's request id)."""

    run_id: str
    agent: str
    session_id: str
    accepted_at: str
    events: list[Event] = field(default_factory=list)
    status: Status = "accepted"
    started_at: str | None = None
    ended_at: str | None = None
    reason: str | None = None
    text: str = ""
    error: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    loop_run_id: str | None = None
    """The loop's own run id (in reports and transcripts)."""
    entered: bool = False
    """The run holds its session and recorded the message (past INTAKE)."""
    finished_mono: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def finished(self) -> bool:
        return self.done.is_set()

    def result(self) -> dict[str, Any]:
        """What ``agent.wait`` answers once the run has ended."""
        out: dict[str, Any] = {
            "runId": self.run_id,
            "sessionId": self.session_id,
            "agent": self.agent,
            "status": self.status if self.finished else "timeout",
            "acceptedAt": self.accepted_at,
            "startedAt": self.started_at,
            "endedAt": self.ended_at,
        }
        if self.finished:
            out["reason"] = self.reason
            out["text"] = self.text
            if self.usage is not None:
                out["usage"] = self.usage
            if self.error is not None:
                out["error"] = self.error
        return out


class Subscription:
    """A client's view of one run or one session: events arrive in ``queue``; ``None`` ends it.

    A session subscription remembers the last ``seq`` it delivered of each run and drops anything
    at or below it: with scale-out, a run of another gateway can be adopted (and its mirror start
    replaying from ``seq`` 1) after a resuming client said how far it had read."""

    __slots__ = ("_delivered", "_registry", "closed_reason", "queue", "run_id", "session")

    def __init__(self, registry: RunRegistry, *, run_id: str | None, session: tuple[str, str] | None):
        self._registry = registry
        self.run_id = run_id
        self.session = session
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self.closed_reason: str | None = None
        self._delivered: dict[str, int] = {}

    def push(self, event: Event) -> None:
        if self.closed_reason is not None:
            return
        if not self._fresh(event):
            return
        if self.queue.qsize() >= self._registry.max_backlog:
            self.close("too slow: the backlog is full; resume from the last seq you saw")
            return
        self.queue.put_nowait(event)

    def backlog(self, event: Event) -> None:
        """An event the subscription starts with (no backlog limit: it is already in memory)."""
        if self._fresh(event):
            self.queue.put_nowait(event)

    def _fresh(self, event: Event) -> bool:
        if self.session is None:
            return True
        run_id, seq = event["runId"], event["seq"]
        if seq <= self._delivered.get(run_id, 0):
            return False
        self._delivered[run_id] = seq
        return True

    def close(self, reason: str = "closed") -> None:
        if self.closed_reason is None:
            self.closed_reason = reason
            self.queue.put_nowait(None)
            self._registry._forget(self)

    async def next(self) -> Event | None:
        return await self.queue.get()


def _iso_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class RunRegistry:
    """Runs by id, by session; event fan-out to subscribers; retention; idempotency keys."""

    def __init__(
        self,
        *,
        retention: float = 900.0,
        max_retained: int = 50_000,
        idempotency_ttl: float = 600.0,
        max_backlog: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.retention = retention
        self.max_retained = max_retained
        self.idempotency_ttl = idempotency_ttl
        self.max_backlog = max_backlog
        self._clock = clock
        self.runs: dict[str, RunRecord] = {}
        self._by_session: dict[tuple[str, str], list[str]] = {}
        self._finished: deque[str] = deque()
        self._keys: dict[tuple[str, str], tuple[str, float]] = {}
        self._run_subs: dict[str, set[Subscription]] = {}
        self._session_subs: dict[tuple[str, str], set[Subscription]] = {}
        self.events_published = 0

    # --- runs -------------------------------------------------------------------------------------

    def add(self, record: RunRecord, idempotency_key: str | None = None) -> None:
        self.prune()
        self.runs[record.run_id] = record
        self._by_session.setdefault((record.agent, record.session_id), []).append(record.run_id)
        if idempotency_key is not None:
            self._keys[(record.agent, idempotency_key)] = (record.run_id, self._clock())

    def by_key(self, agent: str, key: str) -> RunRecord | None:
        """The run an idempotency key started in the last ``idempotency_ttl`` seconds."""
        found = self._keys.get((agent, key))
        if found is None:
            return None
        run_id, at = found
        if self._clock() - at > self.idempotency_ttl:
            del self._keys[(agent, key)]
            return None
        return self.runs.get(run_id)

    def get(self, run_id: str) -> RunRecord | None:
        return self.runs.get(run_id)

    def active(self, agent: str | None = None) -> list[RunRecord]:
        return [r for r in self.runs.values() if not r.finished and (agent is None or r.agent == agent)]

    def busy(self, agent: str, session_id: str) -> bool:
        """A run of this session was accepted here and has not ended."""
        return any(
            not self.runs[rid].finished
            for rid in self._by_session.get((agent, session_id), ())
            if rid in self.runs
        )

    def session_runs(self, agent: str, session_id: str) -> list[RunRecord]:
        return [self.runs[rid] for rid in self._by_session.get((agent, session_id), ()) if rid in self.runs]

    # --- events -----------------------------------------------------------------------------------

    def publish(self, record: RunRecord, stream: Stream, data: dict[str, Any]) -> Event:
        event: Event = {
            "runId": record.run_id,
            "seq": len(record.events) + 1,
            "stream": stream,
            "ts": round(time.time() * 1000),
            "data": data,
        }
        record.events.append(event)
        self.events_published += 1
        for sub in tuple(self._run_subs.get(record.run_id, ())):
            sub.push(event)
        for sub in tuple(self._session_subs.get((record.agent, record.session_id), ())):
            sub.push(event)
        return event

    def mirror(self, record: RunRecord, event: Event) -> None:
        """Replay an event of a run that executes elsewhere (scale-out), as it was numbered there.
        Out-of-order or repeated events are ignored: the next one must have ``seq`` = count + 1."""
        if record.finished or event["seq"] != len(record.events) + 1:
            return
        data = event["data"]
        if event["stream"] == "lifecycle" and data.get("phase") == "start" and record.started_at is None:
            record.started_at = _iso_ms(event["ts"])
            record.status = "running"
        record.events.append(event)
        self.events_published += 1
        for sub in tuple(self._run_subs.get(record.run_id, ())):
            sub.push(event)
        for sub in tuple(self._session_subs.get((record.agent, record.session_id), ())):
            sub.push(event)
        if event["stream"] == "lifecycle" and data.get("phase") in ("end", "error"):
            record.status = "ok" if data.get("status") == "ok" else "error"
            record.reason = data.get("reason")
            record.text = data.get("text") or ""
            record.error = data.get("error")
            record.usage = data.get("usage")
            record.ended_at = _iso_ms(event["ts"])
            record.finished_mono = self._clock()
            record.done.set()
            self._finished.append(record.run_id)
            for sub in tuple(self._run_subs.get(record.run_id, ())):
                sub.close("ended")

    def start(self, record: RunRecord) -> None:
        if record.started_at is None:
            record.started_at = _iso()
            record.status = "running"
            self.publish(
                record, "lifecycle", {"phase": "start", "sessionId": record.session_id, "agent": record.agent}
            )

    def finish(
        self,
        record: RunRecord,
        *,
        status: Literal["ok", "error"],
        reason: str,
        text: str = "",
        error: dict[str, Any] | None = None,
        usage: dict[str, Any] | None = None,
    ) -> None:
        """End the run: the last event (``lifecycle`` end or error), then wake waiters."""
        if record.finished:
            return
        self.start(record)
        record.status, record.reason, record.text, record.error, record.usage = (
            status,
            reason,
            text,
            error,
            usage,
        )
        record.ended_at = _iso()
        data: dict[str, Any] = {
            "phase": "end" if status == "ok" else "error",
            "status": status,
            "reason": reason,
        }
        data["text"] = text
        if usage is not None:
            data["usage"] = usage
        if error is not None:
            data["error"] = error
        self.publish(record, "lifecycle", data)
        record.finished_mono = self._clock()
        record.done.set()
        self._finished.append(record.run_id)
        for sub in tuple(self._run_subs.get(record.run_id, ())):
            sub.close("ended")

    # --- subscriptions ----------------------------------------------------------------------------

    def subscribe_run(self, run_id: str, after_seq: int = 0) -> Subscription:
        """Events of one run after ``after_seq``; the subscription ends after the run's last event."""
        record = self.runs[run_id]
        sub = Subscription(self, run_id=run_id, session=None)
        for event in record.events[max(0, after_seq) :]:
            sub.queue.put_nowait(event)
        if record.finished:
            sub.closed_reason = "ended"
            sub.queue.put_nowait(None)
        else:
            self._run_subs.setdefault(run_id, set()).add(sub)
        return sub

    def subscribe_session(
        self,
        agent: str,
        session_id: str,
        after: dict[str, int] | None = None,
        since_run: str | None = None,
        skip: Iterable[str] = (),
    ) -> Subscription:
        """Events of every run of a session: runs in ``after`` from their next seq, runs accepted
        after ``since_run`` and runs still going in full; then live events until unsubscribed.
        Runs in ``skip`` are never delivered (scale-out: runs that had ended elsewhere)."""
        sub = Subscription(self, run_id=None, session=(agent, session_id))
        after = after or {}
        sub._delivered.update(after)
        for run_id in skip:
            sub._delivered[run_id] = sys.maxsize
        runs = self.session_runs(agent, session_id)
        later = False
        for record in runs:
            if record.run_id in after:
                start = after[record.run_id]
            elif later or not record.finished:
                start = 0
            else:
                start = -1
            if since_run is not None and record.run_id == since_run:
                later = True
            if start >= 0:
                for event in record.events[start:]:
                    sub.backlog(event)
        self._session_subs.setdefault((agent, session_id), set()).add(sub)
        return sub

    def _forget(self, sub: Subscription) -> None:
        if sub.run_id is not None:
            subs = self._run_subs.get(sub.run_id)
            if subs is not None:
                subs.discard(sub)
                if not subs:
                    del self._run_subs[sub.run_id]
        elif sub.session is not None:
            ssubs = self._session_subs.get(sub.session)
            if ssubs is not None:
                ssubs.discard(sub)
                if not ssubs:
                    del self._session_subs[sub.session]

    def close_all(self, reason: str) -> None:
        for subs in (*self._run_subs.values(), *self._session_subs.values()):
            for sub in tuple(subs):
                sub.close(reason)

    def watched(self, agent: str, session_id: str) -> bool:
        """Someone here is subscribed to the session."""
        return bool(self._session_subs.get((agent, session_id)))

    def subscribers(self) -> int:
        return sum(len(s) for s in self._run_subs.values()) + sum(len(s) for s in self._session_subs.values())

    # --- retention --------------------------------------------------------------------------------

    def prune(self) -> None:
        """Forget finished runs older than ``retention`` (and the oldest past ``max_retained``)."""
        now = self._clock()
        while self._finished:
            record = self.runs.get(self._finished[0])
            if record is None:
                self._finished.popleft()
                continue
            if now - record.finished_mono < self.retention and len(self._finished) <= self.max_retained:
                break
            self._finished.popleft()
            self._drop(record)
        expired = [k for k, (_, at) in self._keys.items() if now - at > self.idempotency_ttl]
        for key in expired:
            del self._keys[key]

    def _drop(self, record: RunRecord) -> None:
        self.runs.pop(record.run_id, None)
        ids = self._by_session.get((record.agent, record.session_id))
        if ids is not None and record.run_id in ids:
            ids.remove(record.run_id)
            if not ids:
                del self._by_session[(record.agent, record.session_id)]
