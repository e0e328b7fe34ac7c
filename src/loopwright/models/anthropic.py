"""Anthropic Messages API provider (``/v1/messages``), on the official ``anthropic`` SDK.

As for OpenAI, the request body is built here as plain dicts and sent, already encoded as JSON, through
the client's low-level ``post()``: the SDK still does auth, the ``anthropic-version`` header, HTTP
errors, timeouts and SSE framing, but its per-request parameter transform (which walks the whole
history with typing introspection) and its copy of the body are skipped, and stream events are read as
plain JSON rather than pydantic models (:mod:`loopwright.models._anthropic_stream`).

Prompt caching: with ``cache=True`` the stable prefix of the system prompt
(:attr:`~loopwright.models.ModelRequest.stable_system`) and the last tool definition carry a
``cache_control`` breakpoint, so repeated runs read the tools and the stable prompt from the cache.

Thinking is configured through ``settings.extra`` (``{"thinking": {"type": "enabled",
"budget_tokens": 2048}}``); thinking blocks come back with their signatures and are echoed back first
in the assistant turn, as the API requires.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import anthropic
import httpx2
from anthropic import AsyncAnthropic

from loopwright.errors import ConfigError, ContextLengthExceededError, ModelError
from loopwright.messages import AssistantMessage, Message, Thinking, ToolCall, ToolResultMessage
from loopwright.models._anthropic_stream import SSEStream, StreamState, parse_message
from loopwright.models.base import ModelEvent, ModelRequest, ModelResponse, ToolDefinition

__all__ = ["AnthropicModel"]

_PLACEHOLDER_KEY = "not-needed"
_CONTEXT_RE = re.compile(
    r"prompt is too long|exceed context limit|context window|context[ _]length|too many tokens", re.I
)
_TRANSIENT_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})
_RATE_LIMITS = ("requests", "tokens", "input-tokens", "output-tokens")


class AnthropicModel:
    """A Claude model served through the Anthropic Messages API.

    Without ``api_key`` the SDK reads ``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN`` and its other
    credential sources); with a ``base_url`` (argument or ``ANTHROPIC_BASE_URL``) and no key anywhere,
    a placeholder key is sent, as local servers need none. A base URL may end in ``/v1`` or not. The
    client is created with ``max_retries=0`` (retries belong to the loop) and ``timeout``; a ``client``
    passed in is used as it is. ``max_tokens`` is sent when the request's settings give none (the API
    requires it).

    Failures raise :class:`~loopwright.models.ProviderHTTPError` for what the API refused (HTTP errors and
    ``error`` events in a stream; ``code`` and ``error_type`` are Anthropic's error type, ``retry_after``
    comes from ``retry-after`` or the exhausted ``anthropic-ratelimit-*`` reset),
    :class:`~loopwright.errors.ContextLengthExceededError` for a prompt that does not fit, and a retryable
    :class:`~loopwright.errors.ModelError` for connection failures and streams cut short.
    """

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: AsyncAnthropic | None = None,
        timeout: float = 600.0,
        max_tokens: int = 4096,
        cache: bool = True,
    ) -> None:
        self.model = model
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.cache = cache
        if client is None:
            client = _make_client(model, base_url, api_key, timeout)
        self.client = client
        # The SDK's base URL has no /v1 (https://api.anthropic.com); local servers often give one.
        self._path = "messages" if client.base_url.path.rstrip("/").endswith("/v1") else "v1/messages"

    @property
    def name(self) -> str:
        return f"{self.provider}:{self.model}"

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r}, base_url={str(self.client.base_url)!r}, cache={self.cache!r})"

    async def aclose(self) -> None:
        """Close the HTTP client (its connection pool)."""
        await self.client.close()

    def request_body(self, request: ModelRequest, *, stream: bool = True) -> dict[str, Any]:
        """The JSON body sent to ``/v1/messages`` for ``request``."""
        settings = request.settings
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": settings.max_tokens or self.max_tokens,
        }
        system = _system_blocks(request.system, request.stable_system, self.cache)
        if system:
            body["system"] = system
        body["messages"] = _wire_messages(request.messages)
        if request.tools:
            body["tools"] = _wire_tools(request.tools, self.cache)
            if settings.parallel_tool_calls is False:
                body["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
        body["stream"] = stream
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.extra:
            body.update(settings.extra)
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        body, content = _encoded(self.request_body(request, stream=True))
        try:
            response = await self.client.post(
                self._path, body=body, content=content, cast_to=object, stream=True, stream_cls=SSEStream
            )
        except anthropic.AnthropicError as exc:
            raise self._error(exc) from exc
        events = response.events()
        state = StreamState()
        try:
            async for event, data in events:
                if not data:
                    continue
                try:
                    payload = json.loads(data)
                except ValueError:
                    raise self._malformed_event(event, data) from None
                if type(payload) is not dict:
                    continue
                kind = payload.get("type") or event
                if kind == "error":
                    error = payload.get("error")
                    raise self._payload_error(error if isinstance(error, dict) else payload, status=None)
                for model_event in state.feed(kind, payload):
                    yield model_event
        except anthropic.AnthropicError as exc:
            raise self._error(exc, streaming=True) from exc
        finally:
            await events.aclose()
        if not state.done:
            raise self._fail("the stream ended before the response was complete (no message_stop)", True)
        for model_event in state.end():
            yield model_event

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body, content = _encoded(self.request_body(request, stream=False))
        try:
            data = await self.client.post(self._path, body=body, content=content, cast_to=object)
        except anthropic.AnthropicError as exc:
            raise self._error(exc) from exc
        except ValueError:  # a JSON content type with a body that is not JSON
            raise self._fail("the response is not JSON", True) from None
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError:
                raise self._fail(f"the response is not JSON: {data[:200]!r}", True) from None
        if not isinstance(data, dict):
            raise self._fail(f"unexpected response body: {str(data)[:200]!r}")
        if data.get("type") == "error" or "error" in data:
            error = data.get("error")
            raise self._payload_error(error if isinstance(error, dict) else data, status=None, body=data)
        return parse_message(data)

    # --- errors --------------------------------------------------------------------------------

    def _fail(self, message: str, retryable: bool = False) -> ModelError:
        return ModelError(message, provider=self.provider, model=self.model, retryable=retryable)

    def _error(self, exc: anthropic.AnthropicError, *, streaming: bool = False) -> ModelError:
        if isinstance(exc, anthropic.APITimeoutError):
            if streaming:
                return self._fail(f"the stream timed out: no data for {self.timeout:g} s", True)
            return self._fail(
                f"the request to {self.client.base_url} timed out after {self.timeout:g} s", True
            )
        if isinstance(exc, anthropic.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = str(cause) if cause is not None and str(cause) else exc.message
            if streaming:
                what = "the stream was interrupted"
            elif cause is None or isinstance(cause, httpx2.ConnectError):
                what = f"cannot connect to {self.client.base_url}"
            else:
                what = f"the response from {self.client.base_url} was interrupted"
            return self._fail(f"{what}: {detail}", True)
        if isinstance(exc, anthropic.APIStatusError):
            headers = {k.lower(): v for k, v in exc.response.headers.items()}
            body = exc.body
            if isinstance(body, dict):
                error = body.get("error")
                return self._payload_error(
                    error if isinstance(error, dict) else body,
                    status=exc.status_code,
                    headers=headers,
                    body=body,
                )
            text = body.strip() if isinstance(body, str) else ""
            return self._payload_error({"message": text}, status=exc.status_code, headers=headers)
        if isinstance(exc, anthropic.APIError):
            body = exc.body if isinstance(exc.body, dict) else {"message": exc.message}
            return self._payload_error(body, status=None)
        return self._fail(str(exc))

    def _payload_error(
        self,
        error: Mapping[str, Any],
        *,
        status: int | None,
        headers: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> ModelError:
        """A ModelError from Anthropic's ``{"type": "error", "error": {"type", "message"}}`` envelope."""
        # Imported here: the shared HTTP error type lives with the OpenAI provider, whose SDK takes
        # 0.7 s to import, and a run that never fails should not pay for it.
        from loopwright.models.openai import ProviderHTTPError

        headers = headers or {}
        kind = error.get("type") if isinstance(error.get("type"), str) else None
        message = error.get("message")
        if not isinstance(message, str) or not message.strip():
            message = "the response gave no error details"
        details = error.get("details")
        detail_code = details.get("error_code") if isinstance(details, dict) else None
        code = detail_code if isinstance(detail_code, str) else kind
        if kind and kind not in message:
            message = f"{message} ({kind})"
        common: dict[str, Any] = {"provider": self.provider, "model": self.model, "status": status}
        if status in (None, 400, 413) and _CONTEXT_RE.search(message):
            return ContextLengthExceededError(message, **common, code=code)
        return ProviderHTTPError(
            message,
            **common,
            retryable=_is_retryable(status, kind, headers),
            retry_after=_retry_after(headers) if status is not None else None,
            headers=headers,
            code=code,
            error_type=kind,
            body=body if body is not None else error,
        )

    def _malformed_event(self, event: str | None, data: str) -> ModelError:
        if event == "error":
            return self._fail(f"the stream sent an error: {data[:500]}", True)
        return self._fail(f"the stream sent an event that is not JSON: {data[:200]!r}", True)


