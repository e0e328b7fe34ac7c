"""HTTP edges: the RPC route, the SSE event stream, body limits and bearer checks.

``POST /api/<method>`` takes the method's params as its JSON body and answers the result, or
``{"error": {...}}`` with the status of :mod:`loopwright.gateway._errors`. ``GET /api/events``
streams a run's (``runId``, ``afterSeq``) or a session's (``sessionId``) events as Server-Sent
Events; each SSE ``id`` is ``<runId>:<seq>``, so ``Last-Event-ID`` resumes where a dropped
connection stopped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from loopwright.gateway._auth import bearer_token
from loopwright.gateway._config import is_loopback
from loopwright.gateway._errors import ApiError, FieldError
from loopwright.gateway._gateway import Gateway
from loopwright.gateway._methods import call
from loopwright.gateway._runs import Event, Subscription

__all__ = [
    "authenticate",
    "check_browser",
    "error_response",
    "origin_allowed",
    "read_json",
    "rpc_endpoint",
    "sse_endpoint",
    "sse_format",
]

KEEPALIVE = 15.0


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse({"error": error.to_dict()}, status_code=error.status, headers=error.headers())


def client_of(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def origin_allowed(origin: str | None, host: str | None, allowed: tuple[str, ...]) -> bool:
    """No Origin (not a browser), the gateway's own origin, or one configured."""
    if origin is None or origin in allowed:
        return True
    parts = urlsplit(origin)
    return bool(host) and parts.scheme in ("http", "https") and parts.netloc == host


def check_browser(gw: Gateway, headers: Headers) -> None:
    """Refuse what a web page of another site could send through a visitor's browser.

    A page from another origin is refused (its ``Origin`` is not ours). Without a token the gateway
    answers only requests addressed to a loopback name: a site that rebinds its DNS name to
    127.0.0.1 sends its own name as ``Host`` and is refused too."""
    host = headers.get("host")
    if not origin_allowed(headers.get("origin"), host, gw.config.allowed_origins):
        raise ApiError(403, "requests from pages of another origin are refused (see --allow-origin)")
    if not gw.auth.required and host is not None and not is_loopback(urlsplit(f"//{host}").hostname or ""):
        raise ApiError(
            403, f"host {host!r} is not a loopback name; a gateway without a token answers only those"
        )


async def authenticate(gw: Gateway, request: Request) -> None:
    check_browser(gw, request.headers)
    await gw.auth.check(client_of(request), bearer_token(request.headers.get("authorization")))


async def read_json(request: Request, limit: int) -> Any:
    """The request's JSON body; 413 past ``limit`` bytes (checked while reading), 400 if not JSON."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"request body is {declared} bytes, over the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, f"request body is over the limit of {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:
        raise ApiError(400, "the client left before sending the whole body") from None
    body = b"".join(chunks)
    if not body.strip():
        return {}
    try:
        return json.loads(body)
    except ValueError as exc:
        raise ApiError(
            400, f"request body is not JSON: {exc}", fields=[FieldError("body", str(exc))]
        ) from None


async def rpc_endpoint(request: Request) -> Response:
    gw: Gateway = request.app.state.gateway
    try:
        await authenticate(gw, request)
        method = request.path_params["method"]
        params = await read_json(request, gw.config.max_body_bytes) if request.method == "POST" else {}
        return JSONResponse(await call(gw, method, params))
    except ApiError as exc:
        return error_response(exc)


def sse_format(event: Event) -> str:
    data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return f"id: {event['runId']}:{event['seq']}\nevent: {event['stream']}\ndata: {data}\n\n"


def _int(value: str | None, name: str) -> int:
    if value is None or value == "":
        return 0
    try:
        number = int(value)
    except ValueError:
        raise ApiError(
            400, f"{name} must be an integer", fields=[FieldError(name, "not an integer")]
        ) from None
    if number < 0:
        raise ApiError(400, f"{name} must be 0 or more", fields=[FieldError(name, "negative")])
    return number


async def open_subscription(
    gw: Gateway,
    *,
    run_id: str | None,
    session_id: str | None,
    agent: str | None,
    after_seq: int = 0,
    after: dict[str, int] | None = None,
    since_run: str | None = None,
) -> Subscription:
    """A subscription to a run or a session (400 without either, 404 for unknown ones)."""
    if run_id is not None:
        gw.record(run_id)  # 404
        return gw.registry.subscribe_run(run_id, after_seq)
    if session_id is None:
        message = "give runId or sessionId"
        raise ApiError(400, message, fields=[FieldError("runId", message)])
    name = gw.agent(agent)[0]
    scaled = gw.scaled  # scale-out: the session's runs on every gateway
    if scaled is not None:
        return await scaled.subscribe_session(name, session_id, after, since_run)
    return gw.registry.subscribe_session(name, session_id, after=after, since_run=since_run)


async def sse_endpoint(request: Request) -> Response:
    gw: Gateway = request.app.state.gateway
    try:
        await authenticate(gw, request)
        q = request.query_params
        run_id, session_id = q.get("runId"), q.get("sessionId")
        after_seq = _int(q.get("afterSeq"), "afterSeq")
        after: dict[str, int] = {}
        since_run = None
        last = request.headers.get("last-event-id")
        if last and ":" in last:
            last_run, _, last_seq = last.rpartition(":")
            if run_id is not None and last_run == run_id:
                after_seq = max(after_seq, _int(last_seq, "Last-Event-ID"))
            elif run_id is None:
                after[last_run] = _int(last_seq, "Last-Event-ID")
                since_run = last_run
        if run_id is not None:
            await gw.known(run_id)  # scale-out: a run of another gateway is mirrored here
        sub = await open_subscription(
            gw,
            run_id=run_id,
            session_id=session_id,
            agent=q.get("agent"),
            after_seq=after_seq,
            after=after,
            since_run=since_run,
        )
    except ApiError as exc:
        return error_response(exc)
    return StreamingResponse(
        _sse_stream(sub),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _sse_stream(sub: Subscription) -> AsyncIterator[str]:
    try:
        yield ": connected\n\n"
        while True:
            try:
                async with asyncio.timeout(KEEPALIVE):
                    event = await sub.next()
            except TimeoutError:
                yield ": keepalive\n\n"
                continue
            if event is None:
                yield f"event: end\ndata: {json.dumps({'reason': sub.closed_reason})}\n\n"
                return
            yield sse_format(event)
    finally:
        sub.close("client left")
