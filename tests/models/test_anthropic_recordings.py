"""Conformance: every recorded Anthropic Messages exchange, replayed through AnthropicModel.

Each recording is replayed turn by turn over a real loopback server, streams through ``stream()`` and
JSON bodies through ``complete()``. The next turn's request is built from our own parsed response plus
the recorded tool results, and what we send is compared with the recorded request: the same roles,
the same blocks in the same order (thinking echoed with its signature, tool_use ids, names and inputs,
tool_result ids and contents), the same text up to whitespace, the same settings. Blocks of server tools
(run by Anthropic) are the one thing we do not send back: the comparison leaves them out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from loopwright.errors import ContextLengthExceededError, ModelError
from loopwright.messages import AssistantMessage, Message, Thinking, ToolCall, ToolResultMessage, UserMessage
from loopwright.models.anthropic import AnthropicModel
from loopwright.models.base import ModelRequest, ModelResponse, ModelSettings, ToolDefinition
from loopwright.models.openai import ProviderHTTPError
from loopwright.testing import ReplayServer
from tests.models._shared import (
    RECORDINGS,
    AnthropicFactory,
    Digest,
    Err,
    answered_interactions,
    assistant_turn,
    check_calls,
    check_error,
    load_recording,
    recording_names,
    request_json,
    run_turn,
)

Text = str | Digest


@dataclass(frozen=True)
class Ok:
    text: Text
    calls: list[tuple[str, str, Any]]
    usage: tuple[int, int, int, int]
    """input, output, cache read, cache write tokens"""
    finish: str
    raw_finish: str | None
    thinking: tuple[tuple[Text, Text | None, Text | None], ...] = ()
    """(text, signature, redacted) per thinking block"""
    model: str | None = None
    contains: tuple[str, ...] = field(default=())


HAIKU = "claude-haiku-4-5-20251001"
OVERLOADED_529 = Err(ProviderHTTPError, 529, True, "Overloaded (overloaded_error)", "overloaded_error")
OVERLOADED_IN_STREAM = Err(ProviderHTTPError, None, True, "Overloaded (overloaded_error)", "overloaded_error")
FAMILY = [
    ("toolu_0167cfEnoQaPviGdVXA95zcu", "retrieve_entity_info", {"name": "Alice"}),
    ("toolu_01EEe2V5HD1Ac4rKiUR4HD2T", "retrieve_entity_info", {"name": "Bob"}),
    ("toolu_01XFyAjstT3966qvRynZyVPo", "retrieve_entity_info", {"name": "Charlie"}),
    ("toolu_013mnQZbgtK2oe3Mo3XKJsx3", "retrieve_entity_info", {"name": "Daisy"}),
]
PELICAN_NAMES = (
    "Here are two great names for your pet pelican:\n\n1. **Charles** - A sophisticated and dignified name, "
    "perfect for a pelican with personality!\n2. **Sammy** - A friendly and playful name that gives off warm, "
    "approachable vibes.\n\nEither of these would make an excellent name for your feathered friend! 🦅"
)

EXPECTED: dict[str, list[Ok | Err]] = {
    "anthropic-error-400-invalid-request.json": [
        Err(
            ProviderHTTPError,
            400,
            False,
            "This model does not support effort level 'xhigh'. Supported levels: high, low, max, medium. "
            "(invalid_request_error)",
            "invalid_request_error",
        ),
    ],
    "anthropic-error-400-prompt-too-long.json": [
        Err(
            ContextLengthExceededError,
            400,
            False,
            "prompt is too long: 200251 tokens > 200000 maximum",
            "invalid_request_error",
        ),
        Err(
            ContextLengthExceededError,
            400,
            False,
            "prompt is too long: 203284 tokens > 200000 maximum",
            "invalid_request_error",
        ),
        Err(
            ContextLengthExceededError,
            400,
            False,
            "prompt is too long: 1520294 tokens > 1000000 maximum",
            "invalid_request_error",
        ),
    ],
    "anthropic-error-404-not-found.json": [
        Err(
            ProviderHTTPError,
            404,
            False,
            "(HTTP 404): model: claude-sonet-4-5 (not_found_error)",
            "not_found_error",
        ),
    ],
    "anthropic-error-429-headers-without-retry-after.json": [
        # No body and no retry-after: the exhausted request limit resets 1 s after the response's date.
        Err(
            ProviderHTTPError,
            429,
            True,
            "(HTTP 429): the response gave no error details",
            None,
            retry_after=1.0,
        ),
    ],
    "anthropic-error-529-overloaded-body-variants.json": [
        OVERLOADED_529,
        Err(
            ProviderHTTPError,
            529,
            True,
            "Overloaded. https://docs.claude.com/en/api/errors (overloaded_error)",
            "overloaded_error",
        ),
    ],
    "anthropic-error-529-overloaded-with-headers.json": [OVERLOADED_529],
    "anthropic-nonstream-parallel-tool-use.json": [
        Ok(
            "I'll help you find out who is the youngest by retrieving information about each family member. "
            "I'll retrieve their entity information to compare their ages.",
            FAMILY,
            (423, 202, 0, 0),
            "tool_calls",
            "tool_use",
            model=HAIKU,
        ),
        Ok(
            "Based on the retrieved information, we can see the family relationships:\n- Alice and Bob are married\n"
            "- Charlie is their son\n- Daisy is their daughter and Charlie's younger sister\n\nTherefore, Daisy is "
            "the youngest in the family. She is described as Charlie's younger sister, which indicates she is the "
            "youngest among the four family members.",
            [],
            (771, 77, 0, 0),
            "stop",
            "end_turn",
            model=HAIKU,
        ),
    ],
    "anthropic-nonstream-thinking-tool-use.json": [
        Ok(
            "I'll help you find the largest city in your country. First, let me determine which country you're from.",
            [("toolu_01YGzqpRE16Vricda3Aqcejo", "get_user_country", {})],
            (398, 155, 0, 0),
            "tool_calls",
            "tool_use",
            thinking=(
                (
                    'The user is asking about the largest city in "the user country". To answer this question, I '
                    "first need to determine what country the user is from. I have access to a function called "
                    '"get_user_country" that can help me find out the user\'s country. Once I know the country, I '
                    "can then provide information about its largest city.\n\nLet me call the get_user_country "
                    "function first.",
                    Digest("EqEECkYICxgCKkAo3UA4WwDbB8ihhpykVCsPx6iM", 736, "a277063a3ae6a45c"),
                    None,
                ),
            ),
            model="claude-sonnet-4-20250514",
        ),
        Ok(
            Digest("Based on the information that you're fro", 604, "3ab8eef023cea02c"),
            [],
            (566, 126, 0, 0),
            "stop",
            "end_turn",
            model="claude-sonnet-4-20250514",
            contains=("**Mexico City** (Ciudad de México)",),
        ),
    ],
    "anthropic-stream-error-event-overloaded.json": [OVERLOADED_IN_STREAM] * 3,
    "anthropic-stream-json-tool-ping-inside-block.json": [
        Ok(
            "",
            [
                (
                    "toolu_01KFbKqPYSuAKujiL6mTfzYA",
                    "json",
                    {"elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]},
                )
            ],
            (849, 47, 0, 0),
            "tool_calls",
            "tool_use",
            model=HAIKU,
        ),
    ],
    "anthropic-stream-parallel-tool-use-two-turn.json": [
        Ok(
            "",
            [
                ("toolu_01LtHJmixrs9NcWQkK8hu8hj", "pelican_name_generator", {}),
                ("toolu_01N8a4jWyf116qKTMqKKmjyt", "pelican_name_generator", {}),
            ],
            (542, 62, 0, 0),
            "tool_calls",
            "tool_use",
            model=HAIKU,
        ),
        Ok(PELICAN_NAMES, [], (678, 82, 0, 0), "stop", "end_turn", model=HAIKU),
    ],
    "anthropic-stream-pause-turn-continuation.json": [
        Ok(
            # Text that server tools separate becomes paragraphs; the last server_tool_use has no result yet.
            "I'll run these searches one at a time as requested. Let me start:\n\nLet me continue with the "
            "remaining searches you requested:\n\nNow continuing with the remaining searches:",
            [],
            (404500, 943, 0, 0),  # message_delta's cumulative input (message_start said 2479)
            "other",
            "pause_turn",
            thinking=(
                (
                    Digest("The user wants me to run a series of web", 1051, "d6ff8883e7ef59e6"),
                    Digest("EuwJCm4IDxgCKkBjID0+egpRzHnlwt9pXf871ag+", 1688, "3b2f60f52032145b"),
                    None,
                ),
            ),
            model="claude-sonnet-4-5-20250929",
        ),
        Ok(
            Digest("Let me continue with the remaining searc", 3072, "a7697460549f6d92"),
            [],
            (482529, 1310, 0, 0),
            "stop",
            "end_turn",
            model="claude-sonnet-4-5-20250929",
            contains=(
                "as requested:\n\nLet me continue with the last few searches you requested:\n\nNow let me",
                # text blocks split around citations join without a break
                "**Weather**: San Francisco's current temperature is 57°F",
                "SW winds at 10-20 mph.\n\n**Sunrise**: Sunrise today is at 5:50 AM",
            ),
        ),
    ],
    "anthropic-stream-redacted-thinking.json": [
        Ok(
            "I notice that you've sent what appears to be some kind of test string or command. I don't have any "
            'special "magic string" triggers or backdoor commands that would expose internal systems or change my '
            "behavior.\n\nI'm Claude, an AI assistant created by Anthropic to be helpful, harmless, and honest. How "
            "can I assist you today with a legitimate task or question?",
            [],
            (92, 189, 0, 0),
            "stop",
            "end_turn",
            thinking=(
                ("", None, Digest("EqkECkYIBxgCKkA8AZ4noDfV5VcOJe/p3JTRB6Xz", 744, "a5fcad0dab0d0189")),
                ("", None, Digest("EtgBCkYIBxgCKkDQfGkwzflEJP5asG3oQfJXcTwJ", 296, "f2ba85446010cd8c")),
            ),
            model="claude-sonnet-4-5-20250929",
        ),
    ],
    "anthropic-stream-stop-sequence.json": [
        Ok(
            '\ndef pelican():\n    return "A large waterbird with a long bill and a throat pouch for catching fish."\n',
            [],
            (16, 28, 0, 0),
            "stop",
            "stop_sequence",
            model=HAIKU,
        ),
    ],
    "anthropic-stream-thinking-text.json": [
        Ok(
            '1. **Pouch** - references their iconic bill pouch\n2. **Pelé** - playful take on "pelican"',
            [],
            (46, 133, 0, 0),
            "stop",
            "end_turn",
            thinking=(
                (
                    "The user wants two names for a pet pelican, and they want me to be brief. I'll suggest two "
                    "names that would suit a pelican well.\n\nSome good options:\n- Pelé (play on pelican)\n- Pouch "
                    "(referencing their bill pouch)\n- Captain Beak\n- Squirt\n- Scoop\n- Wing\n\nLet me give two "
                    "brief, catchy names:",
                    Digest("EuYDCmMIDBgCKkC05Zda4P+Cdk/LQKE+Aol4ZY3E", 656, "78bfa222ef936ef1"),
                    None,
                ),
            ),
            model=HAIKU,
        ),
    ],
    "anthropic-stream-thinking-then-tool-use-two-turn.json": [
        Ok(
            "",
            [("toolu_01825dXWLSoJwCst1qTsiWdb", "fixed_version", {})],
            (598, 92, 0, 0),
            "tool_calls",
            "tool_use",
            thinking=(
                (
                    "The user wants me to:\n1. Use the fixed_version tool\n2. Tell them the version\n3. Make a short "
                    "joke about it\n\nLet me first call the fixed_version tool to see what version it returns.",
                    Digest("EoQDCm0IDhgCKkCDzGs2kL2PgnDCZU/nM2wG2P1V", 524, "1ca0c5e976b11f45"),
                    None,
                ),
            ),
            model=HAIKU,
        ),
        Ok(
            "The version is **0.32a0**.\n\nHere's a joke about it: \n\nLooks like this version is still in alpha "
            'testing... I guess you could say it\'s going through a "0.32a good time" before becoming stable! 😄\n\n'
            "(It's at version 0.32a, which means it's far from 1.0, so plenty of room to grow!)",
            [],
            (707, 89, 0, 0),
            "stop",
            "end_turn",
            model=HAIKU,
        ),
    ],
    "anthropic-stream-tool-use-split-input-json.json": [
        Ok(
            "Let me search for a tool that can provide current exchange rate information.\n\nI found the right "
            "tool! Let me fetch the current USD to EUR exchange rate for you.",
            [
                (
                    "toolu_01EFn5wTNBYA8Reni8rbmnHT",
                    "get_exchange_rate",
                    {"from_currency": "USD", "to_currency": "EUR"},
                )
            ],
            (1591, 175, 0, 0),  # message_delta's cumulative input, server tool included (message_start: 702)
            "tool_calls",
            "tool_use",
            model="claude-sonnet-4-6",
        ),
        Ok(
            "The current exchange rate is **1 USD = 0.92 EUR**. This means that for every US Dollar, you get "
            "approximately **92 Euro cents**. Keep in mind that exchange rates fluctuate constantly, so this rate "
            "may change throughout the day.",
            [],
            (1007, 59, 0, 0),
            "stop",
            "end_turn",
            model="claude-sonnet-4-6",
        ),
    ],
}

# Body fields ModelRequest models itself; every other recorded field is passed through settings.extra.
MODELLED = {"model", "messages", "system", "tools", "stream", "max_tokens", "temperature"}


# --- recorded requests as our types ---------------------------------------------------------------


def blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def result_text(content: Any) -> str:
    """A tool_result's content: a string, or text blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(b["text"] for b in content if b["type"] == "text")