def _make_client(model: str, base_url: str | None, api_key: str | None, timeout: float) -> AsyncAnthropic:
    env = os.environ
    local = bool(base_url or env.get("ANTHROPIC_BASE_URL"))
    if api_key is None and local and not (env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_AUTH_TOKEN")):
        api_key = _PLACEHOLDER_KEY
    hint = "pass api_key=..., set ANTHROPIC_API_KEY, or give a base_url for a local server that needs no key"
    options: dict[str, Any] = {"api_key": api_key, "timeout": timeout, "max_retries": 0}
    if base_url is not None:
        options["base_url"] = base_url
    try:
        client = AsyncAnthropic(**options)
    except (anthropic.AnthropicError, ValueError) as exc:
        raise ConfigError(f"cannot set up anthropic model {model!r}: {exc} ({hint})") from exc
    if client.api_key is None and client.auth_token is None and client.credentials is None:
        raise ConfigError(f"anthropic model {model!r} has no API key: {hint}")
    return client


def _is_retryable(status: int | None, kind: str | None, headers: Mapping[str, str]) -> bool:
    should = headers.get("x-should-retry")
    if should in ("true", "false"):
        return should == "true"
    if status is not None:
        return status in (408, 409, 429) or status >= 500
    return kind in _TRANSIENT_TYPES


def _seconds_until(when: datetime, now: datetime) -> float:
    return max(0.0, (when - now).total_seconds())


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait: ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date), else the reset time of
    an exhausted ``anthropic-ratelimit-*`` limit, counted from the response's ``date``."""
    try:
        if "retry-after-ms" in headers:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        if "retry-after" in headers:
            value = headers["retry-after"].strip()
            try:
                return max(0.0, float(value))
            except ValueError:
                return _seconds_until(parsedate_to_datetime(value), datetime.now(UTC))
        now = parsedate_to_datetime(headers["date"]) if "date" in headers else datetime.now(UTC)
        waits = [
            _seconds_until(datetime.fromisoformat(headers[f"anthropic-ratelimit-{name}-reset"]), now)
            for name in _RATE_LIMITS
            if headers.get(f"anthropic-ratelimit-{name}-remaining") == "0"
            and f"anthropic-ratelimit-{name}-reset" in headers
        ]
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(waits) if waits else None


