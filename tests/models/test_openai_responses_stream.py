"""OpenAIResponsesModel: the request body it sends, stream events beyond the recordings, non-streamed
responses, and an agent run end to end on a recorded exchange."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent
from loopwright.messages import (
    AssistantMessage,
    Message,
    Thinking,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from loopwright.models._accumulate import complete_from_stream
from loopwright.models.base import (
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StreamFinish,
    TextDelta,
    ThinkingDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    ToolDefinition,
    UsageUpdate,
)
from loopwright.models.openai_responses import OpenAIResponsesModel
from loopwright.sessions._codec import TranscriptRecord
from loopwright.sessions.file import FileSessionStore
from loopwright.testing import ReplayRequest, ReplayResponse, ReplayServer
from tests.models._shared import HELLO, RECORDINGS, ResponsesFactory, accumulate, stream_events

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
INCLUDE = {"include": ["reasoning.encrypted_content"]}
USAGE = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 5}


def sse(*payloads: dict[str, Any], named: bool = True) -> bytes:
    """A Responses event stream; ``named`` adds the ``event:`` line OpenAI sends before each ``data:``."""
    lines = [(f"event: {p['type']}\n" if named else "") + f"data: {json.dumps(p)}" for p in payloads]
    return ("\n\n".join(lines) + "\n\n").encode()


def completed(
    status: str = "completed", usage: dict[str, Any] | None = USAGE, **fields: Any
) -> dict[str, Any]:
    kind = "response.completed" if status == "completed" else f"response.{status}"
    response = {"status": status, "model": "gpt-5-2025-08-07", "usage": usage, **fields}
    return {"type": kind, "response": response}


def added(index: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.added", "output_index": index, "item": item}


def done(index: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.done", "output_index": index, "item": item}


def call_item(item_id: str, call_id: str, name: str, arguments: str = "") -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": arguments}


def args_delta(delta: str, *, item_id: str | None = None, index: int | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "response.function_call_arguments.delta", "delta": delta}
    if item_id is not None:
        event["item_id"] = item_id
    if index is not None:
        event["output_index"] = index
    return event


def text_delta(delta: str, item_id: str = "msg_1", index: int = 0) -> dict[str, Any]:
    return {"type": "response.output_text.delta", "item_id": item_id, "output_index": index, "delta": delta}


def message_item(item_id: str, text: str) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": []}
    return {"type": "message", "id": item_id, "role": "assistant", "content": [part]}


def reasoning_item(item_id: str, encrypted: str | None = None, summary: Sequence[str] = ()) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": s} for s in summary],
    }
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


# --- construction --------------------------------------------------------------------------------


async def test_name_repr_and_key_rules() -> None:
    model = OpenAIResponsesModel("gpt-5", base_url="http://127.0.0.1:9/v1")
    try:
        assert model.name == "openai-responses:gpt-5"
        assert repr(model) == "OpenAIResponsesModel('gpt-5', base_url='http://127.0.0.1:9/v1/')"
        assert model.client.max_retries == 0 and model.timeout == 600.0
    finally:
        await model.aclose()


@pytest.mark.usefixtures("no_openai_env")
async def test_local_server_needs_no_api_key() -> None:
    with ReplayServer([ReplayResponse.sse(sse(completed()))]) as server:
        model = OpenAIResponsesModel("local", base_url=server.base_url)
        try:
            await complete_from_stream(model.stream(HELLO))
        finally:
            await model.aclose()
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


# --- request body --------------------------------------------------------------------------------

REASONING = Thinking(text="Checking Paris first.", signature="rs_1", redacted="gAAAA-enc-1")


async def test_request_body_shape(make_responses_model: ResponsesFactory) -> None:
    history: list[Message] = [
        UserMessage(content="Weather in Paris and Rome?"),
        AssistantMessage(
            content="Let me check.",
            tool_calls=(ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}'),),
            thinking=(
                REASONING,
                Thinking(text="an Anthropic block", signature="EqQBCkgIARAB"),  # not ours: never sent
                Thinking(text="no encrypted content", signature="rs_2"),  # useless with store off
            ),
        ),
        ToolResultMessage(tool_call_id="call_1", name="get_weather", content="sunny"),
        AssistantMessage(
            tool_calls=(
                ToolCall(id="call_2", name="get_weather", arguments='{"city":"Rome"}'),
                ToolCall(id="call_3", name="get_weather", arguments="{ }"),
            ),
            thinking=(Thinking(signature="rs_3", redacted="gAAAA-enc-3"),),
        ),
        ToolResultMessage(tool_call_id="call_2", name="get_weather", content="rain"),
        ToolResultMessage(
            tool_call_id="call_3", name="get_weather", content="error: city missing", is_error=True
        ),
        AssistantMessage(
            thinking=(Thinking(signature="rs_4", redacted="gAAAA-enc-4"),)
        ),  # cut short: nothing follows
        AssistantMessage(content="Paris is sunny, Rome rainy."),
        UserMessage(content="Thanks"),
    ]
    request = ModelRequest(
        system="You are terse.",
        messages=history,
        tools=[WEATHER],
        settings=ModelSettings(
            max_tokens=256,
            temperature=0.2,
            parallel_tool_calls=False,
            extra={**INCLUDE, "reasoning": {"effort": "low", "summary": "auto"}},
        ),
    )
    with ReplayServer([ReplayResponse.sse(sse(completed()))]) as server:
        model = make_responses_model(server, "gpt-5-mini")
        await complete_from_stream(model.stream(request))
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/responses")
    assert sent.headers["authorization"] == "Bearer test-key"
    assert sent.json == {
        "model": "gpt-5-mini",
        "instructions": "You are terse.",
        "input": [
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Checking Paris first."}],
                "encrypted_content": "gAAAA-enc-1",
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Let me check."}],
            },
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            {"type": "reasoning", "id": "rs_3", "summary": [], "encrypted_content": "gAAAA-enc-3"},
            {
                "type": "function_call",
                "call_id": "call_2",
                "name": "get_weather",
                "arguments": '{"city":"Rome"}',
            },
            {"type": "function_call", "call_id": "call_3", "name": "get_weather", "arguments": "{ }"},
            {"type": "function_call_output", "call_id": "call_2", "output": "rain"},
            {"type": "function_call_output", "call_id": "call_3", "output": "error: city missing"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Paris is sunny, Rome rainy."}],
            },
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current weather in a city",
                "parameters": WEATHER.parameters,
                "strict": False,
            }
        ],
        "stream": True,
        "store": False,
        "max_output_tokens": 256,
        "temperature": 0.2,
        "parallel_tool_calls": False,
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"effort": "low", "summary": "auto"},
    }


async def test_minimal_body_leaves_out_what_is_not_set(make_responses_model: ResponsesFactory) -> None:
    request = ModelRequest(
        system="", messages=[UserMessage(content="Hi")], settings=ModelSettings(parallel_tool_calls=True)
    )
    with ReplayServer([ReplayResponse.json_body({"status": "completed", "output": []})]) as server:
        await make_responses_model(server).complete(request)
    assert server.requests[0].json == {
        "model": "gpt-5",
        "input": [{"role": "user", "content": "Hi"}],
        "stream": False,
        "store": False,
    }


async def test_with_store_on_reasoning_items_go_back_by_id(make_responses_model: ResponsesFactory) -> None:
    history: list[Message] = [
        UserMessage(content="Hi"),
        AssistantMessage(
            content="Hello!", thinking=(Thinking(signature="rs_9"), Thinking(text="x", signature="sig"))
        ),
        UserMessage(content="Again"),
    ]
    request = ModelRequest(system="", messages=history, settings=ModelSettings(extra={"store": True}))
    with ReplayServer([ReplayResponse.sse(sse(completed()))]) as server:
        await complete_from_stream(make_responses_model(server).stream(request))
    sent = server.requests[0].json
    assert sent["store"] is True
    assert sent["input"][1] == {"type": "reasoning", "id": "rs_9", "summary": []}
    assert [i.get("type", "user") for i in sent["input"]] == ["user", "reasoning", "message", "user"]


# --- stream events -------------------------------------------------------------------------------


async def test_reasoning_summary_text_and_call_in_order(make_responses_model: ResponsesFactory) -> None:
    summary = {"type": "response.reasoning_summary_text.delta", "item_id": "rs_a", "output_index": 0}
    body = sse(
        {"type": "response.created", "response": {"status": "in_progress", "model": "gpt-5-2025-08-07"}},
        added(0, reasoning_item("rs_a", encrypted="provisional")),
        {**summary, "summary_index": 0, "delta": "Think"},
        {**summary, "summary_index": 0, "delta": "ing."},
        {**summary, "summary_index": 1, "delta": "More."},
        done(0, reasoning_item("rs_a", encrypted="final", summary=["Thinking.", "More."])),
        added(1, message_item("msg_1", "")),
        text_delta("Hel", index=1),
        text_delta("lo", index=1),
        done(1, message_item("msg_1", "Hello")),
        added(2, call_item("fc_1", "call_1", "get_weather")),
        args_delta('{"city"', item_id="fc_1", index=2),
        args_delta(': "Oslo"}', item_id="fc_1", index=2),
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 2,
            "arguments": '{"city": "Oslo"}',
        },
        done(2, call_item("fc_1", "call_1", "get_weather", '{"city": "Oslo"}')),
        completed(),
    )
    events = await stream_events(make_responses_model, body)
    assert events == [
        ThinkingDelta(signature="rs_a", block=0),
        ThinkingDelta("Think", block=0),
        ThinkingDelta("ing.", block=0),
        ThinkingDelta("\n\nMore.", block=0),
        ThinkingDelta(redacted="final", block=0),
        TextDelta("Hel"),
        TextDelta("lo"),
        ToolCallStart(0, "call_1", "get_weather"),
        ToolCallArgsDelta(0, '{"city"'),
        ToolCallArgsDelta(0, ': "Oslo"}'),
        UsageUpdate(Usage(input_tokens=10, output_tokens=5, cache_read_tokens=4, requests=1)),
        StreamFinish("tool_calls", raw_reason="completed", model="gpt-5-2025-08-07"),
    ]
    response = accumulate(events)
    assert response.thinking == (Thinking(text="Thinking.\n\nMore.", signature="rs_a", redacted="final"),)
    assert response.content == "Hello"
    assert response.tool_calls == (ToolCall(id="call_1", name="get_weather", arguments='{"city": "Oslo"}'),)


async def test_interleaved_calls_map_to_running_positions(make_responses_model: ResponsesFactory) -> None:
    body = sse(
        added(0, reasoning_item("rs_a")),
        done(0, reasoning_item("rs_a")),
        added(1, call_item("fc_a", "call_a", "first")),
        added(2, call_item("fc_b", "call_b", "second")),
        args_delta('{"n":', item_id="fc_b"),  # item id only
        args_delta('{"n":', index=1),  # output index only
        args_delta(" 2}", item_id="fc_b", index=2),
        args_delta(" 1}", item_id="fc_a", index=1),
        completed(),
    )
    events = await stream_events(make_responses_model, body)
    calls = [e for e in events if isinstance(e, ToolCallStart | ToolCallArgsDelta)]
    assert calls == [
        ToolCallStart(0, "call_a", "first"),
        ToolCallStart(1, "call_b", "second"),
        ToolCallArgsDelta(1, '{"n":'),
        ToolCallArgsDelta(0, '{"n":'),
        ToolCallArgsDelta(1, " 2}"),
        ToolCallArgsDelta(0, " 1}"),
    ]
    assert [(c.id, json.loads(c.arguments)) for c in accumulate(events).tool_calls] == [
        ("call_a", {"n": 1}),
        ("call_b", {"n": 2}),
    ]


async def test_arguments_only_in_done_events(make_responses_model: ResponsesFactory) -> None:
    body = sse(
        added(0, call_item("fc_a", "call_a", "a")),
        done(0, call_item("fc_a", "call_a", "a", '{"x": 1}')),  # no deltas at all
        added(1, call_item("fc_b", "call_b", "b")),
        args_delta('{"y"', item_id="fc_b", index=1),
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_b",
            "output_index": 1,
            "arguments": '{"y": 2}',
        },
        added(2, call_item("fc_c", "call_c", "c")),
        args_delta('{"z": 3}', item_id="fc_c", index=2),
        done(2, call_item("fc_c", "call_c", "c", '{"z": "contradicts the deltas"}')),
        completed(),
    )
    events = await stream_events(make_responses_model, body)
    assert ToolCallArgsDelta(1, ": 2}") in events
    assert [(c.id, c.arguments) for c in accumulate(events).tool_calls] == [
        ("call_a", '{"x": 1}'),
        ("call_b", '{"y": 2}'),
        ("call_c", '{"z": 3}'),
    ]


async def test_arguments_before_their_item_are_held_back(make_responses_model: ResponsesFactory) -> None:
    body = sse(
        args_delta('{"q": ', item_id="fc_a", index=0),
        added(0, call_item("fc_a", "call_a", "search")),
        args_delta('"x"}', item_id="fc_a", index=0),
        args_delta("{}", item_id="fc_orphan", index=5),  # never announced: started at the end
        completed(),
    )
    events = await stream_events(make_responses_model, body)
    assert events[:3] == [
        ToolCallStart(0, "call_a", "search"),
        ToolCallArgsDelta(0, '{"q": '),
        ToolCallArgsDelta(0, '"x"}'),
    ]
    response = accumulate(events)
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_a", "search", '{"q": "x"}'),
        ("call_1", "", "{}"),
    ]


async def test_text_of_separate_messages_and_refusals(make_responses_model: ResponsesFactory) -> None:
    def refusal(item_id: str, text: str) -> dict[str, Any]:
        part = {"type": "refusal", "refusal": text}
        return {"type": "message", "id": item_id, "role": "assistant", "content": [part]}

    body = sse(
        added(0, message_item("msg_1", "")),
        text_delta("First.", "msg_1", 0),
        done(0, message_item("msg_1", "First.")),
        done(1, message_item("msg_2", "Second, only in its done event.")),
        {"type": "response.refusal.delta", "item_id": "msg_3", "output_index": 2, "delta": "I can't."},
        done(2, refusal("msg_3", "I can't.")),  # already streamed: not repeated
        done(3, refusal("msg_4", "No.")),
        completed(),
        named=False,  # the type in the payload is enough
    )
    response = accumulate(await stream_events(make_responses_model, body))
    assert response.content == "First.\n\nSecond, only in its done event.\n\nI can't.\n\nNo."
    assert (response.finish_reason, response.tool_calls) == ("stop", ())


@pytest.mark.parametrize(
    ("reason", "finish"),
    [("max_output_tokens", "length"), ("content_filter", "content_filter"), ("max_messages", "other")],
)
async def test_incomplete_response(reason: str, finish: str, make_responses_model: ResponsesFactory) -> None:
    body = sse(
        text_delta("Partial"),
        completed("incomplete", incomplete_details={"reason": reason}),
        text_delta(" ignored after the end"),
    )
    response = accumulate(await stream_events(make_responses_model, body))
    assert (response.content, response.finish_reason, response.raw_finish_reason) == (
        "Partial",
        finish,
        reason,
    )
    assert response.usage.output_tokens == 5


async def test_raw_reasoning_text_and_done_marker(make_responses_model: ResponsesFactory) -> None:
    """Open-weight models on compatible servers stream ``reasoning_text``; some servers end with [DONE]."""
    delta = {
        "type": "response.reasoning_text.delta",
        "item_id": "rs_x",
        "output_index": 0,
        "content_index": 0,
    }
    body = (
        sse(
            added(0, {"type": "reasoning", "id": "rs_x", "summary": []}),
            {**delta, "delta": "Let me see"},
            done(
                0,
                {
                    "type": "reasoning",
                    "id": "rs_x",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": "Let me see"}],
                },
            ),
            text_delta("Done", "msg", 1),
            completed(usage=None),
        )
        + b"data: [DONE]\n\n"
    )
    response = accumulate(await stream_events(make_responses_model, body))
    assert response.thinking == (Thinking(text="Let me see", signature="rs_x"),)
    assert (response.content, response.usage.requests) == ("Done", 0)


async def test_multibyte_text_split_inside_characters(make_responses_model: ResponsesFactory) -> None:
    text = "Grüße aus Köln — 東京 🚀"
    body = sse(text_delta(text), completed())
    with ReplayServer([ReplayResponse.sse(body).resplit(piece_size=1)]) as server:
        response = await complete_from_stream(make_responses_model(server).stream(HELLO))
    assert response.content == text


# --- non-streamed responses ----------------------------------------------------------------------


async def test_complete_reads_every_item_kind(make_responses_model: ResponsesFactory) -> None:
    body = {
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "model": "gpt-5-2025-08-07",
        "output": [
            reasoning_item("rs_1", encrypted="enc", summary=["Plan.", "Check."]),
            message_item("msg_1", "Answer"),
            call_item("fc_1", "call_1", "get_weather", '{"city": "Oslo"}'),
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        ],
        "usage": USAGE,
    }
    with ReplayServer([ReplayResponse.json_body(body)]) as server:
        response = await make_responses_model(server).complete(HELLO)
    assert response == ModelResponse(
        content="Answer",
        tool_calls=(ToolCall(id="call_1", name="get_weather", arguments='{"city": "Oslo"}'),),
        thinking=(Thinking(text="Plan.\n\nCheck.", signature="rs_1", redacted="enc"),),
        usage=response.usage,
        finish_reason="length",
        raw_finish_reason="max_output_tokens",
        model="gpt-5-2025-08-07",
    )
    assert (response.usage.input_tokens, response.usage.cache_read_tokens, response.usage.requests) == (
        10,
        4,
        1,
    )


async def test_complete_without_usage_still_counts_the_request(
    make_responses_model: ResponsesFactory,
) -> None:
    body = {"output": [message_item("m", "Hi")]}  # a sparse compatible server: no status, no usage
    with ReplayServer([ReplayResponse.json_body(body)]) as server:
        response = await make_responses_model(server).complete(HELLO)
    assert (response.content, response.finish_reason, response.usage.requests) == ("Hi", "stop", 1)


async def test_summaries_round_trip_into_the_next_request(make_responses_model: ResponsesFactory) -> None:
    first = {
        "status": "completed",
        "output": [reasoning_item("rs_1", "enc", ["Plan."]), message_item("m", "Hi")],
    }
    with ReplayServer([ReplayResponse.json_body(first), ReplayResponse.json_body(first)]) as server:
        model = make_responses_model(server)
        response = await model.complete(HELLO)
        history: list[Message] = [
            *HELLO.messages,
            AssistantMessage(content=response.content, thinking=response.thinking),
            UserMessage(content="More"),
        ]
        await model.complete(ModelRequest(system="", messages=history))
    assert server.requests[1].json["input"][1:3] == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Plan."}],
            "encrypted_content": "enc",
        },
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi"}]},
    ]


# --- end to end ----------------------------------------------------------------------------------


def multiply(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


async def test_agent_run_on_the_recorded_two_turn_exchange() -> None:
    recording = RECORDINGS / "openai-responses-stream-function-call-two-turn.json"
    with ReplayServer.from_recording(recording) as server:
        model = OpenAIResponsesModel("gpt-5.5", base_url=server.base_url, api_key="test")
        try:
            agent = Agent(model, system="You multiply.", tools=[multiply])
            report = await agent.run("What is 1231 * 2331? Use the multiply tool.")
            transcript = await agent.transcript(report.session_id)
        finally:
            await model.aclose()
        assert server.errors == []
    assert (report.reason, report.error) == ("done", None)
    assert report.final_text == "1231 × 2331 = **2,869,461**"
    assert report.model == "openai-responses:gpt-5.5"
    assert [s.finish_reason for s in report.steps] == ["tool_calls", "stop"]
    assert [(t.call_id, t.tool_name, t.arguments) for t in report.steps[0].tool_calls] == [
        ("call_sVidsfFJ6zlzRpelrPkTPlpd", "multiply", {"a": 1231, "b": 2331})
    ]
    usage = report.total_usage
    assert (usage.input_tokens, usage.output_tokens, usage.requests) == (58 + 94, 23 + 18, 2)

    assert [type(m) for m in transcript if not isinstance(m, TranscriptRecord)] == [
        UserMessage,
        AssistantMessage,
        ToolResultMessage,
        AssistantMessage,
    ]
    user, call, result, answer = [m for m in transcript if not isinstance(m, TranscriptRecord)]
    assert isinstance(user, UserMessage) and user.content.startswith("What is 1231")
    assert isinstance(call, AssistantMessage) and isinstance(answer, AssistantMessage)
    assert isinstance(result, ToolResultMessage)
    assert call.tool_calls == (
        ToolCall(id="call_sVidsfFJ6zlzRpelrPkTPlpd", name="multiply", arguments='{"a":1231,"b":2331}'),
    )
    assert (result.tool_call_id, result.content, result.is_error) == (
        "call_sVidsfFJ6zlzRpelrPkTPlpd",
        "2869461",
        False,
    )
    assert answer.content == report.final_text and answer.model == "gpt-5.5-2026-04-23"

    first, second = (r.json for r in server.requests)
    assert "You multiply." in first["instructions"] and first["instructions"] == second["instructions"]
    assert [t["name"] for t in first["tools"]] == ["multiply"]
    assert second["input"] == [
        {"role": "user", "content": "What is 1231 * 2331? Use the multiply tool."},
        {
            "type": "function_call",
            "call_id": "call_sVidsfFJ6zlzRpelrPkTPlpd",
            "name": "multiply",
            "arguments": '{"a":1231,"b":2331}',
        },
        {"type": "function_call_output", "call_id": "call_sVidsfFJ6zlzRpelrPkTPlpd", "output": "2869461"},
    ]


async def test_reasoning_survives_the_transcript_file_across_runs(tmp_path: Path) -> None:
    """Two runs in one file-backed session: the second request echoes the first run's reasoning items."""

    def answer(request: ReplayRequest) -> ReplayResponse:
        turn = len(server.requests)
        if turn == 1:
            return ReplayResponse.sse(
                sse(
                    added(0, reasoning_item("rs_1", "provisional")),
                    done(0, reasoning_item("rs_1", "enc-1")),
                    added(1, call_item("fc_1", "call_1", "multiply")),
                    args_delta('{"a": 6, "b": 7}', item_id="fc_1", index=1),
                    completed(),
                )
            )
        if turn == 2:
            return ReplayResponse.sse(
                sse(done(0, reasoning_item("rs_2", "enc-2")), text_delta("42", "m", 1), completed())
            )
        return ReplayResponse.sse(sse(text_delta("Still 42."), completed()))

    with ReplayServer(answer) as server:
        model = OpenAIResponsesModel("gpt-5", base_url=server.base_url, api_key="test")
        try:
            agent = Agent(model, tools=[multiply], workspace=tmp_path, settings=ModelSettings(extra=INCLUDE))
            first = await agent.run("6 * 7?")
            second = await agent.run("Sure?", session_id=first.session_id)
        finally:
            await model.aclose()
        assert server.errors == []
    assert (first.final_text, second.final_text) == ("42", "Still 42.")
    assert isinstance(agent.store, FileSessionStore)  # the second run read the history back from disk
    kinds = [
        (i.get("type", "user"), i.get("id") or i.get("call_id")) for i in server.requests[2].json["input"]
    ]
    assert kinds == [
        ("user", None),
        ("reasoning", "rs_1"),
        ("function_call", "call_1"),
        ("function_call_output", "call_1"),
        ("reasoning", "rs_2"),
        ("message", None),
        ("user", None),
    ]
    echoed = [
        i["encrypted_content"] for i in server.requests[2].json["input"] if i.get("type") == "reasoning"
    ]
    assert echoed == ["enc-1", "enc-2"]
    assert all(r.json["include"] == ["reasoning.encrypted_content"] for r in server.requests)
