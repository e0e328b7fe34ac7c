"""AnthropicModel: the request it sends (body, cache breakpoints, turn building) and how it sets up its client."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from loopwright.errors import ConfigError
from loopwright.messages import AssistantMessage, Message, Thinking, ToolCall, ToolResultMessage, UserMessage
from loopwright.models._accumulate import complete_from_stream
from loopwright.models.anthropic import AnthropicModel
from loopwright.models.base import ModelRequest, ModelSettings, ToolDefinition
from loopwright.testing import ReplayResponse, ReplayServer
from tests.models._shared import AnthropicFactory
from tests.models.test_anthropic_stream import stream_body, text_block

EPHEMERAL = {"type": "ephemeral"}
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = ToolDefinition(name="now", description="The time", parameters={"type": "object", "properties": {}})
STABLE = "You are terse.\n\n## Tools\n- get_weather: Current weather in a city"
SYSTEM = STABLE + "\n\nCurrent date and time: 2026-11-22 10:15 UTC"
OK = stream_body(text_block(0, "ok"))


async def sent_body(
    make_anthropic_model: AnthropicFactory, request: ModelRequest, **options: Any
) -> dict[str, Any]:
    with ReplayServer([ReplayResponse.sse(OK)]) as server:
        model = make_anthropic_model(server, **options)
        assert (await complete_from_stream(model.stream(request))).content == "ok"
    sent = server.requests[0]
    assert (sent.method, sent.path, sent.headers["content-type"]) == (
        "POST",
        "/v1/messages",
        "application/json",
    )
    assert sent.headers["anthropic-version"]
    body: dict[str, Any] = sent.json
    return body


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The turns AnthropicModel would send for ``messages``."""
    model = AnthropicModel("claude-test", api_key="k")
    turns: list[dict[str, Any]] = model.request_body(ModelRequest(system="", messages=messages))["messages"]
    return turns


def roles_and_types(messages: Sequence[Message]) -> list[tuple[str, list[str]]]:
    return [(m["role"], [b["type"] for b in m["content"]]) for m in wire_messages(messages)]


# --- the body ------------------------------------------------------------------------------------


async def test_request_body_shape(make_anthropic_model: AnthropicFactory) -> None:
    history: list[Message] = [
        UserMessage(content="Weather in Paris and Rome?"),
        AssistantMessage(
            content="Let me check.",
            tool_calls=(
                ToolCall(id="toolu_1", name="get_weather", arguments='{"city": "Paris"}'),
                ToolCall(id="toolu_2", name="get_weather", arguments='{"city":"Rome"}'),
            ),
            thinking=(Thinking(text="Two cities.", signature="sig-1"), Thinking(redacted="opaque")),
        ),
        ToolResultMessage(tool_call_id="toolu_1", name="get_weather", content="sunny"),
        ToolResultMessage(tool_call_id="toolu_2", name="get_weather", content="city missing", is_error=True),
        AssistantMessage(content="Paris is sunny; Rome failed."),
        UserMessage(content="Thanks"),
    ]
    request = ModelRequest(
        system=SYSTEM,
        stable_system=STABLE,
        messages=history,
        tools=[CLOCK, WEATHER],
        settings=ModelSettings(
            max_tokens=256,
            temperature=0.2,
            parallel_tool_calls=False,
            extra={"thinking": {"type": "enabled", "budget_tokens": 128}, "stop_sequences": ["END"]},
        ),
    )
    assert await sent_body(make_anthropic_model, request, model="claude-sonnet-4-5") == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "system": [
            {"type": "text", "text": STABLE, "cache_control": EPHEMERAL},
            {"type": "text", "text": "\n\nCurrent date and time: 2026-11-22 10:15 UTC"},
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Two cities.", "signature": "sig-1"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": "city missing",
                        "is_error": True,
                    },
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Paris is sunny; Rome failed."}]},
            {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
        ],
        "tools": [
            {"name": "now", "description": "The time", "input_schema": CLOCK.parameters},
            {
                "name": "get_weather",
                "description": "Current weather in a city",
                "input_schema": WEATHER.parameters,
                "cache_control": EPHEMERAL,
            },
        ],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        "stream": True,
        "temperature": 0.2,
        "thinking": {"type": "enabled", "budget_tokens": 128},
        "stop_sequences": ["END"],
    }


async def test_minimal_body_leaves_out_what_is_not_set(make_anthropic_model: AnthropicFactory) -> None:
    request = ModelRequest(
        system="", messages=[UserMessage(content="Hi")], settings=ModelSettings(parallel_tool_calls=False)
    )
    assert await sent_body(make_anthropic_model, request, max_tokens=1000) == {
        "model": "claude-test",
        "max_tokens": 1000,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "stream": True,
    }