def system_text(system: Any) -> str:
    return result_text(system)


def from_wire(messages: list[dict[str, Any]]) -> list[Message]:
    """A recorded request's messages as our message types (server tool blocks have no equivalent)."""
    out: list[Message] = []
    names: dict[str, str] = {}
    for message in messages:
        content = blocks(message["content"])
        if message["role"] == "assistant":
            thinking = tuple(
                Thinking(text=b["thinking"], signature=b["signature"])
                if b["type"] == "thinking"
                else Thinking(redacted=b["data"])
                for b in content
                if b["type"] in ("thinking", "redacted_thinking")
            )
            calls = tuple(
                ToolCall(id=b["id"], name=b["name"], arguments=json.dumps(b["input"]))
                for b in content
                if b["type"] == "tool_use"
            )
            names.update((c.id, c.name) for c in calls)
            text = "".join(b["text"] for b in content if b["type"] == "text")
            out.append(AssistantMessage(content=text, tool_calls=calls, thinking=thinking))
            continue
        for b in content:
            if b["type"] == "text":
                out.append(UserMessage(content=b["text"]))
            elif b["type"] == "tool_result":
                out.append(
                    ToolResultMessage(
                        tool_call_id=b["tool_use_id"],
                        name=names.get(b["tool_use_id"], ""),
                        content=result_text(b.get("content")),
                        is_error=bool(b.get("is_error")),
                    )
                )
    return out


