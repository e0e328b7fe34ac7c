"""How a gateway is bound and guarded: address, token, limits, retention, drain grace.

A gateway listens on loopback unless it has a token: anything else would hand every agent (and its
tools) to whoever can reach the port. :func:`check_bind` refuses such a configuration before a
socket is opened.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from loopwright.errors import ConfigError

__all__ = ["DEFAULT_PORT", "MAX_BODY_BYTES", "GatewayConfig", "check_bind", "is_loopback"]

DEFAULT_PORT = 8765
MAX_BODY_BYTES = 1024 * 1024
"""Largest request body or WebSocket message accepted (1 MiB)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayConfig:
    """Settings of one gateway. Durations are in seconds."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = field(default=None, repr=False)
    """Bearer token every request must carry; required to bind anything but loopback."""
    allowed_origins: tuple[str, ...] = ()
    """Origins (``https://host:port``) whose pages may open the WebSocket besides the gateway's own."""
    max_body_bytes: int = MAX_BODY_BYTES
    retention: float = 900.0
    """How long a finished run's result and events stay available (``agent.wait``, resume): 15 min."""
    max_retained_runs: int = 50_000
    """Finished runs kept at most; the oldest go first past this (memory bound)."""
    idempotency_ttl: float = 600.0
    grace: float = 30.0
    """On SIGTERM: how long running runs may go on before they are stopped."""
    auth_failures_before_lockout: int = 10
    auth_lockout: float = 300.0
    auth_slowdown: float = 0.1
    """Delay added to the first failed attempt of a client; it doubles with each failure (max 2 s)."""
    max_subscriber_backlog: int = 10_000
    """Events queued for one slow stream client before it is cut off (it can resume from its seq)."""
    busy_retry_after: float = 1.0
    """The retry hint (seconds) given with 503 answers."""

    def __post_init__(self) -> None:
        if self.token is not None and not self.token.strip():
            raise ConfigError("the gateway token is empty; set a long random string or none at all")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port {self.port} is not a TCP port (0-65535)")
        for name in (
            "retention",
            "idempotency_ttl",
            "grace",
            "auth_lockout",
            "auth_slowdown",
            "busy_retry_after",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(f"gateway setting {name} must be 0 or more, not {getattr(self, name)!r}")
        for name in (
            "max_body_bytes",
            "max_retained_runs",
            "auth_failures_before_lockout",
            "max_subscriber_backlog",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"gateway setting {name} must be 1 or more, not {getattr(self, name)!r}")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(config: GatewayConfig) -> None:
    """Refuse to listen beyond loopback without a token."""
    if not is_loopback(config.host) and config.token is None:
        raise ConfigError(
            f"refusing to listen on {config.host!r} without an auth token: anyone who can reach it could "
            "run the agents and their tools. Set a token (--token or LOOPWRIGHT_GATEWAY_TOKEN) or bind "
            "127.0.0.1"
        )
