"""OpenAI Chat Completions provider, for OpenAI and OpenAI-compatible servers, on the official SDK.

The request body is built here as plain dicts and sent through the client's low-level ``post()``: the
SDK still does auth, HTTP errors, timeouts and SSE framing, but its per-request parameter transform
(3–5 ms walking the whole history with typing introspection) is skipped, and stream chunks are read
as plain JSON rather than pydantic models. Servers differ from OpenAI in small ways (tool-call ids
like ``"0"``, ``arguments: null`` or missing, a chunk repeating a call with its whole arguments,
usage inside a content chunk, no finish reason, ``reasoning_content``); :class:`_StreamState` absorbs
them so the loop sees one well-formed event stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, cast

import openai
from openai import AsyncOpenAI, AsyncStream

from loopwright.errors import ConfigError, ContextLengthExceededError, ModelError
from loopwright.messages import AssistantMessage, Message, Thinking, ToolCall, ToolResultMessage, Usage
from loopwright.models.base import (
    FinishReason,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    StreamFinish,
    TextDelta,
    ThinkingDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    UsageUpdate,
)

__all__ = ["OpenAIModel", "ProviderHTTPError"]

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}
_TRANSIENT_KINDS = frozenset(
    {"server_error", "internal_error", "api_error", "overloaded_error", "overloaded", "rate_limit_error"}
    | {"rate_limit_exceeded", "timeout", "service_unavailable", "engine_overloaded"}
)
_CONTEXT_RE = re.compile(
    r"context[ _]length|context window|maximum context|prompt is too long|too many tokens in the prompt", re.I
)
_TRY_AGAIN_RE = re.compile(r"try again in ((?:\d+(?:\.\d+)?(?:ms|h|m|s))+)", re.I)
_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PLACEHOLDER_KEY = "not-needed"
_DRAIN_SECONDS = 0.1


class ProviderHTTPError(ModelError):
    """A provider refused or failed a request, with what it said about it.

    ``retry_after`` is the server's hint in seconds (``retry-after-ms`` or ``retry-after`` headers, else a
    "try again in 9.8s" in the message); ``headers`` are the response headers (lower-case names);
    ``code`` and ``error_type`` are the provider's error code and type; ``body`` is the provider's error
    object (Groq's ``failed_generation``, OpenRouter's ``metadata``, ...).
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        model: str,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        headers: Mapping[str, str] | None = None,
        code: str | None = None,
        error_type: str | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            message,
            provider=provider,
            model=model,
            status=status,
            retryable=retryable,
            retry_after=retry_after,
            code=code,
        )
        self.headers = dict(headers or {})
        self.error_type = error_type
        self.body = body


