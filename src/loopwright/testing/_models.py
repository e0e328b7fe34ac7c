"""Models for tests and demos: offline, deterministic, instant.

- :class:`TestModel` calls each available tool once (arguments generated from its schema), then
  answers with text that uses the results.
- :class:`ScriptedModel` plays a queue of turns and logs the requests it received.
- :class:`FunctionModel` lets a Python function decide each turn.
"""

from __future__ import annotations

import inspect
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from loopwright.context.compaction import COMPACTION_SYSTEM, extract_identifiers
from loopwright.context.tokens import estimate_tokens
from loopwright.errors import ModelError
from loopwright.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, Usage, UserMessage
from loopwright.models._accumulate import complete_from_stream
from loopwright.models.base import (
    ModelEvent,
    ModelRequest,
    ModelResponse,
    StreamFinish,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    ToolDefinition,
    UsageUpdate,
)

__all__ = ["FunctionModel", "ScriptedModel", "TestModel", "Turn", "response_events"]


def response_events(response: ModelResponse, *, chunks: int = 3) -> list[ModelEvent]:
    """The stream a real provider would send for ``response``: text in pieces, each tool call's
    arguments in two fragments, then usage and the finish reason."""
    events: list[ModelEvent] = []
    for piece in _split(response.content, chunks):
        events.append(TextDelta(piece))
    for i, call in enumerate(response.tool_calls):
        events.append(ToolCallStart(index=i, id=call.id, name=call.name))
        half = len(call.arguments) // 2
        events.append(ToolCallArgsDelta(index=i, delta=call.arguments[:half]))
        events.append(ToolCallArgsDelta(index=i, delta=call.arguments[half:]))
    events.append(UsageUpdate(response.usage))
    events.append(StreamFinish(reason="tool_calls" if response.tool_calls else response.finish_reason))
    return events