def request_parts(body: dict[str, Any] | None) -> tuple[str, list[ToolDefinition], ModelSettings]:
    """System prompt, client tools and settings of a recorded request (server tools are left out)."""
    if body is None:
        return "", [], ModelSettings()
    tools = [
        ToolDefinition(name=t["name"], description=t.get("description", ""), parameters=t["input_schema"])
        for t in body.get("tools", ())
        if "input_schema" in t
    ]
    settings = ModelSettings(
        max_tokens=body.get("max_tokens"),
        temperature=body.get("temperature"),
        extra={k: v for k, v in body.items() if k not in MODELLED},
    )
    return system_text(body.get("system")), tools, settings


def tool_results_for(calls: tuple[ToolCall, ...], next_body: dict[str, Any]) -> list[ToolResultMessage]:
    """The recorded results answering ``calls``: the tool_result blocks after the next request's last assistant."""
    messages = next_body["messages"]
    last_assistant = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    recorded = [
        b for m in messages[last_assistant + 1 :] for b in blocks(m["content"]) if b["type"] == "tool_result"
    ]
    assert [b["tool_use_id"] for b in recorded] == [c.id for c in calls]
    return [
        ToolResultMessage(
            tool_call_id=c.id,
            name=c.name,
            content=result_text(b.get("content")),
            is_error=bool(b.get("is_error")),
        )
        for c, b in zip(calls, recorded, strict=True)
    ]


