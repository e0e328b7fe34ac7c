"""Record a run, replay it: the same answers, tool calls and transcript; a changed tool is caught."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent, RunReport, Tool, tool
from loopwright.messages import (
    AssistantMessage,
    Message,
    Thinking,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from loopwright.models.base import ModelEvent, ModelRequest, TextDelta
from loopwright.sessions import FileSessionStore, TranscriptRecord, entry_to_dict
from loopwright.testing import TestModel
from loopwright.testing._replay import ReplayMismatch, ReplayModel


def shop_tools(stock: int = 3) -> list[Tool]:
    @tool
    def lookup(order_id: int) -> str:
        """Look up an order."""
        return f"order {order_id}: {stock} items in stock"

    @tool
    async def weather(city: str) -> dict[str, Any]:
        """The weather in a city."""
        return {"city": city, "celsius": 21}

    return [lookup, weather]


async def run_all(agent: Agent, messages: list[str]) -> list[RunReport]:
    reports: list[RunReport] = []
    session_id: str | None = None
    for text in messages:
        report = await agent.run(text, session_id=session_id)
        session_id = report.session_id
        reports.append(report)
    return reports


async def transcript(folder: Path, session_id: str) -> list[dict[str, Any]]:
    """The session's lines, without what differs between two runs of the same thing."""
    entries = (await FileSessionStore(folder / "sessions").load(session_id)).entries
    lines = [entry_to_dict(e) for e in entries]
    for line in lines:
        line.pop("run_id", None)
        line.pop("timestamp", None)
    return lines


def calls_of(report: RunReport) -> list[tuple[str, str, str]]:
    return [(c.call_id, c.tool_name, c.arguments_json) for s in report.steps for c in s.tool_calls]


async def record(folder: Path, messages: list[str], **model: Any) -> list[RunReport]:
    return await run_all(Agent(TestModel(**model), tools=shop_tools(), workspace=folder), messages)


# --- a faithful replay ---------------------------------------------------------------------------


async def test_replay_reproduces_the_recorded_run(tmp_path: Path) -> None:
    [original] = await record(tmp_path / "rec", ["Where is order 1?"])
    path = tmp_path / "rec" / "sessions" / original.session_id / "transcript.jsonl"

    model = ReplayModel.from_transcript(path)
    assert model.name == "replay:test" and model.recorded_model == "test" and model.remaining == 3
    [replayed] = await run_all(
        Agent(model, tools=shop_tools(), workspace=tmp_path / "re"), ["Where is order 1?"]
    )

    model.assert_complete()
    assert replayed.reason == "done" and replayed.final_text == original.final_text
    assert "lookup → order 1: 3 items" in replayed.final_text
    assert calls_of(replayed) == calls_of(original) and len(calls_of(original)) == 2
    assert [s.usage for s in replayed.steps] == [s.usage for s in original.steps]
    assert await transcript(tmp_path / "re", replayed.session_id) == await transcript(
        tmp_path / "rec", original.session_id
    )
    assert len(model.requests) == 3 and [m.role for m in model.requests[-1].messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]


async def test_replay_of_a_session_of_several_runs_from_its_folder(tmp_path: Path) -> None:
    messages = ["Where is order 1?", "And the weather?"]
    originals = await record(tmp_path / "rec", messages)
    folder = tmp_path / "rec" / "sessions" / originals[0].session_id

    model = ReplayModel.from_transcript(folder)
    replays = await run_all(Agent(model, tools=shop_tools(), workspace=tmp_path / "re"), messages)

    model.assert_complete()
    assert [r.final_text for r in replays] == [r.final_text for r in originals]
    assert await transcript(tmp_path / "re", replays[0].session_id) == await transcript(
        tmp_path / "rec", originals[0].session_id
    )


async def test_replay_of_parallel_tool_calls_finishing_in_another_order(tmp_path: Path) -> None:
    def racing_tools(first: str) -> list[Tool]:
        finished = {"alpha": asyncio.Event(), "beta": asyncio.Event()}

        async def finish(name: str) -> str:
            if name != first:
                await finished[first].wait()
            finished[name].set()
            return f"{name} done"

        @tool
        async def alpha(n: int) -> str:
            """Alpha."""
            return await finish("alpha")

        @tool
        async def beta(n: int) -> str:
            """Beta."""
            return await finish("beta")

        return [alpha, beta]

    recorder = Agent(TestModel(calls_per_step=0), tools=racing_tools("alpha"), workspace=tmp_path / "rec")
    [original] = await run_all(recorder, ["go"])
    assert len(original.steps[0].tool_calls) == 2

    model = ReplayModel.from_transcript(tmp_path / "rec" / "sessions" / original.session_id)
    replayer = Agent(model, tools=racing_tools("beta"), workspace=tmp_path / "re")
    [replayed] = await run_all(replayer, ["go"])

    model.assert_complete()
    assert replayed.reason == "done" and replayed.final_text == original.final_text
    recorded = [
        line.get("name") for line in await transcript(tmp_path / "rec", original.session_id) if "role" in line
    ]
    again = [
        line.get("name") for line in await transcript(tmp_path / "re", replayed.session_id) if "role" in line
    ]
    assert recorded[2:4] == ["alpha", "beta"] and again[2:4] == ["beta", "alpha"]


