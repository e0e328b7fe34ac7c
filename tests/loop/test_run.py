"""The loop end to end on the offline models: stages, results, reports, transcripts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.helpers import assert_paired, read_jsonl, record_events

from loopwright import (
    Agent,
    EmptyMessageError,
    MessageTooLargeError,
    RunEnded,
    TextChunk,
    ToolCallEnded,
    ToolContext,
    tool,
)
from loopwright.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from loopwright.sessions import FileSessionStore
from loopwright.sessions._codec import TranscriptRecord
from loopwright.testing import FunctionModel, ScriptedModel, TestModel


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


async def test_test_model_calls_each_tool_then_answers(tmp_path: Path) -> None:
    agent = Agent(TestModel(args={"add": {"a": 2, "b": 3}}), tools=[add, shout], workspace=tmp_path)
    report = await agent.run("use your tools")
    assert report.reason == "done"
    assert report.step_count == 3  # add, shout, final answer
    assert [c.tool_name for s in report.steps for c in s.tool_calls] == ["add", "shout"]
    assert "add → 5" in report.final_text and "shout → EXAMPLE" in report.final_text
    assert report.usage.input_tokens > 0 and report.usage.output_tokens > 0
    lines = read_jsonl(tmp_path / "sessions" / report.session_id / "transcript.jsonl")
    journal = [line for line in lines if line.get("type") == "tool_start"]
    assert [j["tool"] for j in journal] == ["add", "shout"]  # each call journaled before it ran
    lines = [line for line in lines if "role" in line]
    assert [line["role"] for line in lines] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert all(line["run_id"] == report.id and line["timestamp"].endswith("Z") for line in lines)
    assert lines[1]["tool_calls"][0]["name"] == "add"
    assert json.loads(lines[1]["tool_calls"][0]["arguments"]) == {"a": 2, "b": 3}
    assert lines[2] == {**lines[2], "tool_call_id": lines[1]["tool_calls"][0]["id"], "content": "5"}
    assert lines[-1]["content"] == report.final_text


async def test_run_continues_a_session_with_its_history(tmp_path: Path) -> None:
    model = ScriptedModel(["first answer", "second answer"])
    agent = Agent(model, workspace=tmp_path)
    first = await agent.run("one")
    second = await agent.run("two", session_id=first.session_id)
    assert second.session_id == first.session_id
    sent = model.requests[1].messages
    assert [(m.role, m.content) for m in sent] == [
        ("user", "one"),
        ("assistant", "first answer"),
        ("user", "two"),
    ]
    info = (await agent.sessions())[0]
    assert (info.message_count, info.run_count, info.title) == (4, 2, "one")
    assert info.usage.requests == 2
    model.assert_complete()


async def test_new_session_without_id_and_named_session(tmp_path: Path) -> None:
    agent = Agent(TestModel(), workspace=tmp_path)
    a = await agent.run("hi")
    b = await agent.run("hi")
    c = await agent.run("hi", session_id="my-session")
    assert a.session_id != b.session_id
    assert c.session_id == "my-session"
    assert (tmp_path / "sessions" / "my-session" / "transcript.jsonl").is_file()


@pytest.mark.parametrize("message", ["", "   \n\t"])
async def test_empty_message_is_refused_before_anything_is_written(tmp_path: Path, message: str) -> None:
    agent = Agent(TestModel(), workspace=tmp_path)
    events = record_events(agent)
    with pytest.raises(EmptyMessageError, match="message is empty"):
        await agent.run(message)
    assert not (tmp_path / "sessions").exists()
    assert [e.name for e in events] == ["loop:start", "loop:error", "loop:end"]


async def test_oversized_message_is_refused_with_sizes(tmp_path: Path) -> None:
    agent = Agent(TestModel(), workspace=tmp_path, config={"max_message_bytes": 100})
    with pytest.raises(MessageTooLargeError, match="message is 101 bytes, over the limit of 100 bytes"):
        await agent.run("x" * 101)
    # multi-byte characters count as bytes
    with pytest.raises(MessageTooLargeError, match="102 bytes"):
        await agent.run("é" * 51)
    assert not (tmp_path / "sessions").exists()


async def test_reports_are_saved_beside_the_transcript(tmp_path: Path) -> None:
    agent = Agent(TestModel(), tools=[add], workspace=tmp_path)
    report = await agent.run("go")
    saved = json.loads((tmp_path / "sessions" / report.session_id / "runs" / f"{report.id}.json").read_text())
    assert saved["reason"] == "done" and saved["stepCount"] == 2 and saved["toolCallCount"] == 1
    assert saved["steps"][0]["toolCalls"][0]["toolName"] == "add"
    assert saved["steps"][0]["toolCalls"][0]["latencyMs"] >= 0
    [loaded] = await agent.reports(report.session_id)
    assert loaded.to_dict() == report.to_dict()


async def test_stream_yields_typed_events_in_order(tmp_path: Path) -> None:
    agent = Agent(TestModel(text="streamed answer here"), tools=[add])
    events = [e async for e in agent.stream("go")]
    types = [e.type for e in events]
    assert types[:3] == ["run_start", "context", "execute"]
    assert types[-2:] == ["persist", "done"]
    assert types.index("tool_call_start") < types.index("tool_call_end") < types.index("text")
    text = "".join(e.text for e in events if isinstance(e, TextChunk))
    assert text == "streamed answer here"
    assert sum(isinstance(e, TextChunk) for e in events) > 1  # streamed in several pieces
    end = events[-1]
    assert isinstance(end, RunEnded) and end.report.final_text == text


async def test_streamed_and_run_give_the_same_transcript(tmp_path: Path) -> None:
    a = Agent(TestModel(), tools=[add], workspace=tmp_path / "a")
    b = Agent(TestModel(), tools=[add], workspace=tmp_path / "b")
    ra = await a.run("same", session_id="s")
    async for _ in b.stream("same", session_id="s"):
        pass
    strip = _strip_volatile
    assert strip(await a.transcript("s")) == strip(await b.transcript("s"))
    assert ra.reason == "done"


async def test_same_inputs_same_transcript_ids_and_timestamps_aside(tmp_path: Path) -> None:
    transcripts = []
    for name in ("one", "two"):
        agent = Agent(TestModel(), tools=[add, shout], workspace=tmp_path / name)
        await agent.run("hello", session_id="s")
        await agent.run("again", session_id="s")
        transcripts.append(_strip_volatile(await agent.transcript("s")))
    assert transcripts[0] == transcripts[1]
    assert len(transcripts[0]) == 16  # 12 messages and 4 journal records


def _strip_volatile(entries: list[object]) -> list[dict[str, object]]:
    from loopwright.sessions._codec import entry_to_dict

    out = []
    for e in entries:
        d = entry_to_dict(e)  # type: ignore[arg-type]
        d.pop("run_id", None)
        d.pop("timestamp", None)
        out.append(d)
    return out


async def test_tools_of_one_step_run_concurrently() -> None:
    barrier = asyncio.Barrier(2)

    @tool
    async def wait_a() -> str:
        """Waits for wait_b."""
        async with asyncio.timeout(2):
            await barrier.wait()
        return "a"

    @tool
    async def wait_b() -> str:
        """Waits for wait_a."""
        async with asyncio.timeout(2):
            await barrier.wait()
        return "b"

    agent = Agent(TestModel(calls_per_step=0), tools=[wait_a, wait_b])
    report = await agent.run("go")
    calls = report.steps[0].tool_calls
    assert [c.error for c in calls] == [None, None]  # sequential execution would time out the barrier


async def test_sequential_when_parallel_disabled() -> None:
    order: list[str] = []

    @tool
    async def first() -> str:
        """One."""
        order.append("first-start")
        await asyncio.sleep(0)
        order.append("first-end")
        return "1"

    @tool
    async def second() -> str:
        """Two."""
        order.append("second-start")
        return "2"

    agent = Agent(TestModel(calls_per_step=0), tools=[first, second], config={"parallel_tool_calls": False})
    await agent.run("go")
    assert order == ["first-start", "first-end", "second-start"]


async def test_run_sync_works_outside_an_event_loop() -> None:
    agent = Agent(TestModel(text="sync ok"))
    report = await asyncio.to_thread(agent.run_sync, "hi")
    assert report.final_text == "sync ok"


async def test_run_sync_refuses_inside_a_loop() -> None:
    with pytest.raises(RuntimeError, match="running event loop"):
        Agent(TestModel()).run_sync("hi")


async def test_thinking_is_streamed_and_kept(tmp_path: Path) -> None:
    from loopwright.models.base import StreamFinish, TextDelta, ThinkingDelta

    async def stream(messages: list[object], info: object):  # type: ignore[no-untyped-def]
        yield ThinkingDelta(text="let me think", signature="sig-1")
        yield TextDelta("answer")
        yield StreamFinish(reason="stop")

    agent = Agent(FunctionModel(stream_function=stream), workspace=tmp_path)
    events = [e async for e in agent.stream("q")]
    assert [e.text for e in events if e.type == "thinking"] == ["let me think"]
    [*_, last] = await agent.transcript(events[0].session_id)  # type: ignore[union-attr]
    assert isinstance(last, AssistantMessage)
    assert last.thinking[0].text == "let me think" and last.thinking[0].signature == "sig-1"


async def test_deps_reach_tools_through_the_context() -> None:
    @tool
    def whoami(ctx: ToolContext) -> str:
        """Says who is asking."""
        return f"{ctx.deps['user']} in {ctx.session_id} step {ctx.step}"

    agent = Agent(TestModel(), tools=[whoami])
    report = await agent.run("who?", session_id="s1", deps={"user": "ada"})
    assert "ada in s1 step 0" in report.final_text


async def test_user_message_is_on_disk_before_the_model_is_called(tmp_path: Path) -> None:
    seen: list[list[dict[str, object]]] = []

    def model(messages: list[object], info: object) -> str:
        path = tmp_path / "sessions" / "s" / "transcript.jsonl"
        seen.append(read_jsonl(path))
        return "ok"

    await Agent(FunctionModel(model), workspace=tmp_path).run("remember me", session_id="s")
    assert seen[0][-1]["role"] == "user" and seen[0][-1]["content"] == "remember me"


async def test_tool_call_events_carry_arguments_and_results() -> None:
    agent = Agent(TestModel(args={"add": {"a": 20, "b": 22}}), tools=[add])
    events = [e async for e in agent.stream("go")]
    start = next(e for e in events if e.type == "tool_call_start")
    end = next(e for e in events if isinstance(e, ToolCallEnded))
    assert start.arguments == {"a": 20, "b": 22}  # type: ignore[union-attr]
    assert end.payload() == {
        "toolName": "add",
        "toolCallId": end.call_id,
        "result": "42",
        "isError": False,
        "duration": round(end.latency_ms, 3),
    }


async def test_history_messages_are_typed(tmp_path: Path) -> None:
    agent = Agent(TestModel(), tools=[add], workspace=tmp_path)
    report = await agent.run("go")
    entries = await agent.transcript(report.session_id)
    assert [type(e) for e in entries if not isinstance(e, TranscriptRecord)] == [
        UserMessage,
        AssistantMessage,
        ToolResultMessage,
        AssistantMessage,
    ]
    assert_paired(entries)  # type: ignore[arg-type]
    store = agent.store
    assert isinstance(store, FileSessionStore)
    assert isinstance(entries[1], AssistantMessage)
    assert entries[1].tool_calls == (ToolCall(id="call_0", name="add", arguments='{"a": 1, "b": 1}'),)
