"""OpenAI Responses API provider (``POST /responses``), on the official SDK.

Built like the Chat Completions provider, and sharing its machinery: the client set-up and key rules,
the low-level ``post()`` with a body built here as plain dicts (no per-request SDK transform), the raw
SSE reader, and the error mapping into :class:`~loopwright.errors.ModelError` /
:class:`~loopwright.models.openai.ProviderHTTPError` / :class:`~loopwright.errors.ContextLengthExceededError`
are inherited from :class:`~loopwright.models.openai.OpenAIModel`. What differs is the wire format:
``instructions`` + ``input`` items in, typed events (``response.output_item.added``,
``response.function_call_arguments.delta``, ``response.completed``, ...) out.

Reasoning round trip. One ``reasoning`` output item becomes one :class:`~loopwright.messages.Thinking`:

- ``text``: its summary texts (blank-line separated), or its ``reasoning_text`` content when a server
  sends that instead; what a person may see.
- ``signature``: the item id (``"rs_..."``).
- ``redacted``: its ``encrypted_content``, opaque; from ``response.output_item.done`` (the value in
  ``output_item.added`` is provisional).

An assistant message is sent back as its reasoning items first, then its text as an output message,
then one ``function_call`` item per call. A Thinking is a reasoning item only if its ``signature``
starts with ``rs_`` (thinking from other providers is never sent). With ``store: false``, our default,
OpenAI can only use an item that carries its encrypted content, which it returns only when asked:
``ModelSettings(extra={"include": ["reasoning.encrypted_content"]})``. Without it, items are sent back
by id alone when ``extra`` turns ``store`` on, and dropped otherwise.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import openai

from loopwright.errors import ModelError
from loopwright.messages import AssistantMessage, Message, Thinking, ToolResultMessage, Usage
from loopwright.models._accumulate import StepAccumulator
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
    ToolDefinition,
    UsageUpdate,
)
from loopwright.models.openai import OpenAIModel

__all__ = ["OpenAIResponsesModel"]

PROVIDER = "openai-responses"
_INCOMPLETE: dict[str, FinishReason] = {"max_output_tokens": "length", "content_filter": "content_filter"}
_BLANK_LINE = "\n\n"


class OpenAIResponsesModel(OpenAIModel):
    """A model served through the OpenAI Responses API (``/responses``); named ``openai-responses:MODEL``.

    Key and base-URL rules, client options and error mapping are those of
    :class:`~loopwright.models.openai.OpenAIModel`. Requests are sent with ``store: false`` (the
    conversation lives in the transcript, not on OpenAI's servers); ``ModelSettings.extra`` is merged
    into the body last, so ``{"reasoning": {"effort": "low"}, "include": ["reasoning.encrypted_content"]}``
    or ``{"store": True}`` reach the API as they are.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        timeout: float = 600.0,
    ) -> None:
        super().__init__(
            model, base_url=base_url, api_key=api_key, provider=PROVIDER, client=client, timeout=timeout
        )

    def __repr__(self) -> str:
        return f"OpenAIResponsesModel({self.model!r}, base_url={str(self.client.base_url)!r})"

    def request_body(self, request: ModelRequest, *, stream: bool = True) -> dict[str, Any]:
        """The JSON body sent to ``/responses`` for ``request``."""
        settings = request.settings
        extra = settings.extra
        body: dict[str, Any] = {"model": self.model}
        if request.system:
            body["instructions"] = request.system
        body["input"] = _wire_input(request.messages, store=bool(extra.get("store", False)))
        if request.tools:
            body["tools"] = [_wire_tool(t) for t in request.tools]
        body["stream"] = stream
        body["store"] = False
        if settings.max_tokens is not None:
            body["max_output_tokens"] = settings.max_tokens
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.parallel_tool_calls is not None and request.tools:
            body["parallel_tool_calls"] = settings.parallel_tool_calls
        if extra:
            body.update(extra)
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        events = await self._open_stream("/responses", self.request_body(request, stream=True))
        state = _StreamState()
        try:
            async for event, data in events:
                try:
                    payload = json.loads(data)
                except ValueError:
                    if data.startswith("[DONE]"):  # not sent by OpenAI; some compatible servers do
                        continue
                    raise self._malformed_chunk(data) from None
                if type(payload) is dict:
                    for model_event in state.feed(payload, payload.get("type") or event):
                        yield model_event
        except openai.OpenAIError as exc:
            raise self._error(exc, streaming=True) from exc
        except _Failed as failed:
            raise self._payload_error(failed.error, status=None) from None
        finally:
            await events.aclose()
        if state.status is None:
            raise ModelError(
                "the stream ended before the response was complete (no response.completed)",
                provider=self.provider,
                model=self.model,
                retryable=True,
            )
        for model_event in state.end():
            yield model_event

    async def complete(self, request: ModelRequest) -> ModelResponse:
        data = await self._post_json("/responses", self.request_body(request, stream=False))
        try:
            return _parse_response(data)
        except _Failed as failed:
            raise self._payload_error(failed.error, status=None) from None