async def test_complete_sends_a_non_streaming_request(make_anthropic_model: AnthropicFactory) -> None:
    message = {
        "type": "message",
        "model": "claude-test",
        "content": [{"type": "text", "text": "Hello!"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 3,
            "output_tokens": 2,
            "cache_read_input_tokens": 1,
            "cache_creation_input_tokens": 4,
        },
    }
    with ReplayServer([ReplayResponse.json_body(message)]) as server:
        response = await make_anthropic_model(server).complete(
            ModelRequest(system="", messages=[UserMessage(content="Hi")])
        )
    assert server.requests[0].json["stream"] is False
    assert (response.content, response.finish_reason, response.raw_finish_reason) == (
        "Hello!",
        "stop",
        "end_turn",
    )
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        3,
        2,
        1,
        4,
    )


async def test_extra_settings_the_json_encoder_refuses_go_through_the_sdk(
    make_anthropic_model: AnthropicFactory,
) -> None:
    when = datetime(2026, 11, 22, 10, 15, tzinfo=UTC)
    request = ModelRequest(
        system="",
        messages=[UserMessage(content="Hi")],
        settings=ModelSettings(extra={"metadata": {"at": when}}),
    )
    assert (await sent_body(make_anthropic_model, request))["metadata"] == {"at": "2026-11-22T10:15:00+00:00"}


# --- prompt caching ------------------------------------------------------------------------------


async def test_no_cache_breakpoints_when_caching_is_off(make_anthropic_model: AnthropicFactory) -> None:
    request = ModelRequest(
        system=SYSTEM, stable_system=STABLE, messages=[UserMessage(content="Hi")], tools=[CLOCK, WEATHER]
    )
    body = await sent_body(make_anthropic_model, request, cache=False)
    assert body["system"] == [{"type": "text", "text": SYSTEM}]
    assert all("cache_control" not in tool for tool in body["tools"])


@pytest.mark.parametrize(
    ("system", "stable", "expected"),
    [
        (
            SYSTEM,
            STABLE,
            [
                {"type": "text", "text": STABLE, "cache_control": EPHEMERAL},
                {"type": "text", "text": SYSTEM[len(STABLE) :]},
            ],
        ),
        (STABLE, STABLE, [{"type": "text", "text": STABLE, "cache_control": EPHEMERAL}]),
        (STABLE + "\n\n", STABLE, [{"type": "text", "text": STABLE, "cache_control": EPHEMERAL}]),
        (SYSTEM, "", [{"type": "text", "text": SYSTEM}]),
        (SYSTEM, "Not a prefix", [{"type": "text", "text": SYSTEM}]),
    ],
)
async def test_system_cache_breakpoint_after_the_stable_prefix(
    system: str, stable: str, expected: list[dict[str, Any]], make_anthropic_model: AnthropicFactory
) -> None:
    request = ModelRequest(system=system, stable_system=stable, messages=[UserMessage(content="Hi")])
    assert (await sent_body(make_anthropic_model, request))["system"] == expected


async def test_tool_breakpoint_is_on_the_last_tool_only(make_anthropic_model: AnthropicFactory) -> None:
    request = ModelRequest(system="", messages=[UserMessage(content="Hi")], tools=[WEATHER, CLOCK])
    tools = (await sent_body(make_anthropic_model, request))["tools"]
    assert [tool.get("cache_control") for tool in tools] == [None, EPHEMERAL]
    assert "cache_control" not in json.dumps(WEATHER.parameters)  # definitions are not mutated


# --- turns ---------------------------------------------------------------------------------------


def test_tool_results_are_grouped_in_one_user_turn() -> None:
    calls = tuple(ToolCall(id=f"toolu_{n}", name="f", arguments="{}") for n in range(3))
    history: list[Message] = [
        UserMessage(content="go"),
        AssistantMessage(tool_calls=calls),
        *(ToolResultMessage(tool_call_id=c.id, name="f", content=f"r{n}") for n, c in enumerate(calls)),
    ]
    turns = wire_messages(history)
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert [(b["type"], b["tool_use_id"], b["content"]) for b in turns[2]["content"]] == [
        ("tool_result", "toolu_0", "r0"),
        ("tool_result", "toolu_1", "r1"),
        ("tool_result", "toolu_2", "r2"),
    ]


def test_text_after_tool_results_joins_their_turn_after_them() -> None:
    call = ToolCall(id="toolu_1", name="f", arguments="{}")
    history: list[Message] = [
        UserMessage(content="go"),
        AssistantMessage(tool_calls=(call,)),
        UserMessage(content="also this"),  # a message steered in while the tool ran
        ToolResultMessage(tool_call_id="toolu_1", name="f", content="done"),
    ]
    turns = wire_messages(history)
    assert roles_and_types(history) == [
        ("user", ["text"]),
        ("assistant", ["tool_use"]),
        ("user", ["tool_result", "text"]),
    ]
    assert turns[2]["content"][1] == {"type": "text", "text": "also this"}


def test_consecutive_user_messages_become_one_turn() -> None:
    history: list[Message] = [UserMessage(content="one"), UserMessage(content="two")]
    assert wire_messages(history) == [
        {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}
    ]