async def test_from_session_works_with_any_store() -> None:
    recorder = Agent(TestModel(), tools=shop_tools())  # sessions in memory
    [original] = await run_all(recorder, ["Where is order 1?"])

    model = await ReplayModel.from_session(recorder.store, original.session_id)
    [replayed] = await run_all(Agent(model, tools=shop_tools()), ["Where is order 1?"])

    model.assert_complete()
    assert replayed.final_text == original.final_text and calls_of(replayed) == calls_of(original)


# --- divergence ----------------------------------------------------------------------------------


async def test_a_changed_tool_result_is_a_mismatch_naming_the_tool(tmp_path: Path) -> None:
    [original] = await record(tmp_path / "rec", ["Where is order 1?"])
    model = ReplayModel.from_transcript(tmp_path / "rec" / "sessions" / original.session_id)

    [replayed] = await run_all(Agent(model, tools=shop_tools(stock=4)), ["Where is order 1?"])

    assert replayed.reason == "error" and replayed.error_type == "ReplayMismatch"
    assert replayed.error is not None and "'lookup'" in replayed.error
    with pytest.raises(ReplayMismatch) as info:
        model.assert_complete()
    mismatch = info.value
    assert isinstance(mismatch, AssertionError)
    assert (mismatch.call, mismatch.index) == (2, 2)
    assert mismatch.expected == "order 1: 3 items in stock" and mismatch.got == "order 1: 4 items in stock"
    message = str(mismatch)
    assert "result of tool 'lookup', call 'call_0'" in message
    assert "content expected 'order 1: 3 items in stock', got 'order 1: 4 items in stock'" in message


async def test_strict_off_plays_the_answers_without_checking(tmp_path: Path) -> None:
    [original] = await record(tmp_path / "rec", ["Where is order 1?"])
    model = ReplayModel.from_transcript(tmp_path / "rec" / "sessions" / original.session_id, strict=False)

    [replayed] = await run_all(Agent(model, tools=shop_tools(stock=4)), ["Where is order 1?"])

    model.assert_complete()
    assert replayed.reason == "done" and replayed.final_text == original.final_text


async def test_more_model_calls_than_recorded_is_a_clear_error(tmp_path: Path) -> None:
    [original] = await record(tmp_path / "rec", ["Where is order 1?"])
    model = ReplayModel.from_transcript(tmp_path / "rec" / "sessions" / original.session_id)
    agent = Agent(model, tools=shop_tools())

    first, second = await run_all(agent, ["Where is order 1?", "Once more"])

    assert first.reason == "done" and second.reason == "error"
    assert second.error is not None
    assert "the run made model call 4, but the recording has only 3 answer(s)" in second.error
    with pytest.raises(ReplayMismatch, match="model call 4") as info:
        model.assert_complete()
    assert info.value.call == 4 and info.value.index is None


async def test_assert_complete_fails_while_answers_remain(tmp_path: Path) -> None:
    originals = await record(tmp_path / "rec", ["Where is order 1?", "And the weather?"])
    model = ReplayModel.from_transcript(tmp_path / "rec" / "sessions" / originals[0].session_id)

    await run_all(Agent(model, tools=shop_tools()), ["Where is order 1?"])

    assert model.remaining == 3 and not model.failures
    with pytest.raises(AssertionError, match="3 of 6 recorded answers were not used"):
        model.assert_complete()


# --- the model on its own ------------------------------------------------------------------------

RECORDED: list[Message | TranscriptRecord] = [
    UserMessage(content="hi", run_id="r1", timestamp="2026-01-01T00:00:00.000Z"),
    AssistantMessage(content="Let me th", model="anthropic:claude-sonnet-4-5", finish_reason="stopped"),
    UserMessage(content="Tell me a long story."),
    TranscriptRecord(type="note", data={"text": "ignored"}),
    AssistantMessage(
        content="Once upon a time, " * 20,
        thinking=(Thinking(text="A story, then.", signature="sig-1"),),
        model="anthropic:claude-sonnet-4-5",
        usage=Usage(input_tokens=30, output_tokens=90, cache_read_tokens=12, requests=1),
        finish_reason="length",
    ),
    UserMessage(content="Add 2 and 3."),
    AssistantMessage(
        tool_calls=(ToolCall(id="toolu_1", name="add", arguments='{"a": 2, "b": 3}'),),
        model="anthropic:claude-sonnet-4-5",
        finish_reason="tool_calls",
    ),
    ToolResultMessage(tool_call_id="toolu_1", name="add", content="5"),
    AssistantMessage(content="2 + 3 = 5.", model="anthropic:claude-sonnet-4-5", finish_reason="stop"),
    UserMessage(content="Thanks!"),
    AssistantMessage(content="You're", finish_reason="timeout"),
]