# --- request -------------------------------------------------------------------------------------


def _wire_tool(tool: ToolDefinition) -> dict[str, Any]:
    # Without "strict", the Responses API (unlike Chat Completions) turns a schema it can make strict
    # into strict mode, marking every optional property required: the model then fills them all.
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": False,
    }


def _wire_input(messages: Sequence[Message], *, store: bool = False) -> list[dict[str, Any]]:
    """Our messages as Responses API ``input`` items (see the module docstring for reasoning items)."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            if message.content or message.tool_calls:  # a reasoning item needs its following item
                items.extend(r for t in message.thinking if (r := _reasoning_item(t, store)) is not None)
            if message.content:
                part = {"type": "output_text", "text": message.content}
                items.append({"type": "message", "role": "assistant", "content": [part]})
            items.extend(
                {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
                for c in message.tool_calls
            )
        elif isinstance(message, ToolResultMessage):
            items.append(
                {"type": "function_call_output", "call_id": message.tool_call_id, "output": message.content}
            )
        else:
            items.append({"role": "user", "content": message.content})
    return items


def _reasoning_item(thinking: Thinking, store: bool) -> dict[str, Any] | None:
    item_id = thinking.signature
    if thinking.provider not in (None, "openai-responses", "openai"):
        return None
    if not item_id or not item_id.startswith("rs_") or not (thinking.redacted or store):
        return None
    summary = [{"type": "summary_text", "text": thinking.text}] if thinking.text else []
    item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": summary}
    if thinking.redacted:
        item["encrypted_content"] = thinking.redacted
    return item


# --- response ------------------------------------------------------------------------------------


class _Failed(Exception):
    """A failure reported inside a response: an ``error`` event, ``response.failed``, an ``error`` field."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.error = error


class _Call:
    """A function call item: our running ``position``, its call id and name, its argument text so far."""

    __slots__ = ("args", "call_id", "name", "position", "started")

    def __init__(self, position: int) -> None:
        self.position = position
        self.call_id = ""
        self.name = ""
        self.args = ""
        self.started = False


class _Reasoning:
    """A reasoning item: our thinking ``block`` number and what has been sent of it."""

    __slots__ = ("block", "done", "has_text", "part")

    def __init__(self, block: int) -> None:
        self.block = block
        self.part: int | None = None
        self.has_text = False
        self.done = False


class _Message:
    """An output message item; ``has_text`` once its text was streamed."""

    __slots__ = ("has_text",)

    def __init__(self) -> None:
        self.has_text = False


_Item = _Call | _Reasoning | _Message