def _split(text: str, chunks: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, chunks)))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _usage(request: ModelRequest, output: ModelResponse) -> Usage:
    out_chars = len(output.content) + sum(len(c.arguments) + len(c.name) for c in output.tool_calls)
    return Usage(
        input_tokens=estimate_tokens(request.system, request.messages),
        output_tokens=max(1, out_chars // 4),
        requests=1,
    )


def _with_usage(request: ModelRequest, response: ModelResponse) -> ModelResponse:
    if response.usage.requests or response.usage.total_tokens:
        return response
    return ModelResponse(
        content=response.content,
        tool_calls=response.tool_calls,
        thinking=response.thinking,
        usage=_usage(request, response),
        finish_reason=response.finish_reason,
        model=response.model,
    )


def _current_turn(messages: Sequence[Message]) -> list[Message]:
    for i in range(len(messages) - 1, -1, -1):
        if type(messages[i]) is UserMessage:
            return list(messages[i:])
    return list(messages)


def _count_calls(messages: Iterable[Message]) -> int:
    return sum(len(m.tool_calls) for m in messages if type(m) is AssistantMessage)


class TestModel:
    """Offline and deterministic: calls each available tool once, then answers using the results.

    ``args`` overrides the generated arguments per tool name; ``calls_per_step`` is how many tools
    it calls in one step (0 = all at once); ``text`` fixes the final answer.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        *,
        text: str | None = None,
        args: dict[str, dict[str, Any]] | None = None,
        calls_per_step: int = 1,
        chunks: int = 4,
        call_tools: bool = True,
    ) -> None:
        self.text = text
        self.args = args or {}
        self.calls_per_step = calls_per_step
        self.chunks = chunks
        self.call_tools = call_tools

    @property
    def name(self) -> str:
        return "test"

    def respond(self, request: ModelRequest) -> ModelResponse:
        if request.system == COMPACTION_SYSTEM:
            return _with_usage(request, ModelResponse(content=_test_summary(request), model="test"))
        turn = _current_turn(request.messages)
        called = {m.name for m in turn if type(m) is ToolResultMessage}
        remaining = [t for t in request.tools if t.name not in called] if self.call_tools else []
        if remaining:
            batch = remaining if self.calls_per_step <= 0 else remaining[: self.calls_per_step]
            first = _count_calls(request.messages)
            calls = tuple(
                ToolCall(id=f"call_{first + i}", name=t.name, arguments=json.dumps(self._arguments(t)))
                for i, t in enumerate(batch)
            )
            response = ModelResponse(tool_calls=calls, finish_reason="tool_calls", model="test")
        else:
            response = ModelResponse(content=self._answer(turn), model="test")
        return _with_usage(request, response)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for event in response_events(self.respond(request), chunks=self.chunks):
            yield event

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return self.respond(request)

    def _arguments(self, tool: ToolDefinition) -> dict[str, Any]:
        if tool.name in self.args:
            return self.args[tool.name]
        value = example_for_schema(tool.parameters, tool.parameters.get("$defs", {}))
        return value if isinstance(value, dict) else {}

    def _answer(self, turn: list[Message]) -> str:
        if self.text is not None:
            return self.text
        results = [m for m in turn if type(m) is ToolResultMessage]
        if not results:
            question = turn[0].content if turn else ""
            return f"You said: {question.strip()[:200]}"
        parts = []
        for r in results:
            snippet = " ".join(r.content.split())[:80]
            parts.append(f"{r.name} → {'error: ' if r.is_error else ''}{snippet}")
        return f"I used {len(results)} tool(s). " + "; ".join(parts) + "."


def _test_summary(request: ModelRequest) -> str:
    """What TestModel answers to a compaction request: a short structured summary that keeps every
    identifier of the prompt (and so of the previous summary) and the last few user lines."""
    prompt = request.messages[-1].content if request.messages else ""
    identifiers = extract_identifiers([UserMessage(content=prompt)])
    users = [line[6:86] for line in prompt.splitlines() if line.startswith("USER: ")]
    goal = users[0] if users else "continue the conversation"
    recent = "\n".join(f"- {u}" for u in users[-3:])
    listed = "\n".join(f"- {i}" for i in identifiers)
    return (
        f"## Goal\n{goal}\n## Constraints\n- none stated\n## Progress\n{recent}\n## Decisions\n- none\n"
        f"## Next steps\n- answer the next message\n## Critical context\n## Identifiers\n{listed}"
    )


def example_for_schema(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> Any:
    """A deterministic value that satisfies a (simple) JSON schema: required fields only."""
    if depth > 8:
        return None
    if "$ref" in schema:
        ref = str(schema["$ref"]).rsplit("/", 1)[-1]
        return example_for_schema(defs.get(ref, {}), defs, depth + 1)
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key, []) if o.get("type") != "null"]
        if options:
            return example_for_schema(options[0], defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {
            name: example_for_schema(props[name], defs, depth + 1)
            for name in schema.get("required", [])
            if name in props
        }
    if kind == "array":
        return [example_for_schema(schema.get("items", {}), defs, depth + 1)]
    if kind == "string":
        return "example"
    if kind == "integer":
        return max(1, int(schema.get("minimum", 1)))
    if kind == "number":
        return float(schema.get("minimum", 1.5))
    if kind == "boolean":
        return True
    return None


_call_ids = itertools.count(1)

Turn = str | ModelResponse | Sequence[ToolCall] | BaseException


class ScriptedModel:
    """Plays ``turns`` in order, one per model call: a string is a final answer, a list of
    :class:`ToolCall` is a tool-calling step, a :class:`ModelResponse` is sent as is and an
    exception is raised. ``requests`` logs every request received."""

    def __init__(self, turns: Iterable[Turn], *, name: str = "scripted") -> None:
        self._turns = list(turns)
        self._next = 0
        self._name = name
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return self._name

    @staticmethod
    def call(name: str, call_id: str | None = None, /, **arguments: Any) -> ToolCall:
        """A tool call for a script: ``ScriptedModel.call("add", a=1, b=2)``."""
        return ToolCall(id=call_id or f"call_{next(_call_ids)}", name=name, arguments=json.dumps(arguments))

    @property
    def remaining(self) -> int:
        return len(self._turns) - self._next

    def assert_complete(self) -> None:
        """Fail if some scripted turns were never requested."""
        if self.remaining:
            raise AssertionError(f"ScriptedModel: {self.remaining} of {len(self._turns)} turns were not used")

    def _take(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(replace(request, messages=tuple(request.messages), tools=tuple(request.tools)))
        if self._next >= len(self._turns):
            raise ModelError(
                f"no scripted turn left ({len(self._turns)} used)", provider="scripted", model=self._name
            )
        turn = self._turns[self._next]
        self._next += 1
        if isinstance(turn, BaseException):
            raise turn
        if isinstance(turn, str):
            response = ModelResponse(content=turn, model=self._name)
        elif isinstance(turn, ModelResponse):
            response = turn
        else:
            response = ModelResponse(tool_calls=tuple(turn), finish_reason="tool_calls", model=self._name)
        return _with_usage(request, response)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for event in response_events(self._take(request)):
            yield event

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return self._take(request)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentInfo:
    """What a :class:`FunctionModel` function is told besides the messages."""

    system: str
    tools: Sequence[ToolDefinition]
    request: ModelRequest


FunctionResult = ModelResponse | str | Sequence[ToolCall]
ModelFunction = Callable[[list[Message], AgentInfo], FunctionResult | Awaitable[FunctionResult]]
StreamFunction = Callable[[list[Message], AgentInfo], AsyncIterator[ModelEvent | str]]


class FunctionModel:
    """A model whose every turn is decided by ``function(messages, info)``; or, for full control
    of streaming, by ``stream_function`` yielding text pieces or :mod:`model events <loopwright.models>`."""

    def __init__(
        self,
        function: ModelFunction | None = None,
        *,
        stream_function: StreamFunction | None = None,
        name: str = "function",
    ) -> None:
        if function is None and stream_function is None:
            raise TypeError("FunctionModel needs a function or a stream_function")
        self._function = function
        self._stream_function = stream_function
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    async def _respond(self, request: ModelRequest) -> ModelResponse:
        assert self._function is not None
        info = AgentInfo(system=request.system, tools=request.tools, request=request)
        result = self._function(list(request.messages), info)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, str):
            result = ModelResponse(content=result, model=self._name)
        elif not isinstance(result, ModelResponse):
            result = ModelResponse(tool_calls=tuple(result), finish_reason="tool_calls", model=self._name)
        return _with_usage(request, result)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if self._stream_function is not None:
            info = AgentInfo(system=request.system, tools=request.tools, request=request)
            async for item in self._stream_function(list(request.messages), info):
                yield TextDelta(item) if isinstance(item, str) else item
            return
        for event in response_events(await self._respond(request)):
            yield event

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self._function is None:
            return await complete_from_stream(self.stream(request))
        return await self._respond(request)