class OpenAIModel:
    """A model served through the OpenAI Chat Completions API (``/chat/completions``).

    Without ``api_key`` the SDK reads ``OPENAI_API_KEY``; with a ``base_url`` (argument or
    ``OPENAI_BASE_URL``) and no key anywhere, a placeholder key is sent, as local servers need none.
    The client is created with ``max_retries=0`` (retries belong to the loop) and ``timeout``; a
    ``client`` passed in is used as it is.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: str = "openai",
        client: AsyncOpenAI | None = None,
        timeout: float = 600.0,
    ) -> None:
        self.model = model
        self.provider = provider
        self.timeout = timeout
        if client is None:
            local = bool(base_url or os.environ.get("OPENAI_BASE_URL"))
            if api_key is None and local and not os.environ.get("OPENAI_API_KEY"):
                api_key = _PLACEHOLDER_KEY
            options: dict[str, Any] = {"api_key": api_key, "timeout": timeout, "max_retries": 0}
            if base_url is not None:
                options["base_url"] = base_url
            try:
                client = AsyncOpenAI(**options)
            except openai.OpenAIError as exc:
                raise ConfigError(
                    f"cannot set up {provider} model {model!r}: {exc} "
                    "(pass api_key=..., set OPENAI_API_KEY, or give a base_url for a local server that needs no key)"
                ) from exc
        self.client = client

    @property
    def name(self) -> str:
        return f"{self.provider}:{self.model}"

    def __repr__(self) -> str:
        return (
            f"OpenAIModel({self.model!r}, provider={self.provider!r}, base_url={str(self.client.base_url)!r})"
        )

    async def aclose(self) -> None:
        """Close the HTTP client (its connection pool)."""
        await self.client.close()

    def request_body(self, request: ModelRequest, *, stream: bool = True) -> dict[str, Any]:
        """The JSON body sent to ``/chat/completions`` for ``request``."""
        messages: list[dict[str, Any]] = (
            [{"role": "system", "content": request.system}] if request.system else []
        )
        messages.extend(map(_wire_message, request.messages))
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
        body["stream"] = stream
        if stream:
            body["stream_options"] = {"include_usage": True}
        settings = request.settings
        if settings.max_tokens is not None:
            body["max_tokens"] = settings.max_tokens
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.parallel_tool_calls is not None and request.tools:
            body["parallel_tool_calls"] = settings.parallel_tool_calls
        if settings.extra:
            body.update(settings.extra)
        return body

    async def _open_stream(
        self, path: str, body: dict[str, Any]
    ) -> AsyncGenerator[tuple[str | None, str], None]:
        """POST a streaming request; its server-sent events as ``(event, data)`` pairs."""
        try:
            response = await self.client.post(
                path, body=body, cast_to=object, stream=True, stream_cls=_SSEStream
            )
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc
        return response.events()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        events = await self._open_stream("/chat/completions", self.request_body(request, stream=True))
        state = _StreamState()
        try:
            async for event, data in events:
                if data.startswith("[DONE]"):
                    state.done = True
                    continue
                try:
                    chunk = json.loads(data)
                except ValueError:
                    raise self._malformed_chunk(data) from None
                if type(chunk) is not dict:
                    continue
                if chunk.get("error") or chunk.get("object") == "error" or event == "error":
                    error = chunk.get("error")
                    raise self._payload_error(error if isinstance(error, dict) else chunk, status=None)
                for model_event in state.feed(chunk):
                    yield model_event
        except openai.OpenAIError as exc:
            raise self._error(exc, streaming=True) from exc
        finally:
            await events.aclose()
        if state.finish is None and not state.done:
            raise ModelError(
                "the stream ended before the response was complete (no finish reason and no [DONE])",
                provider=self.provider,
                model=self.model,
                retryable=True,
            )
        for model_event in state.end():
            yield model_event

    async def _post_json(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST a non-streaming request; the JSON object it answers, or a ModelError."""
        try:
            data = await self.client.post(path, body=body, cast_to=object)
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError:
                raise self._fail(f"the response is not JSON: {data[:200]!r}", retryable=True) from None
        if not isinstance(data, dict):
            raise self._fail(f"unexpected response body: {str(data)[:200]!r}")
        return data

    async def complete(self, request: ModelRequest) -> ModelResponse:
        data = await self._post_json("/chat/completions", self.request_body(request, stream=False))
        if data.get("error"):
            error = data["error"]
            raise self._payload_error(error if isinstance(error, dict) else data, status=None)
        choices = data.get("choices")
        if not choices:
            raise self._fail("the response has no choices")
        return _parse_completion(choices[0], data)

    # --- errors --------------------------------------------------------------------------------

    def _fail(self, message: str, *, retryable: bool = False) -> ModelError:
        return ModelError(message, provider=self.provider, model=self.model, retryable=retryable)

    def _error(self, exc: openai.OpenAIError, *, streaming: bool = False) -> ModelError:
        if isinstance(exc, openai.APITimeoutError):
            if streaming:
                return self._fail(f"the stream timed out: no data for {self.timeout:g} s", retryable=True)
            url = self.client.base_url
            return self._fail(f"the request to {url} timed out after {self.timeout:g} s", retryable=True)
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = str(cause) if cause is not None and str(cause) else exc.message
            what = "the stream was interrupted" if streaming else f"cannot connect to {self.client.base_url}"
            return self._fail(f"{what}: {detail}", retryable=True)
        if isinstance(exc, openai.APIStatusError):
            headers = {k.lower(): v for k, v in exc.response.headers.items()}
            body = exc.body
            if isinstance(body, dict):
                return self._payload_error(body, status=exc.status_code, headers=headers)
            text = body.strip() if isinstance(body, str) and body.strip() else exc.message
            return self._payload_error({"message": text}, status=exc.status_code, headers=headers)
        if isinstance(exc, openai.APIError):
            body = exc.body if isinstance(exc.body, dict) else {"message": exc.message}
            return self._payload_error(body, status=None)
        return self._fail(str(exc))

    def _payload_error(
        self, error: Mapping[str, Any], *, status: int | None, headers: Mapping[str, str] | None = None
    ) -> ModelError:
        """A ModelError from a provider's ``{"message", "type", "code", ...}`` error object."""
        message = error.get("message") or error.get("detail")
        if not isinstance(message, str) or not message:
            message = json.dumps(error)[:500]
        metadata = error.get("metadata")
        raw = metadata.get("raw") if isinstance(metadata, dict) else None
        if isinstance(raw, str) and raw and raw not in message:
            message = f"{message}: {raw}"
        code_value = error.get("code")
        code = str(code_value) if code_value is not None else None
        kind = error.get("type") if isinstance(error.get("type"), str) else None
        if code and code not in message and code != str(status):
            message = f"{message} (code {code!r})"
        if status is None and isinstance(code_value, int) and 400 <= code_value < 600:
            status = code_value
        common: dict[str, Any] = {"provider": self.provider, "model": self.model, "status": status}
        if code == "context_length_exceeded" or (status in (None, 400, 413) and _CONTEXT_RE.search(message)):
            return ContextLengthExceededError(message, **common)
        return ProviderHTTPError(
            message,
            **common,
            retryable=_is_retryable(status, code, kind, message),
            retry_after=_retry_after(headers or {}, message),
            headers=headers,
            code=code,
            error_type=kind,
            body=error,
        )

    def _malformed_chunk(self, data: str) -> ModelError:
        """A stream chunk that is not JSON; an ``{"error": ...}`` one still names the provider's error."""
        if '"error"' in data:
            fields = {
                key: match.group(1)
                for key in ("message", "type", "code")
                if (match := re.search(rf'"{key}"\s*:\s*"((?:[^"\\]|\\.)*)"', data))
            }
            if "message" in fields:
                with contextlib.suppress(ValueError):
                    fields["message"] = json.loads(f'"{fields["message"]}"')
                return self._payload_error(fields, status=None)
        return self._fail(f"the stream sent a chunk that is not JSON: {data[:200]!r}", retryable=True)