class _StreamState:
    """Turns Responses API events (plain dicts) into model events, one response at a time.

    Output items are known by ``output_index`` and by item id (delta events carry both); function calls
    get running positions 0, 1, ... and reasoning items running thinking blocks, whatever their output
    index. Text of separate message items is joined with a blank line.
    """

    __slots__ = ("blocks", "calls", "items", "last_text", "model", "raw_finish", "status")

    def __init__(self) -> None:
        self.items: dict[int | str, _Item] = {}
        self.calls: list[_Call] = []
        self.blocks = 0
        self.last_text: _Message | None = None
        self.model: str | None = None
        self.status: str | None = None
        self.raw_finish: str | None = None

    def feed(self, event: dict[str, Any], kind: Any) -> list[ModelEvent]:
        """The model events for one wire event; raises :class:`_Failed` for an error event."""
        handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is None or self.status is not None:  # nothing counts after the response's end
            return []
        out: list[ModelEvent] = []
        handler(self, event, out)
        return out

    # --- items -----------------------------------------------------------------------------------

    def _find(self, event: Mapping[str, Any], item_id: Any = None) -> _Item | None:
        found = self.items.get(item_id or event.get("item_id") or "")
        if found is None:
            index = event.get("output_index")
            found = self.items.get(index) if isinstance(index, int) else None
        return found

    def _remember(self, event: Mapping[str, Any], item_id: Any, item: _Item) -> None:
        index = event.get("output_index")
        if isinstance(index, int):
            self.items[index] = item
        if isinstance(item_id, str) and item_id:
            self.items[item_id] = item

    def _call(self, event: Mapping[str, Any], item_id: Any = None) -> _Call:
        found = self._find(event, item_id)
        if isinstance(found, _Call):
            return found
        call = _Call(len(self.calls))
        self.calls.append(call)
        self._remember(event, item_id or event.get("item_id"), call)
        return call

    def _reasoning(self, event: Mapping[str, Any], out: list[ModelEvent], item_id: Any = None) -> _Reasoning:
        found = self._find(event, item_id)
        if isinstance(found, _Reasoning):
            return found
        reasoning = _Reasoning(self.blocks)
        self.blocks += 1
        item_id = item_id or event.get("item_id")
        self._remember(event, item_id, reasoning)
        if isinstance(item_id, str) and item_id:  # the block starts, named by its item id
            out.append(ThinkingDelta(signature=item_id, block=reasoning.block))
        return reasoning

    def _message(self, event: Mapping[str, Any], item_id: Any = None) -> _Message:
        found = self._find(event, item_id)
        if isinstance(found, _Message):
            return found
        message = _Message()
        self._remember(event, item_id or event.get("item_id"), message)
        return message

    def _item(self, event: dict[str, Any], out: list[ModelEvent]) -> None:
        """``response.output_item.added`` and ``.done``: start an item, or complete what its deltas missed."""
        item = event.get("item")
        if not isinstance(item, dict):
            return
        kind, item_id = item.get("type"), item.get("id")
        done = event.get("type") == "response.output_item.done"
        if kind == "function_call":
            call = self._call(event, item_id)
            if not call.started:
                call.call_id = str(item.get("call_id") or item_id or f"call_{call.position}")
                call.name = str(item.get("name") or "")
                self._start(call, out)
            if done:
                self._complete_args(call, item.get("arguments"), out)
        elif kind == "reasoning":
            reasoning = self._reasoning(event, out, item_id)
            if done and not reasoning.done:
                reasoning.done = True
                if not reasoning.has_text and (text := _reasoning_text(item)):
                    out.append(ThinkingDelta(text, block=reasoning.block))
                encrypted = item.get("encrypted_content")
                if isinstance(encrypted, str) and encrypted:
                    out.append(ThinkingDelta(redacted=encrypted, block=reasoning.block))
        elif kind == "message":
            message = self._message(event, item_id)
            if done and not message.has_text and (text := _message_text(item)):
                self._text(message, text, out)

    # --- deltas ----------------------------------------------------------------------------------

    def _text(self, message: _Message, text: str, out: list[ModelEvent]) -> None:
        if self.last_text is not message:
            if self.last_text is not None:
                text = _BLANK_LINE + text
            self.last_text = message
        message.has_text = True
        out.append(TextDelta(text))

    def _text_delta(self, event: dict[str, Any], out: list[ModelEvent]) -> None:
        delta = event.get("delta")
        if isinstance(delta, str) and delta:
            self._text(self._message(event), delta, out)

    def _args_delta(self, event: dict[str, Any], out: list[ModelEvent]) -> None:
        delta = event.get("delta")
        if isinstance(delta, str) and delta:
            call = self._call(event)
            call.args += delta
            if call.started:
                out.append(ToolCallArgsDelta(call.position, delta))

    def _args_done(self, event: dict[str, Any], out: list[ModelEvent]) -> None:
        self._complete_args(self._call(event), event.get("arguments"), out)

    def _reasoning_delta(self, event: dict[str, Any], out: list[ModelEvent]) -> None:
        delta = event.get("delta")
        if not isinstance(delta, str) or not delta:
            return
        reasoning = self._reasoning(event, out)
        part = event.get("summary_index", event.get("content_index"))
        if part != reasoning.part:
            if reasoning.has_text:
                delta = _BLANK_LINE + delta
            reasoning.part = part if isinstance(part, int) else None
        reasoning.has_text = True
        out.append(ThinkingDelta(delta, block=reasoning.block))

    def _start(self, call: _Call, out: list[ModelEvent]) -> None:
        call.started = True
        out.append(ToolCallStart(call.position, call.call_id or f"call_{call.position}", call.name))
        if call.args:
            out.append(ToolCallArgsDelta(call.position, call.args))

    def _complete_args(self, call: _Call, full: Any, out: list[ModelEvent]) -> None:
        """Add what the final arguments have beyond the streamed ones (nothing when the deltas had it all).
        Final arguments that contradict the deltas are ignored: the deltas were already passed on."""
        if not isinstance(full, str) or len(full) <= len(call.args) or not full.startswith(call.args):
            return
        rest = full[len(call.args) :]
        call.args = full
        if call.started:
            out.append(ToolCallArgsDelta(call.position, rest))

    # --- response-level events -------------------------------------------------------------------

    def _created(self, event: dict[str, Any], out: list[ModelEvent]) -> None:
        response = event.get("response")
        if isinstance(response, dict) and isinstance(response.get("model"), str):
            self.model = response["model"]

    def _finished(self, event: dict[str, Any], out: list[ModelEvent]) -> None:
        """``response.completed`` / ``response.incomplete``: usage, model and the finish."""
        response = event.get("response")
        if not isinstance(response, dict):
            response = {}
        default = "incomplete" if event.get("type") == "response.incomplete" else "completed"
        self.status = str(response.get("status") or default)
        if isinstance(response.get("model"), str):
            self.model = response["model"]
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        self.raw_finish = str(reason) if reason else self.status
        usage = response.get("usage")
        if isinstance(usage, dict):
            out.append(UsageUpdate(_usage(usage)))

    def _error_event(self, event: dict[str, Any], out: list[ModelEvent]) -> None:
        error = event.get("error")
        if not isinstance(error, dict):  # OpenAI's shape: code, message and param on the event itself
            error = {k: v for k, v in event.items() if k not in ("type", "sequence_number")}
        raise _Failed(error)

    def _failed(self, event: dict[str, Any], out: list[ModelEvent]) -> None:
        response = event.get("response")
        error = response.get("error") if isinstance(response, dict) else None
        if not isinstance(error, dict) or not error:
            error = {"message": "the response failed without a reason", "type": "server_error"}
        raise _Failed(error)

    def end(self) -> list[ModelEvent]:
        """The closing events: calls that never got their item (arguments only), then the finish."""
        out: list[ModelEvent] = []
        for call in self.calls:
            if not call.started:
                self._start(call, out)
        if self.status == "completed":
            reason: FinishReason = "tool_calls" if self.calls else "stop"
        elif self.status == "incomplete":
            reason = _INCOMPLETE.get(self.raw_finish or "", "other")
        else:
            reason = "other"
        out.append(StreamFinish(reason, raw_reason=self.raw_finish, model=self.model))
        return out


