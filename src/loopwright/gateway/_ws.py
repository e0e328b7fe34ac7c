"""The WebSocket: RPC frames with request ids, and event subscriptions, on one connection.

Client → server: ``{"id": 1, "method": "agent", "params": {...}}``. Server → client:
``{"id": 1, "ok": true, "result": {...}}`` or ``{"id": 1, "ok": false, "error": {...}}``; events of a
subscription: ``{"type": "event", "subscriptionId": "s1", "event": {runId, seq, stream, ts, data}}``,
and ``{"type": "end", "subscriptionId": "s1", "reason": ...}`` when a run's stream is complete.

Besides the RPC methods: ``auth`` {token} (for browsers, which cannot set headers on a WebSocket),
``subscribe`` {runId, afterSeq?} or {sessionId, agent?, after?: {runId: seq}}, ``unsubscribe``
{subscriptionId}. The upgrade is refused (403) for a page of another origin; messages over 1 MiB
close the connection (1009).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from loopwright.gateway._auth import bearer_token
from loopwright.gateway._errors import ApiError, FieldError
from loopwright.gateway._gateway import Gateway
from loopwright.gateway._http import check_browser, open_subscription
from loopwright.gateway._methods import call
from loopwright.gateway._runs import Subscription

__all__ = ["ws_endpoint"]

AUTH_TIMEOUT = 10.0


class _Connection:
    def __init__(self, gw: Gateway, ws: WebSocket) -> None:
        self.gw = gw
        self.ws = ws
        self.client = ws.client.host if ws.client is not None else "unknown"
        self.authed = not gw.auth.required
        self.subs: dict[str, Subscription] = {}
        self._send_lock = asyncio.Lock()
        self._next_sub = 0

    async def send(self, frame: dict[str, Any]) -> None:
        async with self._send_lock:
            if self.ws.application_state == WebSocketState.CONNECTED:
                await self.ws.send_text(json.dumps(frame, separators=(",", ":"), ensure_ascii=False))

    async def handle(self, frame: Any, tasks: asyncio.TaskGroup) -> None:
        rid = frame.get("id") if isinstance(frame, dict) else None
        try:
            if not isinstance(frame, dict) or not isinstance(frame.get("method"), str):
                raise ApiError(
                    400, "a frame is {id, method, params}", fields=[FieldError("method", "missing")]
                )
            method, params = frame["method"], frame.get("params")
            if method == "auth":
                token = params.get("token") if isinstance(params, dict) else None
                await self.gw.auth.check(self.client, token if isinstance(token, str) else None)
                self.authed = True
                result: dict[str, Any] = {"authenticated": True}
            elif not self.authed:
                raise ApiError(401, "authenticate first: send {method: 'auth', params: {token}}")
            elif method == "subscribe":
                result = await self._subscribe(params, tasks)
            elif method == "unsubscribe":
                sid = params.get("subscriptionId") if isinstance(params, dict) else None
                sub = self.subs.pop(str(sid), None)
                if sub is None:
                    raise ApiError(404, f"subscription {sid!r} not found")
                sub.close("unsubscribed")
                result = {"unsubscribed": sid}
            else:
                result = await call(self.gw, method, params)
        except ApiError as exc:
            await self.send({"id": rid, "ok": False, "error": exc.to_dict()})
            if exc.status in (401, 429) and frame.get("method") == "auth":
                await self.ws.close(code=4401 if exc.status == 401 else 4429)
            return
        await self.send({"id": rid, "ok": True, "result": result})

    async def _subscribe(self, params: Any, tasks: asyncio.TaskGroup) -> dict[str, Any]:
        p = params if isinstance(params, dict) else {}
        after = p.get("after")
        if after is not None and not (
            isinstance(after, dict) and all(isinstance(v, int) and v >= 0 for v in after.values())
        ):
            raise ApiError(
                400, "after must map runId to a seq", fields=[FieldError("after", "expected {runId: seq}")]
            )
        after_seq = p.get("afterSeq", 0)
        if not isinstance(after_seq, int) or after_seq < 0:
            raise ApiError(
                400, "afterSeq must be an integer >= 0", fields=[FieldError("afterSeq", "invalid")]
            )
        run_id = _opt_str(p, "runId")
        if run_id is not None:
            await self.gw.known(run_id)  # scale-out: a run of another gateway is mirrored here
        sub = await open_subscription(
            self.gw,
            run_id=run_id,
            session_id=_opt_str(p, "sessionId"),
            agent=_opt_str(p, "agent"),
            after_seq=after_seq,
            after=after,
        )
        self._next_sub += 1
        sid = f"s{self._next_sub}"
        self.subs[sid] = sub
        tasks.create_task(self._forward(sid, sub))
        return {"subscriptionId": sid}

    async def _forward(self, sid: str, sub: Subscription) -> None:
        while True:
            event = await sub.next()
            if event is None:
                self.subs.pop(sid, None)
                await self.send({"type": "end", "subscriptionId": sid, "reason": sub.closed_reason})
                return
            await self.send({"type": "event", "subscriptionId": sid, "event": event})


def _opt_str(params: dict[str, Any], name: str) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"{name} must be a string", fields=[FieldError(name, "expected a string")])
    return value


async def ws_endpoint(ws: WebSocket) -> None:
    gw: Gateway = ws.app.state.gateway
    try:
        check_browser(gw, ws.headers)
    except ApiError:
        await ws.close(code=1008)  # before accept: the upgrade is answered 403
        return
    conn = _Connection(gw, ws)
    header = bearer_token(ws.headers.get("authorization"))
    if header is not None:
        try:
            await gw.auth.check(conn.client, header)
        except ApiError as exc:
            await ws.close(code=4401 if exc.status == 401 else 4429)
            return
        conn.authed = True
    await ws.accept()
    limit = gw.config.max_body_bytes
    try:
        async with asyncio.TaskGroup() as tasks:
            try:
                while True:
                    message = await ws.receive()
                    if message["type"] == "websocket.disconnect":
                        break
                    text = message.get("text")
                    if text is None:
                        text = (message.get("bytes") or b"").decode("utf-8", "replace")
                    if len(text) > limit or (len(text) * 4 > limit and len(text.encode()) > limit):
                        await ws.close(code=1009, reason="message over 1 MiB")
                        break
                    try:
                        frame = json.loads(text)
                    except ValueError as exc:
                        await conn.send(
                            {
                                "id": None,
                                "ok": False,
                                "error": ApiError(400, f"frame is not JSON: {exc}").to_dict(),
                            }
                        )
                        continue
                    tasks.create_task(conn.handle(frame, tasks))
            finally:
                for sub in list(conn.subs.values()):
                    sub.close("connection closed")
            raise _Closed()  # the client left: cancel its requests still waiting
    except* _Closed:
        pass
    except* WebSocketDisconnect:
        pass
    except* RuntimeError:  # sending on a connection the client already closed
        pass
    with contextlib.suppress(RuntimeError, WebSocketDisconnect):
        if ws.application_state == WebSocketState.CONNECTED:
            await ws.close()


class _Closed(Exception):
    """Ends the connection's task group (its pending requests are cancelled)."""
