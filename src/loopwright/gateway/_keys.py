"""Session keys for the OpenAI-compatible endpoint: a ``user`` name or ``X-Session-Id`` header names
the conversation it continues.

A ``user`` maps to a deterministic session id (``u-`` and a hash of it). ``sessions.reset`` ends a
session and leaves a forward to a fresh one, so the same ``user`` (or the old ``X-Session-Id``)
starts over while the old transcript stays readable. For a workspace agent the forwards are a small
JSON file beside the sessions; otherwise they live in memory.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from loopwright.errors import StorageError

__all__ = ["SessionKeys"]


class SessionKeys:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._forward: dict[str, str] = {}
        if path is not None and path.exists():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                self._forward = {str(k): str(v) for k, v in data.items()}
            except (OSError, ValueError, AttributeError) as exc:
                raise StorageError(f"unreadable session keys {str(path)!r}: {exc}") from exc

    @staticmethod
    def for_user(user: str) -> str:
        """The session id a ``user`` name starts with."""
        return "u-" + hashlib.sha256(user.encode()).hexdigest()[:32]

    def current(self, session_id: str) -> str:
        """Follow resets from ``session_id`` to the session in use now."""
        seen: set[str] = set()
        while (nxt := self._forward.get(session_id)) is not None and session_id not in seen:
            seen.add(session_id)
            session_id = nxt
        return session_id

    def reset(self, old: str, new: str) -> None:
        self._forward[old] = new
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            tmp.write_text(json.dumps(self._forward), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as exc:
            raise StorageError(f"cannot save session keys to {str(self.path)!r}: {exc}") from exc
