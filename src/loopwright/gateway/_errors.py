"""Errors the gateway answers with: one JSON shape over HTTP, WebSocket and SSE.

``{"error": {"status": 409, "code": "busy", "message": "...", "fields": [...], "retryAfterMs": 1000}}``

=====  ===================  ==========================================================================
400    ``invalid_request``  a parameter is missing or wrong; ``fields`` names each one
401    ``unauthorized``     no or wrong bearer token
403    ``forbidden_origin`` a page of another origin, or a non-loopback Host without a token
404    ``not_found``        unknown agent, session, run, approval or method
409    ``busy``             the session is running and the queue mode is ``drop`` (or it was terminated)
413    ``too_large``        a body / WebSocket message over 1 MiB, or a message over the agent's limit
429    ``locked_out``       too many failed authentications from this client; ``retryAfterMs`` says when
503    ``unavailable``      the session's queue is full or timed out, or the gateway is shutting down;
                            ``retryAfterMs`` says when to try again
=====  ===================  ==========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loopwright.errors import (
    InputError,
    LoopwrightError,
    MessageTooLargeError,
    NotFoundError,
    SessionBusyError,
)

__all__ = ["ApiError", "FieldError", "from_exception"]


@dataclass(frozen=True, slots=True)
class FieldError:
    field: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden_origin",
    404: "not_found",
    409: "busy",
    413: "too_large",
    429: "locked_out",
    500: "internal",
    503: "unavailable",
}


@dataclass(slots=True)
class ApiError(Exception):
    """An answer other than success; raised anywhere in a handler, turned into JSON at the edge."""

    status: int
    message: str
    code: str = ""
    fields: list[FieldError] = field(default_factory=list)
    retry_after: float | None = None

    def __post_init__(self) -> None:
        if not self.code:
            self.code = _CODES.get(self.status, "error")

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.status, "code": self.code, "message": self.message}
        if self.fields:
            body["fields"] = [f.to_dict() for f in self.fields]
        if self.retry_after is not None:
            body["retryAfterMs"] = round(self.retry_after * 1000)
        return body

    def headers(self) -> dict[str, str]:
        if self.retry_after is None:
            return {}
        return {"Retry-After": str(max(1, round(self.retry_after + 0.499)))}


def from_exception(exc: BaseException, *, retry_after: float = 1.0, field_name: str = "message") -> ApiError:
    """The answer for a library exception raised while accepting a request."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, MessageTooLargeError):
        return ApiError(413, str(exc), fields=[FieldError(field_name, str(exc))])
    if isinstance(exc, InputError):
        return ApiError(400, str(exc), fields=[FieldError(field_name, str(exc))])
    if isinstance(exc, NotFoundError):
        return ApiError(404, str(exc))
    if isinstance(exc, SessionBusyError):
        return ApiError(503, str(exc), retry_after=exc.retry_after or retry_after)
    if isinstance(exc, LoopwrightError):
        return ApiError(500, str(exc), code="internal")
    return ApiError(500, "internal error", code="internal")
