"""OpenAIModel: the request body it sends, and stream quirks beyond the recordings."""

from __future__ import annotations

import json
from typing import Any

import pytest

from loopwright.messages import AssistantMessage, Message, Thinking, ToolCall, ToolResultMessage, UserMessage
from loopwright.models._accumulate import complete_from_stream
from loopwright.models.base import (
    ModelRequest,
    ModelSettings,
    StreamFinish,
    TextDelta,
    ThinkingDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    ToolDefinition,
    UsageUpdate,
)
from loopwright.models.openai import OpenAIModel
from loopwright.testing import (
    ReplayResponse,
    ReplayServer,
    openai_chat_completion,
    openai_chat_stream,
)
from tests.models._shared import HELLO, ModelFactory, accumulate, stream_events

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def sse(*chunks: dict[str, Any], done: bool = True) -> bytes:
    lines = [f"data: {json.dumps(c)}" for c in chunks] + (["data: [DONE]"] if done else [])
    return ("\n\n".join(lines) + "\n\n").encode()


def delta(finish: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"id": "c", "model": "m", "choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}


def tool(index: int | None = None, **fields: Any) -> dict[str, Any]:
    call: dict[str, Any] = {} if index is None else {"index": index}
    function = {k: fields.pop(k) for k in ("name", "arguments") if k in fields}
    call.update(fields)
    if function:
        call["function"] = function
    return call


# --- request body --------------------------------------------------------------------------------


async def test_request_body_shape(make_model: ModelFactory) -> None:
    history: list[Message] = [
        UserMessage(content="Weather in Paris and Rome?"),
        AssistantMessage(
            content="Let me check.",
            tool_calls=(ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}'),),
            thinking=(Thinking(text="private reasoning is not sent back"),),
        ),
        ToolResultMessage(tool_call_id="call_1", name="get_weather", content="sunny"),
        AssistantMessage(
            tool_calls=(
                ToolCall(id="call_2", name="get_weather", arguments='{"city":"Rome"}'),
                ToolCall(id="call_3", name="get_weather", arguments="{ }"),
            )
        ),
        ToolResultMessage(tool_call_id="call_2", name="get_weather", content="rain", is_error=False),
        ToolResultMessage(
            tool_call_id="call_3", name="get_weather", content="error: city missing", is_error=True
        ),
        AssistantMessage(content="Paris is sunny, Rome rainy."),
        UserMessage(content="Thanks"),
    ]
    request = ModelRequest(
        system="You are terse.",
        messages=history,
        tools=[WEATHER],
        settings=ModelSettings(
            max_tokens=256, temperature=0.2, parallel_tool_calls=False, extra={"seed": 7, "user": "u1"}
        ),
    )
    with ReplayServer([ReplayResponse.sse(openai_chat_stream(text="ok"))]) as server:
        model = make_model(server, "gpt-4o-mini", api_key="sk-test")
        await complete_from_stream(model.stream(request))
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["content-type"] == "application/json"
    assert sent.json == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                    },
                    {
                        "id": "call_3",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{ }"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_2", "content": "rain"},
            {"role": "tool", "tool_call_id": "call_3", "content": "error: city missing"},
            {"role": "assistant", "content": "Paris is sunny, Rome rainy."},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather in a city",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 256,
        "temperature": 0.2,
        "parallel_tool_calls": False,
        "seed": 7,
        "user": "u1",
    }


async def test_minimal_body_leaves_out_what_is_not_set(make_model: ModelFactory) -> None:
    request = ModelRequest(
        system="",
        messages=[UserMessage(content="Hi")],
        settings=ModelSettings(parallel_tool_calls=True),  # no tools: not sent
    )
    body = openai_chat_completion(text="Hello!")
    with ReplayServer([ReplayResponse.json_body(body)]) as server:
        response = await make_model(server, "local-model").complete(request)
    assert response.content == "Hello!"
    assert server.requests[0].json == {
        "model": "local-model",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": False,
    }


@pytest.mark.usefixtures("no_openai_env")
async def test_own_client_for_a_local_server_needs_no_api_key() -> None:
    with ReplayServer([ReplayResponse.sse(openai_chat_stream(text="hi"))]) as server:
        model = OpenAIModel("local", base_url=server.base_url, timeout=5.0)
        try:
            assert (await complete_from_stream(model.stream(HELLO))).content == "hi"
        finally:
            await model.aclose()
        assert model.client.max_retries == 0
        assert model.client.timeout == 5.0
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


