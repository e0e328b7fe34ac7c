"""The durable queue: a message is on disk before it is acknowledged, so a restart never drops it.

``Agent.submit`` writes a :class:`QueuedRequest` (and syncs it) before it returns its ticket; the
agent's worker runs it and removes it when the run has ended, whatever the outcome (the run's report
records that). After a crash, :meth:`Agent.recover` finds what is left:

- a request whose message never reached the transcript runs now;
- a request whose run had started (its message is in the transcript) is **reported**, not run twice:
  the transcript is repaired like any interrupted run and the request is closed with reason
  ``interrupted by a restart``;
- a request that has been started 3 times without ever reaching the transcript is **set aside** in
  ``queue/failed/`` with its reason, instead of crashing every start.

File layout: ``sessions/<id>/queue/<acceptedAt>-<requestId>.json``; set aside: ``queue/failed/``.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from loopwright._threads import run_blocking
from loopwright.errors import StorageError
from loopwright.messages import now_iso
from loopwright.sessions.base import validate_session_id

__all__ = ["MAX_ATTEMPTS", "FileQueue", "MemoryQueue", "QueueStore", "QueuedRequest"]

MAX_ATTEMPTS = 3


@dataclass(slots=True, kw_only=True)
class QueuedRequest:
    session_id: str
    message: str
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    accepted_at: str = field(default_factory=now_iso)
    mode: str | None = None
    meta: dict[str, Any] | None = None
    attempts: int = 0
    failure: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QueuedRequest:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


class QueueStore(Protocol):
    async def put(self, request: QueuedRequest) -> None:
        """Persist durably (synced) before returning."""
        ...

    async def update(self, request: QueuedRequest) -> None: ...

    async def done(self, request: QueuedRequest) -> None: ...

    async def set_aside(self, request: QueuedRequest, reason: str) -> None: ...

    async def pending(self) -> list[QueuedRequest]:
        """Everything not done, oldest first."""
        ...

    async def failed(self) -> list[QueuedRequest]: ...


class MemoryQueue:
    """Implements :class:`QueueStore` in memory (nothing survives the process)."""

    def __init__(self) -> None:
        self._pending: dict[str, QueuedRequest] = {}
        self._failed: list[QueuedRequest] = []

    async def put(self, request: QueuedRequest) -> None:
        self._pending[request.request_id] = request

    async def update(self, request: QueuedRequest) -> None:
        self._pending[request.request_id] = request

    async def done(self, request: QueuedRequest) -> None:
        self._pending.pop(request.request_id, None)

    async def set_aside(self, request: QueuedRequest, reason: str) -> None:
        self._pending.pop(request.request_id, None)
        request.failure = reason
        self._failed.append(request)

    async def pending(self) -> list[QueuedRequest]:
        return sorted(self._pending.values(), key=lambda r: r.accepted_at)

    async def failed(self) -> list[QueuedRequest]:
        return list(self._failed)


class FileQueue:
    """Implements :class:`QueueStore` as one small JSON file per request beside each session."""

    def __init__(self, sessions_dir: Path) -> None:
        self.root = Path(sessions_dir)

    def _path(self, request: QueuedRequest, *, failed: bool = False) -> Path:
        folder = self.root / validate_session_id(request.session_id) / "queue"
        if failed:
            folder = folder / "failed"
        stamp = request.accepted_at.replace(":", "").replace("-", "").replace(".", "")
        return folder / f"{stamp}-{request.request_id}.json"

    async def put(self, request: QueuedRequest) -> None:
        # synced (the message is acknowledged when this returns), off the event loop: an fsync
        # blocks for a millisecond or more, and a gateway accepts many messages at once
        await run_blocking(self._write, self._path(request), request)

    async def update(self, request: QueuedRequest) -> None:
        # an attempt counter: flushed to the OS (it survives the process), not synced
        self._write(self._path(request), request, sync=False)

    async def done(self, request: QueuedRequest) -> None:
        self._path(request).unlink(missing_ok=True)

    async def set_aside(self, request: QueuedRequest, reason: str) -> None:
        request.failure = reason
        self._write(self._path(request, failed=True), request)
        await self.done(request)

    async def pending(self) -> list[QueuedRequest]:
        return self._scan("*/queue/*.json")

    async def failed(self) -> list[QueuedRequest]:
        return self._scan("*/queue/failed/*.json")

    def _scan(self, pattern: str) -> list[QueuedRequest]:
        found = []
        for path in sorted(self.root.glob(pattern)):
            try:
                found.append(QueuedRequest.from_dict(json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError, TypeError) as exc:
                raise StorageError(f"unreadable queued request {str(path)!r}: {exc}") from exc
        return sorted(found, key=lambda r: r.accepted_at)

    @staticmethod
    def _write(path: Path, request: QueuedRequest, *, sync: bool = True) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            with tmp.open("w", encoding="utf-8") as f:
                json.dump(asdict(request), f)
                f.flush()
                if sync:
                    os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            raise StorageError(f"cannot queue the request for session {request.session_id!r}: {exc}") from exc