_HANDLERS = {
    "response.created": _StreamState._created,
    "response.in_progress": _StreamState._created,
    "response.output_item.added": _StreamState._item,
    "response.output_item.done": _StreamState._item,
    "response.output_text.delta": _StreamState._text_delta,
    "response.refusal.delta": _StreamState._text_delta,
    "response.function_call_arguments.delta": _StreamState._args_delta,
    "response.function_call_arguments.done": _StreamState._args_done,
    "response.reasoning_summary_text.delta": _StreamState._reasoning_delta,
    "response.reasoning_text.delta": _StreamState._reasoning_delta,
    "response.completed": _StreamState._finished,
    "response.incomplete": _StreamState._finished,
    "response.failed": _StreamState._failed,
    "error": _StreamState._error_event,
}


def _usage(usage: Mapping[str, Any]) -> Usage:
    details = usage.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_tokens=int(cached or 0),
        requests=1,
    )


def _texts(parts: Any, kind: str, key: str = "text") -> list[str]:
    if not isinstance(parts, list):
        return []
    return [
        p[key] for p in parts if isinstance(p, dict) and p.get("type") == kind and isinstance(p.get(key), str)
    ]


def _reasoning_text(item: Mapping[str, Any]) -> str:
    summary = _texts(item.get("summary"), "summary_text")
    return _BLANK_LINE.join(summary or _texts(item.get("content"), "reasoning_text"))


def _message_text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    return "".join(_texts(content, "output_text") or _texts(content, "refusal", "refusal"))


def _parse_response(data: dict[str, Any]) -> ModelResponse:
    """A non-streamed response body, read as the stream of its items' ``done`` events would be."""
    error = data.get("error")
    if error:
        raise _Failed(error if isinstance(error, dict) else {"message": str(error)})
    state = _StreamState()
    acc = StepAccumulator()
    output = data.get("output")
    for index, item in enumerate(output if isinstance(output, list) else ()):
        event = {"type": "response.output_item.done", "output_index": index, "item": item}
        for model_event in state.feed(event, event["type"]):
            acc.add(model_event)
    finish = state.feed({"type": "response.completed", "response": data}, "response.completed")
    if not finish:  # no usage reported: it was still one request
        finish.append(UsageUpdate(Usage(requests=1)))
    for model_event in finish + state.end():
        acc.add(model_event)
    return acc.response()