async def test_explicit_key_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    with ReplayServer([ReplayResponse.sse(openai_chat_stream(text="hi"))] * 2) as server:
        for key in ("explicit", None):
            model = OpenAIModel("m", base_url=server.base_url, api_key=key)
            try:
                await complete_from_stream(model.stream(HELLO))
            finally:
                await model.aclose()
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer explicit", "Bearer from-env"]


def test_name_and_provider() -> None:
    model = OpenAIModel("llama3", base_url="http://127.0.0.1:9/v1", provider="openai-compatible")
    assert model.name == "openai-compatible:llama3"
    assert OpenAIModel("gpt-4o", api_key="k").name == "openai:gpt-4o"


# --- stream events -------------------------------------------------------------------------------


async def test_event_order_for_text_and_tool_calls(make_model: ModelFactory) -> None:
    calls = [ToolCall(id="call_a", name="get_weather", arguments='{"city": "Oslo"}')]
    body = openai_chat_stream(text=["Checking", "..."], tool_calls=calls, usage=(12, 7), args_pieces=3)
    events = await stream_events(make_model, body)
    assert events[:3] == [TextDelta("Checking"), TextDelta("..."), ToolCallStart(0, "call_a", "get_weather")]
    assert "".join(e.delta for e in events if isinstance(e, ToolCallArgsDelta)) == '{"city": "Oslo"}'
    assert len([e for e in events if isinstance(e, ToolCallArgsDelta)]) == 3
    usage = [e for e in events if isinstance(e, UsageUpdate)]
    assert len(usage) == 1 and (usage[0].usage.input_tokens, usage[0].usage.output_tokens) == (12, 7)
    assert events[-1] == StreamFinish("tool_calls", raw_reason="tool_calls", model="replay-model")


async def test_reasoning_content_and_reasoning_fields(make_model: ModelFactory) -> None:
    body = sse(
        delta(role="assistant", content=""),
        delta(reasoning_content="Think "),
        delta(reasoning="harder.", content=None),
        delta(content="Answer"),
        delta("stop"),
    )
    events = await stream_events(make_model, body)
    assert [e for e in events if isinstance(e, ThinkingDelta)] == [
        ThinkingDelta("Think "),
        ThinkingDelta("harder."),
    ]
    response = accumulate(events)
    assert response.thinking == (Thinking(text="Think harder."),)
    assert response.content == "Answer"


async def test_whole_arguments_repeated_after_streamed_pieces(make_model: ModelFactory) -> None:
    body = sse(
        delta(tool_calls=[tool(0, id="0", type="function", name="search", arguments='{"q": ')]),
        delta(tool_calls=[tool(0, arguments='"cats"}')]),
        delta(tool_calls=[tool(0, id="0", type="function", name="search", arguments='{"q": "cats"}')]),
        delta(content=""),
    )
    response = accumulate(await stream_events(make_model, body))
    assert response.tool_calls == (ToolCall(id="0", name="search", arguments='{"q": "cats"}'),)
    assert response.finish_reason == "tool_calls"


async def test_whole_arguments_sent_twice(make_model: ModelFactory) -> None:
    full = '{"path": "a.txt"}'
    body = sse(
        delta(tool_calls=[tool(0, id="call_1", type="function", name="read", arguments=full)]),
        delta(tool_calls=[tool(0, id="call_1", type="function", name="read", arguments=full)]),
        delta("tool_calls"),
    )
    events = await stream_events(make_model, body)
    assert len([e for e in events if isinstance(e, ToolCallStart)]) == 1
    assert accumulate(events).tool_calls == (ToolCall(id="call_1", name="read", arguments=full),)


async def test_id_repeated_on_every_piece(make_model: ModelFactory) -> None:
    pieces = ['{"a"', ": 1, ", '"b": [1, ', "2]}"]
    body = sse(
        *(delta(tool_calls=[tool(0, id="call_x", name="f", arguments=p)]) for p in pieces),
        delta("tool_calls"),
    )
    response = accumulate(await stream_events(make_model, body))
    assert response.tool_calls == (ToolCall(id="call_x", name="f", arguments='{"a": 1, "b": [1, 2]}'),)