def test_thinking_comes_first_and_empty_text_is_left_out() -> None:
    message = AssistantMessage(
        content="",
        tool_calls=(ToolCall(id="toolu_1", name="f", arguments='{"a": [1, 2]}'),),
        thinking=(Thinking(text="plan", signature="s1"),),
    )
    assert wire_messages([UserMessage(content="go"), message])[1]["content"] == [
        {"type": "thinking", "thinking": "plan", "signature": "s1"},
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": [1, 2]}},
    ]
    spaces = AssistantMessage(content="  \n", tool_calls=message.tool_calls)
    assert roles_and_types([UserMessage(content="go"), spaces]) == [
        ("user", ["text"]),
        ("assistant", ["tool_use"]),
    ]


def test_reasoning_without_a_signature_is_not_sent() -> None:
    # Reasoning from another provider (no signature) cannot be verified by Anthropic.
    message = AssistantMessage(content="Answer", thinking=(Thinking(text="unsigned reasoning"),))
    assert wire_messages([UserMessage(content="q"), message])[1]["content"] == [
        {"type": "text", "text": "Answer"}
    ]


def test_an_empty_assistant_message_is_left_out_and_its_neighbours_join() -> None:
    history: list[Message] = [
        UserMessage(content="one"),
        AssistantMessage(content=""),
        UserMessage(content="two"),
    ]
    assert roles_and_types(history) == [("user", ["text", "text"])]


@pytest.mark.parametrize("arguments", ["", "not json", "[1, 2]", '"text"', "null", '{"truncated": '])
def test_arguments_that_are_not_a_json_object_are_sent_as_empty_input(arguments: str) -> None:
    message = AssistantMessage(tool_calls=(ToolCall(id="toolu_1", name="f", arguments=arguments),))
    assert wire_messages([UserMessage(content="go"), message])[1]["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    ]


def test_empty_tool_result_has_no_content() -> None:
    history: list[Message] = [
        UserMessage(content="go"),
        AssistantMessage(tool_calls=(ToolCall(id="toolu_1", name="f", arguments="{}"),)),
        ToolResultMessage(tool_call_id="toolu_1", name="f", content=""),
    ]
    assert wire_messages(history)[2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_1"}]


# --- client set-up -------------------------------------------------------------------------------


async def test_own_client_for_a_local_server_needs_no_api_key() -> None:
    with ReplayServer([ReplayResponse.sse(OK)]) as server:
        model = AnthropicModel("local", base_url=server.base_url, timeout=5.0)
        try:
            await complete_from_stream(
                model.stream(ModelRequest(system="", messages=[UserMessage(content="x")]))
            )
        finally:
            await model.aclose()
        assert (model.client.max_retries, model.client.timeout) == (0, 5.0)
    sent = server.requests[0]
    assert sent.path == "/v1/messages"  # a base URL ending in /v1 is not doubled
    assert "not-needed" in (sent.headers.get("x-api-key", "") + sent.headers.get("authorization", ""))
    assert sent.headers["anthropic-version"]


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/", "/proxy", "/proxy/v1"])
async def test_messages_path_under_any_base_url(suffix: str) -> None:
    with ReplayServer([ReplayResponse.sse(OK)]) as server:
        model = AnthropicModel("m", base_url=server.url + suffix, api_key="k")
        try:
            await complete_from_stream(
                model.stream(ModelRequest(system="", messages=[UserMessage(content="x")]))
            )
        finally:
            await model.aclose()
    prefix = suffix.rstrip("/").removesuffix("/v1")
    assert server.requests[0].path == f"{prefix}/v1/messages"


async def test_keys_and_base_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with ReplayServer([ReplayResponse.sse(OK)] * 2) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
        for key in (None, "explicit"):
            model = AnthropicModel("m", api_key=key)
            try:
                await complete_from_stream(
                    model.stream(ModelRequest(system="", messages=[UserMessage(content="x")]))
                )
            finally:
                await model.aclose()
    sent = [r.headers.get("x-api-key", "") + r.headers.get("authorization", "") for r in server.requests]
    assert "from-env" in sent[0] and "explicit" in sent[1]


def test_environment_base_url_alone_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    model = AnthropicModel("m")
    assert model.client.api_key == "not-needed"


def test_no_key_and_no_base_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"ANTHROPIC_API_KEY.*base_url"):
        AnthropicModel("claude-sonnet-4-5")


def test_name_and_defaults() -> None:
    model = AnthropicModel("claude-sonnet-4-5", api_key="k")
    assert model.name == "anthropic:claude-sonnet-4-5"
    assert (model.provider, model.max_tokens, model.cache, model.timeout) == ("anthropic", 4096, True, 600.0)
    assert model.client.max_retries == 0
    assert (
        repr(model) == "AnthropicModel('claude-sonnet-4-5', base_url='https://api.anthropic.com', cache=True)"
    )
