"""The hook bus: named extension points inside the loop and the entry points around it.

``agent.hooks.on("before_tool_call", handler)`` subscribes; a handler is a sync or async function
of one event object (see :mod:`loopwright.hooks._events`), called in subscription order. Handlers
change the event's changeable fields to act (rewrite arguments, skip a call, override a result, add
context). A handler that raises :class:`StopRun` in a ``before_*`` hook ends the run with that
reason and message; any other exception is logged and the run goes on: a broken plugin must not
take a conversation down.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal, get_args

__all__ = ["HOOKS", "HookBus", "HookName", "StopRun"]

log = logging.getLogger("loopwright.hooks")

HookName = Literal[
    "before_agent_start",
    "agent_end",
    "before_model_call",
    "after_model_call",
    "before_tool_call",
    "after_tool_call",
    "tool_result_persist",
    "before_compaction",
    "after_compaction",
    "message_received",
    "message_sending",
    "message_sent",
    "session_start",
    "session_end",
    "gateway_start",
    "gateway_stop",
]
HOOKS: tuple[str, ...] = get_args(HookName)

Handler = Callable[[Any], "Awaitable[Any] | Any"]


class StopRun(Exception):
    """Raised by a ``before_*`` hook handler: end the run now with ``reason`` and ``message`` as its
    final text (for example a spent budget: ``StopRun("Your monthly budget is used up.")``)."""

    def __init__(self, message: str, *, reason: Literal["limit", "stopped", "guardrail"] = "limit") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


class HookBus:
    """Handlers by hook name. ``has(name)`` is a dict lookup: unused hooks cost nothing."""

    __slots__ = ("_handlers",)

    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = {}

    def on(self, name: str, handler: Handler) -> Callable[[], None]:
        """Call ``handler`` at hook ``name``; returns a function that unsubscribes it."""
        if name not in HOOKS:
            raise ValueError(f"unknown hook {name!r}; hooks are: {', '.join(HOOKS)}")
        if not callable(handler):
            raise TypeError(f"hook handler for {name!r} must be callable, not {handler!r}")
        self._handlers.setdefault(name, []).append(handler)

        def unsubscribe() -> None:
            handlers = self._handlers.get(name, [])
            if handler in handlers:
                handlers.remove(handler)
            if not handlers:
                self._handlers.pop(name, None)

        return unsubscribe

    def has(self, name: str) -> bool:
        return name in self._handlers

    def has_any(self, names: tuple[str, ...]) -> bool:
        handlers = self._handlers
        return bool(handlers) and any(n in handlers for n in names)

    async def fire(self, name: str, event: Any) -> Any:
        """Call the handlers of ``name`` in order with ``event``; returns the event (changed or not).
        :class:`StopRun` propagates; other exceptions are logged."""
        for handler in tuple(self._handlers.get(name, ())):
            try:
                result = handler(event)
                if inspect.isawaitable(result):
                    await result
            except StopRun:
                if name.startswith("before_"):
                    raise
                log.error(
                    "hook handler %r raised StopRun in %s, which cannot stop a run; ignored", handler, name
                )
            except Exception:
                log.exception("hook handler %r for %s failed; continuing", handler, name)
        return event

    def fire_sync(self, name: str, event: Any) -> Any:
        """:meth:`fire` for hooks that must not wait (``tool_result_persist``): async handlers are refused."""
        for handler in tuple(self._handlers.get(name, ())):
            try:
                result = handler(event)
                if inspect.isawaitable(result):
                    close = getattr(result, "close", None)
                    if close is not None:
                        close()
                    log.error("hook handler %r for %s must be synchronous; ignored", handler, name)
            except StopRun:
                log.error(
                    "hook handler %r raised StopRun in %s, which cannot stop a run; ignored", handler, name
                )
            except Exception:
                log.exception("hook handler %r for %s failed; continuing", handler, name)
        return event