def shape(messages: list[dict[str, Any]]) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """Roles and the blocks of each turn, as far as the loop's messages model them: thinking with its
    signature, tool_use and tool_result fields, and text (adjacent pieces joined, whitespace dropped).
    Server tool blocks and their results are left out."""
    out: list[tuple[str, list[tuple[Any, ...]]]] = []
    for message in messages:
        turn: list[tuple[Any, ...]] = []
        for b in blocks(message["content"]):
            kind = b["type"]
            if kind == "text":
                squeezed = "".join(b["text"].split())
                if not squeezed:
                    continue
                if turn and turn[-1][0] == "text":
                    turn[-1] = ("text", turn[-1][1] + squeezed)
                else:
                    turn.append(("text", squeezed))
            elif kind == "thinking":
                turn.append(("thinking", b["thinking"], b["signature"]))
            elif kind == "redacted_thinking":
                turn.append(("redacted_thinking", b["data"]))
            elif kind == "tool_use":
                turn.append(("tool_use", b["id"], b["name"], b["input"]))
            elif kind == "tool_result":
                turn.append(
                    ("tool_result", b["tool_use_id"], result_text(b.get("content")), bool(b.get("is_error")))
                )
        out.append((message["role"], turn))
    return out


# --- checks --------------------------------------------------------------------------------------


