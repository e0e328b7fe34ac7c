"""Delivery of run events to subscribers (``agent.on``) and to a stream consumer."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from loopwright.events import RunEvent

__all__ = ["EventSink", "Listener", "Listeners"]

log = logging.getLogger("loopwright")

Listener = Callable[[RunEvent], Awaitable[None] | None]


class Listeners:
    """Subscribers by event ``type``, by specification name (``"tool:start"``) or ``"*"`` for all."""

    def __init__(self) -> None:
        self._by_key: dict[str, list[Listener]] = {}

    def add(self, key: str, listener: Listener) -> Callable[[], None]:
        self._by_key.setdefault(key, []).append(listener)

        def remove() -> None:
            listeners = self._by_key.get(key, [])
            if listener in listeners:
                listeners.remove(listener)

        return remove

    def __bool__(self) -> bool:
        return any(self._by_key.values())

    def for_event(self, event: RunEvent) -> list[Listener]:
        by_key = self._by_key
        found: list[Listener] = []
        for key in (event.type, event.name, "*"):
            listeners = by_key.get(key)
            if listeners:
                found.extend(listeners)
        return found


class EventSink:
    """Where a run's events go. ``active`` is False when nobody listens, so the loop can skip
    building events on the hot path."""

    __slots__ = ("_forward", "_listeners", "active")

    def __init__(self, listeners: Listeners | None = None, forward: Callable[[RunEvent], Any] | None = None):
        self._listeners = listeners if listeners else None
        self._forward = forward
        self.active = self._listeners is not None or forward is not None

    async def emit(self, event: RunEvent) -> None:
        if self._forward is not None:
            self._forward(event)
        if self._listeners is not None:
            for listener in self._listeners.for_event(event):
                try:
                    result = listener(event)
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    # An observer must never break the run it observes.
                    log.exception("event listener %r failed on %s", listener, event.type)