async def test_different_ids_at_the_same_index_are_separate_calls(make_model: ModelFactory) -> None:
    body = sse(
        delta(tool_calls=[tool(0, id="call_1", type="function", name="f", arguments='{"n": 1}')]),
        delta(tool_calls=[tool(0, id="call_2", type="function", name="g", arguments='{"n": 2}')]),
        delta("tool_calls"),
    )
    response = accumulate(await stream_events(make_model, body))
    assert response.tool_calls == (
        ToolCall(id="call_1", name="f", arguments='{"n": 1}'),
        ToolCall(id="call_2", name="g", arguments='{"n": 2}'),
    )


async def test_calls_without_index(make_model: ModelFactory) -> None:
    body = sse(
        delta(
            tool_calls=[
                tool(id="call_1", type="function", name="f", arguments={"n": 1}),
                tool(id="call_2", type="function", name="g", arguments='{"n": 2}'),
            ]
        ),
        delta("tool_calls"),
    )
    response = accumulate(await stream_events(make_model, body))
    assert response.tool_calls == (
        ToolCall(id="call_1", name="f", arguments='{"n": 1}'),
        ToolCall(id="call_2", name="g", arguments='{"n": 2}'),
    )


async def test_arguments_before_the_name_are_held_back(make_model: ModelFactory) -> None:
    body = sse(
        delta(tool_calls=[tool(0, arguments='{"x"')]),
        delta(tool_calls=[tool(0, id="call_9", name="late")]),
        delta(tool_calls=[tool(0, arguments=": 1}")]),
        delta("tool_calls"),
    )
    events = await stream_events(make_model, body)
    assert events[:3] == [
        ToolCallStart(0, "call_9", "late"),
        ToolCallArgsDelta(0, '{"x"'),
        ToolCallArgsDelta(0, ": 1}"),
    ]


async def test_null_error_fields_are_not_errors(make_model: ModelFactory) -> None:
    body = sse({**delta(content="fine"), "error": None}, delta("stop"))
    assert accumulate(await stream_events(make_model, body)).content == "fine"
    completion = {**openai_chat_completion(text="fine too"), "error": None}
    with ReplayServer([ReplayResponse.json_body(completion)]) as server:
        assert (await make_model(server).complete(HELLO)).content == "fine too"


async def test_finish_reasons(make_model: ModelFactory) -> None:
    cases = {
        "length": "length",
        "content_filter": "content_filter",
        "function_call": "tool_calls",
        "eos": "other",
    }
    for raw, mapped in cases.items():
        events = await stream_events(make_model, sse(delta(content="x"), delta(raw)))
        assert events[-1] == StreamFinish(mapped, raw_reason=raw, model="m")  # type: ignore[arg-type]


async def test_usage_with_cached_tokens(make_model: ModelFactory) -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 64}}
    body = sse(delta(content="x"), delta("stop"), {"id": "c", "choices": [], "usage": usage})
    response = accumulate(await stream_events(make_model, body))
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.cache_read_tokens) == (
        100,
        5,
        64,
    )
    assert response.usage.requests == 1


async def test_nonstreaming_reasoning_and_tool_calls(make_model: ModelFactory) -> None:
    calls = [ToolCall(id="call_1", name="f", arguments='{"a": 1}')]
    body = openai_chat_completion(text=None, tool_calls=calls, reasoning="because", usage=(3, 4))
    with ReplayServer([ReplayResponse.json_body(body)]) as server:
        response = await make_model(server).complete(HELLO)
    assert response.tool_calls == tuple(calls)
    assert response.thinking == (Thinking(text="because"),)
    assert response.finish_reason == "tool_calls"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (3, 4)
    assert response.content == ""


async def test_connection_is_reused_across_requests(make_model: ModelFactory) -> None:
    body = openai_chat_stream(text="again")
    with ReplayServer(lambda request: ReplayResponse.sse(body)) as server:
        model = make_model(server)
        for _ in range(5):
            assert (await complete_from_stream(model.stream(HELLO))).content == "again"
        assert server.connections_opened == 1