def check_response(response: ModelResponse, expected: Ok) -> None:
    assert expected.text == response.content
    for fragment in expected.contains:
        assert fragment in response.content
    check_calls(response, expected.calls)
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        expected.usage
    )
    assert usage.requests == 1
    assert (response.finish_reason, response.raw_finish_reason) == (expected.finish, expected.raw_finish)
    assert len(response.thinking) == len(expected.thinking)
    for got, (text, signature, redacted) in zip(response.thinking, expected.thinking, strict=True):
        assert text == got.text
        assert signature == got.signature
        assert redacted == got.redacted
    if expected.model is not None:
        assert response.model == expected.model


def check_anthropic_error(error: ModelError, expected: Err, model: AnthropicModel) -> None:
    check_error(error, expected, "anthropic", model.model)
    assert (error.code, error.retry_after) == (expected.code, expected.retry_after)
    if isinstance(error, ProviderHTTPError):
        assert error.error_type == expected.code


def check_request(sent: dict[str, Any], recorded: dict[str, Any], streaming: bool) -> None:
    assert sent["stream"] is streaming is recorded.get("stream", streaming)
    for key in ("model", "max_tokens", "temperature"):
        assert sent.get(key) == recorded.get(key), key
    assert {k: v for k, v in sent.items() if k not in MODELLED} == {
        k: v for k, v in recorded.items() if k not in MODELLED
    }
    assert system_text(sent.get("system")) == system_text(recorded.get("system"))
    assert [t["name"] for t in sent.get("tools", ())] == [
        t["name"] for t in recorded.get("tools", ()) if "input_schema" in t
    ]
    assert shape(sent["messages"]) == shape(recorded["messages"])


def test_every_anthropic_recording_has_expectations() -> None:
    assert recording_names("anthropic-") == sorted(EXPECTED)


@pytest.mark.parametrize("name", recording_names("anthropic-"))
async def test_replay_recording(name: str, make_anthropic_model: AnthropicFactory) -> None:
    recording = load_recording(name)
    streaming = bool(recording["streaming"])
    interactions = answered_interactions(recording)
    expectations = EXPECTED[name]
    assert len(interactions) == len(expectations)
    first = request_json(interactions[0])
    system, tools, settings = request_parts(first)
    history: list[Message] = from_wire(first["messages"]) if first else [UserMessage(content="Hello")]
    checked_requests = 0

    with ReplayServer.from_recording(RECORDINGS / name) as server:
        model = make_anthropic_model(server, (first or {}).get("model", "claude-test"))
        for turn, (interaction, expected) in enumerate(zip(interactions, expectations, strict=True)):
            request = ModelRequest(system=system, messages=list(history), tools=tools, settings=settings)
            response: ModelResponse | None = None
            if isinstance(expected, Err):
                with pytest.raises(ModelError) as caught:
                    await run_turn(model, request, streaming)
                check_anthropic_error(caught.value, expected, model)
            else:
                response = await run_turn(model, request, streaming)
                check_response(response, expected)
            assert server.requests[turn].path == "/v1/messages"
            recorded = request_json(interaction)
            if recorded is not None:
                check_request(server.requests[turn].json, recorded, streaming)
                checked_requests += 1
            following = request_json(interactions[turn + 1]) if turn + 1 < len(interactions) else None
            if following is None:
                continue
            assert response is not None, "every recorded follow-up comes after a success"
            history.append(assistant_turn(response))
            if response.tool_calls:
                history.extend(tool_results_for(response.tool_calls, following))
        assert server.errors == []
    assert checked_requests == sum(1 for i in interactions if request_json(i) is not None)