# --- request -------------------------------------------------------------------------------------

_dumps = json.JSONEncoder(separators=(",", ":")).encode


def _encoded(body: dict[str, Any]) -> tuple[dict[str, Any] | None, bytes | None]:
    """The body as JSON bytes, which the SDK sends as they are: given a dict it would first copy the
    whole tree (the history grows every step) and encode it with its own, slower encoder. A body the
    standard encoder refuses (a date or a pydantic model in ``settings.extra``) goes to the SDK's."""
    try:
        return None, _dumps(body).encode()
    except (TypeError, ValueError):
        return body, None


def _system_blocks(system: str, stable: str, cache: bool) -> list[dict[str, Any]]:
    if not system:
        return []
    if not (cache and stable and system.startswith(stable)):
        return [{"type": "text", "text": system}]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": stable, "cache_control": {"type": "ephemeral"}}]
    rest = system[len(stable) :]
    if rest.strip():
        blocks.append({"type": "text", "text": rest})
    return blocks


def _wire_tools(tools: Sequence[ToolDefinition], cache: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]
    if cache:
        out[-1]["cache_control"] = {"type": "ephemeral"}
    return out


def _tool_input(arguments: str) -> dict[str, Any]:
    """A call's arguments as the JSON object the API wants; anything else (the model's malformed JSON,
    a list) is sent as ``{}`` so the conversation stays valid."""
    if not arguments:
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _thinking_blocks(thinking: Iterable[Thinking]) -> list[dict[str, Any]]:
    """Blocks to echo back: Anthropic's own reasoning only (another provider's signatures and
    encrypted reasoning mean nothing here, and would be refused)."""
    out: list[dict[str, Any]] = []
    for t in thinking:
        if t.provider not in (None, "anthropic"):
            continue
        if t.redacted:
            out.append({"type": "redacted_thinking", "data": t.redacted})
        elif t.signature:
            out.append({"type": "thinking", "thinking": t.text, "signature": t.signature})
    return out


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks = _thinking_blocks(message.thinking) if message.thinking else []
    if message.content and not message.content.isspace():
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(_tool_use(c) for c in message.tool_calls)
    return blocks


def _tool_use(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": _tool_input(call.arguments)}


def _tool_result(message: ToolResultMessage) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    if message.content:
        block["content"] = message.content
    if message.is_error:
        block["is_error"] = True
    return block


def _wire_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Our messages as Messages API turns: strictly alternating roles, tool results grouped.

    Consecutive tool results become one user turn of ``tool_result`` blocks (ahead of any text in that
    turn, as the API requires); a user message after a user turn, or an assistant message after an
    assistant turn, joins it as further blocks; an empty message is left out.
    """
    out: list[dict[str, Any]] = []
    last_role = ""
    for message in messages:
        if isinstance(message, ToolResultMessage):
            block = _tool_result(message)
            if last_role == "user":
                content = out[-1]["content"]
                at = 0
                while at < len(content) and content[at]["type"] == "tool_result":
                    at += 1
                content.insert(at, block)
            else:
                out.append({"role": "user", "content": [block]})
                last_role = "user"
            continue
        if isinstance(message, AssistantMessage):
            role, blocks = "assistant", _assistant_blocks(message)
        else:
            role = "user"
            blocks = [{"type": "text", "text": message.content}] if message.content else []
        if not blocks:
            continue
        if role == last_role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
            last_role = role
    return out