def request(*messages: Message) -> ModelRequest:
    return ModelRequest(system="any system prompt", messages=list(messages))


async def test_answers_come_back_whole_and_cut_short_ones_are_skipped() -> None:
    model = ReplayModel.from_transcript(RECORDED)
    assert model.name == "replay:anthropic:claude-sonnet-4-5" and model.remaining == 3
    story = RECORDED[4]
    assert isinstance(story, AssistantMessage)

    # The partial answer is not part of the conversation, whether or not the request carries it.
    events: list[ModelEvent] = [
        e
        async for e in model.stream(
            request(UserMessage(content="hi"), UserMessage(content="Tell me a long story."))
        )
    ]
    assert sum(type(e) is TextDelta for e in events) == 3
    response = await model.complete(
        request(
            UserMessage(content="hi"),
            RECORDED[1],  # type: ignore[arg-type]
            UserMessage(content="Tell me a long story."),
            story,
            UserMessage(content="Add 2 and 3."),
        )
    )
    assert response.tool_calls == (ToolCall(id="toolu_1", name="add", arguments='{"a": 2, "b": 3}'),)
    assert response.model == "anthropic:claude-sonnet-4-5" and response.finish_reason == "tool_calls"
    with pytest.raises(ReplayMismatch, match="1 of 3 recorded answers were not used"):
        model.assert_complete()


async def test_thinking_usage_and_finish_reason_are_played_back() -> None:
    model = ReplayModel(RECORDED, strict=False, name="pinned")
    response = await model.complete(request(UserMessage(content="whatever")))
    assert model.name == "pinned"
    assert response.content == "Once upon a time, " * 20
    assert response.thinking == (Thinking(text="A story, then.", signature="sig-1"),)
    assert response.usage == Usage(input_tokens=30, output_tokens=90, cache_read_tokens=12, requests=1)
    assert response.finish_reason == "length" and response.model == "anthropic:claude-sonnet-4-5"


async def test_a_different_user_text_is_quoted_and_truncated() -> None:
    model = ReplayModel.from_transcript(RECORDED)
    long = "x" * 500
    with pytest.raises(ReplayMismatch) as info:
        await model.complete(request(UserMessage(content="hi"), UserMessage(content=long)))
    message = str(info.value)
    assert "model call 1 differs from the recording at message 1 (user message)" in message
    assert "text expected 'Tell me a long story.', got 'xxxx" in message and "(500 characters)" in message
    assert info.value.got == long and len(message) < 700
    assert model.failures == [info.value] and model.remaining == 3  # a mismatch plays nothing


async def test_missing_and_extra_messages_are_named() -> None:
    model = ReplayModel.from_transcript(RECORDED)
    with pytest.raises(ReplayMismatch, match=r"lacks message 1: the recording has user message 'Tell me"):
        await model.complete(request(UserMessage(content="hi")))
    with pytest.raises(ReplayMismatch, match=r"sends message 2 \(user message\), which the recording"):
        await model.complete(
            request(
                UserMessage(content="hi"),
                UserMessage(content="Tell me a long story."),
                UserMessage(content="extra"),
            )
        )
    with pytest.raises(ReplayMismatch, match=r"message 0 \(assistant message\): role expected"):
        await model.complete(
            request(AssistantMessage(content="hi"), UserMessage(content="Tell me a long story."))
        )


async def test_a_changed_tool_call_or_error_flag_is_caught() -> None:
    model = ReplayModel.from_transcript(RECORDED, strict=True)
    conversation = [m for m in RECORDED if not isinstance(m, TranscriptRecord)]
    conversation.pop(1)  # the partial answer
    await model.complete(request(*conversation[:2]))
    await model.complete(request(*conversation[:4]))
    changed = AssistantMessage(tool_calls=(ToolCall(id="toolu_1", name="add", arguments='{"a": 2, "b": 4}'),))
    with pytest.raises(ReplayMismatch, match=r"tool calls expected 'add#toolu_1\(\{\"a\": 2, \"b\": 3\}\)'"):
        await model.complete(request(*conversation[:4], changed, conversation[5]))
    failed = ToolResultMessage(tool_call_id="toolu_1", name="add", content="5", is_error=True)
    with pytest.raises(ReplayMismatch, match="error flag expected 'False', got 'True'"):
        await model.complete(request(*conversation[:5], failed))
    with pytest.raises(ReplayMismatch, match=r"lacks the result of tool 'add', call 'toolu_1'"):
        await model.complete(
            request(*conversation[:5], ToolResultMessage(tool_call_id="x", name="add", content="5"))
        )
    response = await model.complete(request(*conversation[:6]))
    assert response.content == "2 + 3 = 5."
    assert len(model.failures) == 3 and model.remaining == 0


def test_a_transcript_line_that_is_not_an_entry_is_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "transcript.jsonl"
    path.write_text('{"role":"user","content":"hi"}\n\n{"role":"robot"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 3 is not a transcript entry: unknown role 'robot'"):
        ReplayModel.from_transcript(path)
    assert ReplayModel.from_transcript([]).name == "replay"
