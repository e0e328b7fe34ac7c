"""Conformance: every recorded OpenAI Responses API exchange, replayed through OpenAIResponsesModel.

Each recording is replayed turn by turn over a real loopback server. The next turn's request is built
from our own parsed response (plus the recorded tool outputs), and what we send is checked against the
recorded request: the same input items in the same order, the same call ids, argument objects and
reasoning items (id and encrypted content) echoed back. Every stream is also re-split at random byte
offsets, and into 1-byte pieces, and must parse to the same events.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from loopwright.errors import ModelError
from loopwright.messages import Message, ToolResultMessage, UserMessage
from loopwright.models.base import ModelRequest, ModelResponse, ModelSettings, ToolDefinition
from loopwright.models.openai import ProviderHTTPError
from loopwright.models.openai_responses import OpenAIResponsesModel
from loopwright.testing import ReplayServer
from tests.models._shared import (
    RECORDINGS,
    Err,
    ResponsesFactory,
    answered_interactions,
    assistant_turn,
    check_calls,
    check_error,
    check_one_byte_pieces,
    check_random_splits,
    has_events,
    load_recording,
    recording_names,
    request_json,
    run_turn,
    streaming_recordings,
)

PREFIX = "openai-responses-"
MODELLED_KEYS = ("model", "input", "tools", "stream", "store", "instructions")
"""Request keys the model builds itself; the rest of a recorded request is passed as settings.extra."""


@dataclass(frozen=True)
class Ok:
    text: str
    calls: list[tuple[str, str, Any]]
    usage: tuple[int, int, int]
    finish: str
    raw_finish: str
    reasoning: tuple[str, ...] = ()
    """The reasoning item ids, in order (each a Thinking's signature)."""


MULTIPLY_CALL = ("call_nJmCK7SJe3ajdYYplIbH0KgL", "multiply", {"a": 1231, "b": 2331})

EXPECTED: dict[str, list[Ok | Err]] = {
    "openai-responses-error-400-invalid-parameter.json": [
        Err(
            ProviderHTTPError,
            400,
            False,
            "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got -1 instead.",
            "decimal_below_min_value",
        )
    ],
    "openai-responses-nonstream-function-call-two-turn.json": [
        Ok("", [MULTIPLY_CALL], (58, 23, 0), "tool_calls", "completed"),
        Ok("1231 * 2331 = 2,869,461", [], (94, 17, 0), "stop", "completed"),
    ],
    "openai-responses-nonstream-reasoning-parallel-calls.json": [
        Ok(
            "",
            [("call_I670mAzR6AYszdoqaI96qg0k", "db_lookup", {"key": "start"})],
            (88, 65, 0),
            "tool_calls",
            "completed",
            ("rs_0429c1fcf5cbfa350169fabfe62a9c8197914677ea9a2424a0",),
        ),
        Ok(
            "",
            [("call_Uj506iEKjBZWrHPq2C3GDtgr", "db_lookup", {"key": "7"})],
            (171, 118, 0),
            "tool_calls",
            "completed",
            ("rs_0429c1fcf5cbfa350169fabfe83488819788888aaafb2ab1fd",),
        ),
        Ok(
            "",
            [("call_Vik9mkNli8KsnSbHOShapdmG", "db_lookup", {"key": "step1"})],
            (302, 217, 0),
            "tool_calls",
            "completed",
            ("rs_0429c1fcf5cbfa350169fabfeb569481978703af8553a073b9",),
        ),
        Ok(
            "",
            [
                ("call_WbWwKw4J6EXQ7Sn93fgmuZe3", "db_lookup", {"key": "begin"}),
                ("call_et3hsNc1ipjCfuBylmAwqkEy", "db_lookup", {"key": "value"}),
                ("call_J4rpPS0QEz4CIdsVGKEKG6k3", "db_lookup", {"key": "the value 7"}),
                ("call_gd2cYY61KkICSgB6qNd7ZC66", "db_lookup", {"key": "Begin with the value 7."}),
                ("call_nInKAmdZObYpqc3OR3WC61K3", "db_lookup", {"key": "start2"}),
            ],
            (532, 119, 0),
            "tool_calls",
            "completed",
            ("rs_0429c1fcf5cbfa350169fabfeff8708197a93aabe0257d06a5",),
        ),
    ],
    "openai-responses-stream-error-insufficient-quota.json": [
        Err(
            ProviderHTTPError,
            None,
            False,
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
        )
    ],
    "openai-responses-stream-function-call-two-turn.json": [
        Ok(
            "",
            [("call_sVidsfFJ6zlzRpelrPkTPlpd", "multiply", {"a": 1231, "b": 2331})],
            (58, 23, 0),
            "tool_calls",
            "completed",
        ),
        Ok("1231 × 2331 = **2,869,461**", [], (94, 18, 0), "stop", "completed"),
    ],
    "openai-responses-stream-reasoning-function-call-usage.json": [
        Ok(
            "",
            [("call_CWXgs68YprAjp6t0371hiPOI", "final_result", {"result": 6666})],
            (53, 469, 0),
            "tool_calls",
            "completed",
            ("rs_0050471a34b36ae60068c97bac4dcc819595fd0f80d6b3c405",),
        )
    ],
}


def sse_payloads(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The data payloads of one recorded stream response."""
    if response.get("chunks_jsonl"):
        return [json.loads(line) for line in response["chunks_jsonl"]]
    return [json.loads(event.partition("data: ")[2]) for event in response.get("sse_events") or ()]


def recorded_reasoning(response: dict[str, Any]) -> dict[str, str]:
    """Reasoning item id -> the encrypted content a client must send back (from ``output_item.done``)."""
    if response.get("sse_events") or response.get("chunks_jsonl"):
        items = [p["item"] for p in sse_payloads(response) if p["type"] == "response.output_item.done"]
    else:
        items = json.loads(response["body_text"])["output"]
    return {i["id"]: i["encrypted_content"] for i in items if i["type"] == "reasoning"}


def tools_from_wire(body: dict[str, Any] | None) -> list[ToolDefinition]:
    return [
        ToolDefinition(
            name=t["name"], description=t.get("description", ""), parameters=t.get("parameters", {})
        )
        for t in (body or {}).get("tools", ())
    ]


def from_wire(body: dict[str, Any]) -> tuple[str, list[Message]]:
    """A recorded first request's instructions and user input as our messages."""
    assert all(item.get("role") == "user" for item in body["input"])
    return body.get("instructions") or "", [UserMessage(content=item["content"]) for item in body["input"]]


def item_kind(item: dict[str, Any]) -> str:
    kind = item.get("type", "message")
    return f"{kind}:{item['role']}" if kind == "message" else str(kind)


def input_shape(body: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Each input item as comparable values: kind, then call id / arguments / output / reasoning payload."""
    shape: list[tuple[Any, ...]] = []
    for item in body["input"]:
        kind = item_kind(item)
        if kind == "function_call":
            shape.append((kind, item["call_id"], item["name"], json.loads(item["arguments"])))
        elif kind == "function_call_output":
            shape.append((kind, item["call_id"], item["output"]))
        elif kind == "reasoning":
            shape.append((kind, item["id"], item.get("encrypted_content"), item["summary"]))
        else:
            shape.append((kind, item["content"]))
    return shape


def tool_results_for(response: ModelResponse, next_body: dict[str, Any]) -> list[ToolResultMessage]:
    """The recorded outputs that answer ``response``'s calls (the next request's trailing outputs)."""
    outputs = {
        i["call_id"]: i["output"] for i in next_body["input"] if i.get("type") == "function_call_output"
    }
    return [
        ToolResultMessage(tool_call_id=c.id, name=c.name, content=outputs[c.id]) for c in response.tool_calls
    ]


def check_response(response: ModelResponse, expected: Ok, recorded: dict[str, Any]) -> None:
    assert response.content == expected.text
    check_calls(response, expected.calls)
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.requests) == (
        *expected.usage,
        1,
    )
    assert (response.finish_reason, response.raw_finish_reason) == (expected.finish, expected.raw_finish)
    assert tuple(t.signature for t in response.thinking) == expected.reasoning
    encrypted = recorded_reasoning(recorded)
    assert [t.redacted for t in response.thinking] == [encrypted[i] for i in expected.reasoning]
    assert all(t.text == "" for t in response.thinking)  # these recordings carry no summaries
    assert response.model is not None and response.model.startswith("gpt-5")


def check_responses_error(error: ModelError, expected: Err, model: OpenAIResponsesModel) -> None:
    check_error(error, expected, "openai-responses", model.model)
    assert error.code == expected.code


def test_every_responses_recording_has_expectations() -> None:
    assert recording_names(PREFIX) == sorted(EXPECTED)


@pytest.mark.parametrize("name", recording_names(PREFIX))
async def test_replay_recording(name: str, make_responses_model: ResponsesFactory) -> None:
    recording = load_recording(name)
    interactions = answered_interactions(recording)
    expectations = EXPECTED[name]
    assert len(interactions) == len(expectations)
    first = request_json(interactions[0])
    history: list[Message] = [UserMessage(content="Hello")]
    system = ""
    if first:
        system, history = from_wire(first)
    tools = tools_from_wire(first)
    extra = {k: v for k, v in (first or {}).items() if k not in MODELLED_KEYS}

    with ReplayServer.from_recording(RECORDINGS / name) as server:
        model = make_responses_model(server, (first or {}).get("model", "gpt-5"))
        for turn, (interaction, expected) in enumerate(zip(interactions, expectations, strict=True)):
            recorded = request_json(interaction)
            streaming = bool(recorded["stream"] if recorded else recording["streaming"])
            request = ModelRequest(
                system=system, messages=list(history), tools=tools, settings=ModelSettings(extra=extra)
            )
            if isinstance(expected, Err):
                with pytest.raises(ModelError) as caught:
                    await run_turn(model, request, streaming)
                check_responses_error(caught.value, expected, model)
                response = None
            else:
                response = await run_turn(model, request, streaming)
                check_response(response, expected, interaction["response"])

            sent = server.requests[turn]
            assert (sent.method, sent.path) == ("POST", "/v1/responses")
            assert sent.json["stream"] is streaming and sent.json["store"] is False
            if recorded is not None:
                assert input_shape(sent.json) == input_shape(recorded)
                assert (sent.json.get("instructions") or "") == (recorded.get("instructions") or "")
                for key in ("model", *extra):
                    assert sent.json[key] == recorded[key], key
                assert [(t["name"], t["parameters"]) for t in sent.json.get("tools", ())] == [
                    (t["name"], t["parameters"]) for t in recorded.get("tools", ())
                ]
            following = request_json(interactions[turn + 1]) if turn + 1 < len(interactions) else None
            if following is None or response is None:
                continue
            history.append(assistant_turn(response))
            history.extend(tool_results_for(response, following))
        assert server.errors == []


def test_stream_reasoning_keeps_the_encrypted_content_of_output_item_done() -> None:
    """Quirk: one reasoning item streams three different encrypted_content values (added, done,
    completed); the one to send back is the ``output_item.done`` value (see check_response)."""
    recording = load_recording("openai-responses-stream-reasoning-function-call-usage.json")
    payloads = sse_payloads(recording["interactions"][0]["response"])
    values = [
        p["item"]["encrypted_content"] for p in payloads if p.get("item", {}).get("type") == "reasoning"
    ]
    completed = next(p for p in payloads if p["type"] == "response.completed")
    values.append(completed["response"]["output"][0]["encrypted_content"])
    assert len(set(values)) == 3


# --- chunk boundaries ----------------------------------------------------------------------------

STREAMS = streaming_recordings(recording_names(PREFIX))


def test_there_are_streams_to_split() -> None:
    assert len(STREAMS) == 3


@pytest.mark.parametrize("name", STREAMS)
async def test_random_splits_parse_identically(name: str, make_responses_model: ResponsesFactory) -> None:
    baseline = await check_random_splits(name, make_responses_model)
    assert all(has_events(r) for r in baseline) or "error" in name


@pytest.mark.parametrize("name", STREAMS)
async def test_one_byte_pieces_parse_identically(name: str, make_responses_model: ResponsesFactory) -> None:
    await check_one_byte_pieces(name, make_responses_model)
