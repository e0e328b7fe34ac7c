"""An OpenAI-compatible endpoint, so the official ``openai`` client (and tools built on it) can chat
with an agent.

- ``GET /v1/models``: one model per agent, named by the agent.
- ``POST /v1/chat/completions``: ``model`` names the agent. The gateway keeps the conversation, so
  only the last user message of ``messages`` is sent; earlier ones are already in the session.
  The session is ``X-Session-Id`` when given, else one per ``user``, else a new one per request; the
  answer's ``X-Session-Id`` header says which. ``stream: true`` answers chat.completion.chunk events.

Errors use OpenAI's shape, ``{"error": {"message", "type", "code", "param"}}``, with the gateway's
statuses (400, 401, 404 unknown model, 409, 413, 503 with ``Retry-After``).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from loopwright.errors import InputError
from loopwright.gateway._errors import ApiError, FieldError
from loopwright.gateway._gateway import Gateway
from loopwright.gateway._http import authenticate, read_json
from loopwright.gateway._runs import RunRecord
from loopwright.sessions.base import validate_session_id

__all__ = ["chat_completions", "list_models"]


def _openai_error(error: ApiError) -> JSONResponse:
    param = error.fields[0].field if error.fields else None
    body = {"error": {"message": error.message, "type": error.code, "code": error.code, "param": param}}
    return JSONResponse(body, status_code=error.status, headers=error.headers())


async def list_models(request: Request) -> Response:
    gw: Gateway = request.app.state.gateway
    try:
        await authenticate(gw, request)
    except ApiError as exc:
        return _openai_error(exc)
    created = int(time.time())
    data = [
        {"id": name, "object": "model", "created": created, "owned_by": "loopwright"} for name in gw.agents
    ]
    return JSONResponse({"object": "list", "data": data})


def _last_user_text(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list", fields=[FieldError("messages", "empty")])
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        raise ApiError(
            400,
            "the last message must have role 'user'",
            fields=[FieldError("messages", "last role is not user")],
        )
    content = last.get("content")
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        content = "\n".join(str(p) for p in parts)
    if not isinstance(content, str):
        raise ApiError(
            400, "the last message's content must be text", fields=[FieldError("messages", "no text")]
        )
    return content


def _session_for(gw: Gateway, agent: str, request: Request, body: dict[str, Any]) -> str | None:
    keys = gw.keys[agent]
    header = request.headers.get("x-session-id")
    if header:
        try:
            validate_session_id(header)
        except InputError as exc:
            raise ApiError(400, str(exc), fields=[FieldError("X-Session-Id", str(exc))]) from None
        return keys.current(header)
    user = body.get("user")
    if isinstance(user, str) and user:
        return keys.current(keys.for_user(user))
    return None


async def chat_completions(request: Request) -> Response:
    gw: Gateway = request.app.state.gateway
    try:
        await authenticate(gw, request)
        body = await read_json(request, gw.config.max_body_bytes)
        if not isinstance(body, dict):
            raise ApiError(
                400, "the body must be a JSON object", fields=[FieldError("body", "not an object")]
            )
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise ApiError(
                400, "model is required: it names the agent", fields=[FieldError("model", "missing")]
            )
        if model not in gw.agents:
            raise ApiError(404, f"model {model!r} not found; models are the agents: {', '.join(gw.agents)}")
        text = _last_user_text(body)
        session_id = _session_for(gw, model, request, body)
        record, _ = await gw.submit(text, agent=model, session_id=session_id)
    except ApiError as exc:
        return _openai_error(exc)
    headers = {"X-Session-Id": record.session_id, "X-Run-Id": record.run_id}
    if body.get("stream"):
        sub = gw.registry.subscribe_run(record.run_id)
        return StreamingResponse(
            _chunks(record, sub),
            media_type="text/event-stream",
            headers={**headers, "Cache-Control": "no-store"},
        )
    await record.done.wait()
    if record.status != "ok":
        return _with_headers(_openai_error(_run_error(gw, record)), headers)
    return JSONResponse(_completion(record), headers=headers)


def _with_headers(response: Response, headers: dict[str, str]) -> Response:
    for key, value in headers.items():
        response.headers[key] = value
    return response


def _run_error(gw: Gateway, record: RunRecord) -> ApiError:
    error = record.error or {}
    if error.get("code") == "busy":
        return ApiError(503, str(error.get("message")), retry_after=gw.config.busy_retry_after)
    if error.get("code") == "too_large":
        return ApiError(413, str(error.get("message")))
    return ApiError(500, f"the run failed: {error.get('message')}", code=str(error.get("code", "run_failed")))


def _usage(record: RunRecord) -> dict[str, int]:
    usage = record.usage or {}
    prompt = int(usage.get("inputTokens", 0) or 0)
    completion = int(usage.get("outputTokens", 0) or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _finish_reason(record: RunRecord) -> str:
    return "length" if record.reason in ("max_steps", "limit") else "stop"


def _completion(record: RunRecord) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{record.run_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": record.agent,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": record.text},
                "finish_reason": _finish_reason(record),
            }
        ],
        "usage": _usage(record),
    }


async def _chunks(record: RunRecord, sub: Any) -> AsyncIterator[str]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body = {
            "id": f"chatcmpl-{record.run_id}",
            "object": "chat.completion.chunk",
            "created": created,
            "model": record.agent,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    try:
        yield chunk({"role": "assistant", "content": ""})
        while (event := await sub.next()) is not None:
            data = event["data"]
            if event["stream"] == "assistant" and data.get("kind") == "text":
                yield chunk({"content": data["delta"]})
        if record.status == "ok":
            yield chunk({}, _finish_reason(record), usage=_usage(record))
        else:
            error = record.error or {}
            body = {
                "error": {
                    "message": error.get("message", "the run failed"),
                    "type": error.get("code"),
                    "code": error.get("code"),
                }
            }
            yield f"data: {json.dumps(body)}\n\n"
        yield "data: [DONE]\n\n"
    finally:
        sub.close("client left")
