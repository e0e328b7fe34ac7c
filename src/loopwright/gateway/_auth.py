"""Bearer-token checks, with a slowdown and a lockout for clients that keep guessing.

The token is compared with :func:`hmac.compare_digest` (time independent of where the strings
differ) and never logged or echoed. Each failure from a client delays its answer a little more
(``slowdown`` doubling, at most 2 s); after ``max_failures`` failures the client is locked out for
``lockout`` seconds, even with the right token, so guessing is slow.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from loopwright.gateway._errors import ApiError

__all__ = ["AuthGuard", "bearer_token"]

_MAX_DELAY = 2.0


@dataclass(slots=True)
class _Client:
    failures: int = 0
    locked_until: float = 0.0


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


class AuthGuard:
    """Checks tokens for one gateway and remembers failures per client address."""

    def __init__(
        self,
        token: str | None,
        *,
        max_failures: int = 10,
        lockout: float = 300.0,
        slowdown: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._token = token.encode() if token is not None else None
        self.max_failures = max_failures
        self.lockout = lockout
        self.slowdown = slowdown
        self.clock = clock
        self.sleep = sleep
        self._clients: dict[str, _Client] = {}

    @property
    def required(self) -> bool:
        return self._token is not None

    def __repr__(self) -> str:  # never show the token
        return f"AuthGuard(required={self.required}, max_failures={self.max_failures})"

    async def check(self, client: str, token: str | None) -> None:
        """Return if ``token`` is right for ``client``; else wait a little and raise 401 (or 429)."""
        if self._token is None:
            return
        state = self._clients.get(client)
        now = self.clock()
        if state is not None and state.locked_until > now:
            raise ApiError(
                429,
                "too many failed authentications from this client; try again later",
                retry_after=state.locked_until - now,
            )
        if token is None:  # not a guess: no slowdown, no count towards the lockout
            raise ApiError(401, "missing bearer token: send `Authorization: Bearer <token>`")
        if hmac.compare_digest(token.encode(), self._token):
            if state is not None:
                del self._clients[client]
            return
        state = self._clients.setdefault(client, _Client())
        state.failures += 1
        if state.failures >= self.max_failures:
            state.failures = 0
            state.locked_until = now + self.lockout
        delay = min(_MAX_DELAY, self.slowdown * 2 ** (min(state.failures, 16) - 1)) if state.failures else 0.0
        if delay > 0:
            await self.sleep(delay)
        raise ApiError(401, "invalid bearer token: send `Authorization: Bearer <token>`")

    def failures(self, client: str) -> int:
        state = self._clients.get(client)
        return 0 if state is None else state.failures

    def locked(self, client: str) -> bool:
        state = self._clients.get(client)
        return state is not None and state.locked_until > self.clock()