def _is_retryable(status: int | None, code: str | None, kind: str | None, message: str) -> bool:
    if code == "insufficient_quota" or kind == "insufficient_quota":
        return False
    if status is not None:
        if status == 429:
            return "Request too large" not in message  # larger than the whole per-minute budget
        return status in (408, 409) or status >= 500
    return (code in _TRANSIENT_KINDS) or (kind in _TRANSIENT_KINDS)


def _retry_after(headers: Mapping[str, str], message: str) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date), else the message."""
    try:
        if "retry-after-ms" in headers:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        if "retry-after" in headers:
            value = headers["retry-after"].strip()
            try:
                return max(0.0, float(value))
            except ValueError:
                when = parsedate_to_datetime(value)
                return max(0.0, (when - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError, IndexError, OverflowError):
        pass
    if match := _TRY_AGAIN_RE.search(message):
        return sum(float(n) * _DURATION_UNITS[unit] for n, unit in _DURATION_PART_RE.findall(match.group(1)))
    return None


# --- request -------------------------------------------------------------------------------------


def _wire_message(message: Message) -> dict[str, Any]:
    if isinstance(message, AssistantMessage):
        if not message.tool_calls:
            return {"role": "assistant", "content": message.content}
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in message.tool_calls
            ],
        }
    if isinstance(message, ToolResultMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    return {"role": "user", "content": message.content}


# --- response ------------------------------------------------------------------------------------


class _SSEStream(AsyncStream[tuple[str | None, str]]):
    """The SDK's stream, yielding each event's ``(event, data)`` text, ``[DONE]`` included.

    The SDK's own chunk parsing is bypassed so that ``[DONE]`` (a complete stream) and error payloads
    that are not JSON can be told apart; after ``[DONE]`` the rest of the body is drained briefly so an
    HTTP/1.1 connection goes back to the pool.
    """

    def events(self) -> AsyncGenerator[tuple[str | None, str], None]:
        """The event iterator; closing it closes the response."""
        return cast(AsyncGenerator[tuple[str | None, str], None], self._iterator)

    async def __stream__(self) -> AsyncIterator[tuple[str | None, str]]:
        events = self._iter_events()
        try:
            async for sse in events:
                yield sse.event, sse.data
                if sse.data.startswith("[DONE]"):
                    try:
                        async with asyncio.timeout(_DRAIN_SECONDS):
                            async for _ in events:
                                pass
                    except (TimeoutError, openai.APIError):
                        pass
                    return
        finally:
            await self.response.aclose()


def _usage(usage: Mapping[str, Any]) -> Usage:
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cache_read_tokens=int(cached or 0),
        requests=1,
    )


def _finish(raw: str | None, has_calls: bool) -> FinishReason:
    if raw is None:
        return "tool_calls" if has_calls else "stop"
    return _FINISH.get(raw, "other")


def _arguments(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _reasoning(fields: Mapping[str, Any]) -> str | None:
    text = fields.get("reasoning_content") or fields.get("reasoning")
    return text if isinstance(text, str) and text else None


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


class _Call:
    """One tool call being streamed: its wire id and name, and its argument text so far."""

    __slots__ = ("id", "name", "parts", "position", "size", "started")

    def __init__(self, position: int) -> None:
        self.position = position
        self.id: str | None = None
        self.name: str | None = None
        self.parts: list[str] = []
        self.size = 0
        self.started = False

    def new_text(self, args: str, repeat: bool) -> str:
        """The part of ``args`` that is new. A chunk that repeats the whole arguments adds nothing twice."""
        if not self.size or len(args) < self.size:
            return args
        so_far = "".join(self.parts)
        self.parts = [so_far]
        complete = _is_json(so_far)
        if (repeat or complete) and args.startswith(so_far):
            return args[self.size :]
        if repeat and complete:
            return ""
        return args


class _StreamState:
    """Turns Chat Completions chunks (plain dicts) into model events, one response at a time."""

    __slots__ = ("by_index", "calls", "done", "finish", "model")

    def __init__(self) -> None:
        self.calls: list[_Call] = []
        self.by_index: dict[int, _Call] = {}
        self.finish: str | None = None
        self.model: str | None = None
        self.done = False

    def feed(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        if self.model is None and isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        choices = chunk.get("choices")
        if choices and isinstance(choices, list):
            choice = choices[0]
            delta = choice.get("delta")
            if delta:
                content = delta.get("content")
                if content and isinstance(content, str):
                    out.append(TextDelta(content))
                refusal = delta.get("refusal")
                if refusal and isinstance(refusal, str):
                    out.append(TextDelta(refusal))
                reasoning = _reasoning(delta)
                if reasoning:
                    out.append(ThinkingDelta(reasoning))
                tool_calls = delta.get("tool_calls")
                if tool_calls:
                    for tool_call in tool_calls:
                        self._tool_call(tool_call, out)
            finish = choice.get("finish_reason")
            if finish:
                self.finish = str(finish)
        usage = chunk.get("usage")
        if usage and isinstance(usage, dict):
            out.append(UsageUpdate(_usage(usage)))
        return out

    def _find(self, index: Any, call_id: str | None) -> _Call | None:
        if isinstance(index, int):
            call = self.by_index.get(index)
            if call is not None and call_id is not None and call.id is not None and call_id != call.id:
                return None  # a different call at the same index (some Gemini-compatible servers)
            return call
        if call_id is not None:
            return next((c for c in self.calls if c.id == call_id), None)
        return self.calls[-1] if self.calls else None

    def _tool_call(self, delta: dict[str, Any], out: list[ModelEvent]) -> None:
        index = delta.get("index")
        call_id = delta.get("id") or None
        function = delta.get("function") or {}
        name = function.get("name") or None
        args = _arguments(function.get("arguments"))
        call = self._find(index, call_id)
        repeat = False
        if call is None:
            call = _Call(len(self.calls))
            self.calls.append(call)
        elif call_id is not None and call_id == call.id:
            repeat = True
        if isinstance(index, int):
            self.by_index[index] = call
        if call.id is None and call_id is not None:
            call.id = str(call_id)
        if call.name is None and name is not None:
            call.name = str(name)
        if args:
            args = call.new_text(args, repeat)
        if not call.started and call.name is not None:
            self._start(call, out)
        if args:
            call.parts.append(args)
            call.size += len(args)
            if call.started:
                out.append(ToolCallArgsDelta(call.position, args))

    def _start(self, call: _Call, out: list[ModelEvent]) -> None:
        call.started = True
        out.append(ToolCallStart(call.position, call.id or f"call_{call.position}", call.name or ""))
        if call.size:
            out.append(ToolCallArgsDelta(call.position, "".join(call.parts)))

    def end(self) -> list[ModelEvent]:
        """The closing events: calls that never got a name, then the finish."""
        out: list[ModelEvent] = []
        for call in self.calls:
            if not call.started:
                self._start(call, out)
        reason = _finish(self.finish, bool(self.calls))
        out.append(StreamFinish(reason, raw_reason=self.finish, model=self.model))
        return out


def _parse_completion(choice: Mapping[str, Any], data: Mapping[str, Any]) -> ModelResponse:
    message = choice.get("message") or {}
    calls = tuple(
        ToolCall(
            id=str(call.get("id") or f"call_{i}"),
            name=str((call.get("function") or {}).get("name") or ""),
            arguments=_arguments((call.get("function") or {}).get("arguments")) or "{}",
        )
        for i, call in enumerate(message.get("tool_calls") or ())
    )
    content = message.get("content")
    refusal = message.get("refusal")
    text = content if isinstance(content, str) else (refusal if isinstance(refusal, str) else "")
    reasoning = _reasoning(message)
    raw_finish = choice.get("finish_reason")
    raw = str(raw_finish) if raw_finish else None
    finish = _finish(raw, bool(calls))
    if calls and finish == "stop":
        finish = "tool_calls"
    usage = data.get("usage")
    return ModelResponse(
        content=text,
        tool_calls=calls,
        thinking=(Thinking(text=reasoning),) if reasoning else (),
        usage=_usage(usage) if isinstance(usage, dict) else Usage(requests=1),
        finish_reason=finish,
        raw_finish_reason=raw,
        model=data.get("model") if isinstance(data.get("model"), str) else None,
    )
