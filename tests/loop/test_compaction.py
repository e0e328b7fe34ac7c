"""Compaction: long sessions keep working within the window, forget nothing that matters, and can
be undone; the memory flush runs silently before compaction."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from tests.helpers import assert_paired, record_events

from loopwright import Agent, ToolCall, tool
from loopwright.context.compaction import COMPACTION_SYSTEM
from loopwright.context.tokens import estimate_tokens
from loopwright.errors import ContextLengthExceededError
from loopwright.events import CompactionEnded
from loopwright.messages import ToolResultMessage, UserMessage
from loopwright.models.base import ModelEvent, ModelRequest, ModelResponse
from loopwright.sessions import MemorySessionStore, TranscriptRecord
from loopwright.testing import AgentInfo, FunctionModel, TestModel

SMALL = {"context_window": 1200, "reserve_floor": 200, "flush_threshold": 300}


class Measured:
    """Wraps a model; records the size of every request (as the loop estimates it)."""

    def __init__(self, inner: TestModel) -> None:
        self.inner = inner
        self.sizes: list[int] = []
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return "test"

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.sizes.append(estimate_tokens(request.system, request.messages))
        self.requests.append(request)
        return self.inner.stream(request)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(request)


def _filler(i: int) -> str:
    return f"Turn {i}: here is some ordinary chatter about the weather and the garden, nothing to keep. " * 2


async def test_a_long_session_compacts_and_keeps_what_matters() -> None:
    model = Measured(TestModel(call_tools=False))
    store = MemorySessionStore()
    agent = Agent(model, store=store, config=SMALL)
    events = record_events(agent)
    await agent.run("My locker code is 90417 and the plan is in notes/plan-7.md.", session_id="s")
    for i in range(60):
        await agent.run(_filler(i), session_id="s")
    compactions = [e for e in events if isinstance(e, CompactionEnded)]
    assert len(compactions) >= 3
    assert max(model.sizes) <= 1000  # never a request over context_window - reserve_floor
    last = model.requests[-1]
    assert "90417" in last.system and "notes/plan-7.md" in last.system  # through the summaries
    entries = await agent.transcript("s")
    users = [e for e in entries if isinstance(e, UserMessage)]
    assert len(users) == 61 and users[0].content.startswith("My locker code")  # originals all kept
    records = [e for e in entries if isinstance(e, TranscriptRecord) and e.type == "compaction"]
    assert len(records) == len(compactions)
    first = records[0].data
    assert first["tokens_before"] > first["tokens_after"] and first["covered"] > 0
    assert set(first) >= {"id", "keep_from", "summary", "usage", "model"}


async def test_the_cut_never_separates_a_call_from_its_result() -> None:
    @tool
    def fetch(n: int) -> str:
        """Fetch a page of text."""
        return f"page {n}: " + "lorem ipsum " * 30

    model = Measured(TestModel(calls_per_step=1))
    agent = Agent(model, tools=[fetch], store=MemorySessionStore(), config=SMALL)
    for i in range(25):
        await agent.run(f"fetch page {i}", session_id="s")
    for request in model.requests:
        if request.system != COMPACTION_SYSTEM:
            assert_paired(list(request.messages))
            assert not isinstance(request.messages[0], ToolResultMessage)
    assert max(model.sizes) <= 1000


async def test_uncompact_brings_the_originals_back() -> None:
    model = Measured(TestModel(call_tools=False))
    agent = Agent(model, store=MemorySessionStore(), config=SMALL)
    await agent.run("Remember: the first message.", session_id="s")
    for i in range(12):
        await agent.run(_filler(i), session_id="s")
    assert "Remember: the first message." not in [m.content for m in model.requests[-1].messages]
    undone = await agent.uncompact("s")
    assert undone is not None
    big = Agent(model, store=agent.store, config={"context_window": 100_000})
    await big.run("and now?", session_id="s")
    assert model.requests[-1].messages[0].content == "Remember: the first message."
    assert await big.uncompact("s") != undone  # the previous compaction is the active one now


async def test_manual_compaction() -> None:
    model = Measured(TestModel(call_tools=False))
    agent = Agent(model, store=MemorySessionStore())
    for i in range(6):
        await agent.run(_filler(i) + f" Order 55{i}12.", session_id="s")
    result = await agent.compact("s")
    assert result.compacted and result.tokens_after < result.tokens_before
    assert "55012" in result.summary  # the oldest turns were summarised; the latest are kept verbatim
    await agent.run("next", session_id="s")
    assert "## Summary of the earlier conversation" in model.requests[-1].system


async def test_context_that_cannot_fit_stops_the_run_and_writes_nothing() -> None:
    agent = Agent(TestModel(call_tools=False), store=MemorySessionStore(), config=SMALL)
    report = await agent.run("x " * 3000, session_id="s")
    assert report.reason == "error" and report.error_type == "ContextOverflowError"
    assert "over the 1000 available" in (report.error or "")
    entries = await agent.transcript("s")
    assert not any(isinstance(e, TranscriptRecord) for e in entries)


async def test_context_too_long_from_the_provider_compacts_and_retries_once() -> None:
    attempts: list[int] = []

    def model(messages: list[object], info: AgentInfo) -> str:
        if info.system == COMPACTION_SYSTEM:
            return "## Goal\nchat\n## Identifiers\n- 4711"
        attempts.append(len(messages))
        if len(attempts) == 3:  # the third turn is "too long" for the provider
            raise ContextLengthExceededError("prompt is too long", provider="p", model="m", status=400)
        return "ok"

    agent = Agent(FunctionModel(model), store=MemorySessionStore())
    await agent.run("code 4711", session_id="s")
    await agent.run("more", session_id="s")
    report = await agent.run("even more", session_id="s")
    assert report.reason == "done" and report.final_text == "ok"
    assert attempts[3] < attempts[2]  # the retry sent the compacted, shorter context
    assert [s.type for s in report.steps] == ["compaction", "initial"]


async def test_a_summary_that_drops_identifiers_is_retried_then_repaired() -> None:
    asked: list[str] = []

    def model(messages: list[object], info: AgentInfo) -> str:
        if info.system == COMPACTION_SYSTEM:
            asked.append(messages[-1].content)  # type: ignore[attr-defined]
            return "## Goal\nsomething vague"
        return "fine"

    agent = Agent(FunctionModel(model), store=MemorySessionStore())
    await agent.run("deploy build 88231 from https://ci.example.com/job/9. " + _filler(0), session_id="s")
    for i in range(1, 5):
        await agent.run(_filler(i), session_id="s")
    result = await agent.compact("s")
    assert len(asked) == 2 and "MUST contain" in asked[1] and "88231" in asked[1]
    assert "## Identifiers" in result.summary
    assert "88231" in result.summary and "https://ci.example.com/job/9" in result.summary


async def test_memory_flush_runs_silently_before_compaction() -> None:
    notes: list[str] = []

    @tool
    def memory_write(text: str) -> str:
        """Store a durable note."""
        notes.append(text)
        return "stored"

    def model(messages: list[object], info: AgentInfo) -> str | list[ToolCall]:
        last = messages[-1]
        if isinstance(last, UserMessage) and (last.meta or {}).get("flush"):
            return [
                ToolCall(id=f"m{len(messages)}", name="memory_write", arguments='{"text": "user likes tea"}')
            ]
        if isinstance(last, ToolResultMessage) and last.name == "memory_write":
            return "NO_REPLY"
        if info.system == COMPACTION_SYSTEM:
            return "## Goal\nchat"
        return "answer"

    agent = Agent(FunctionModel(model), tools=[memory_write], store=MemorySessionStore(), config=SMALL)
    texts = []
    for i in range(40):
        texts.append((await agent.run(_filler(i), session_id="s")).final_text)
    assert set(texts) == {"answer"}  # NO_REPLY never reaches the user
    entries = await agent.transcript("s")
    kinds = [e.type for e in entries if isinstance(e, TranscriptRecord) and e.type != "tool_start"]
    assert kinds.count("memory_flush") >= 2 and notes == ["user likes tea"] * kinds.count("memory_flush")
    # at most one flush per compaction cycle, and each one before the compaction that ends its cycle
    cycles = "".join("F" if k == "memory_flush" else "C" for k in kinds)
    assert "FF" not in cycles and cycles.index("F") < cycles.index("C")
    flushes = [e for e in entries if isinstance(e, UserMessage) and (e.meta or {}).get("flush")]
    assert len(flushes) == kinds.count("memory_flush")


@pytest.mark.timeout(120)
async def test_two_thousand_turns_with_a_small_window() -> None:
    model = Measured(TestModel(call_tools=False))
    store = MemorySessionStore()
    agent = Agent(model, store=store, config={"context_window": 2000, "reserve_floor": 300})
    events = record_events(agent)
    await agent.run("Plant: the vault number is 31337 and the key is at /srv/keys/vault.pem", session_id="s")
    for i in range(1999):
        await agent.run("another turn: " + "chatter " * (5 + i % 20), session_id="s")
    assert sum(isinstance(e, CompactionEnded) for e in events) >= 20
    assert max(model.sizes) <= 1700
    entries = await agent.transcript("s")
    assert sum(isinstance(e, UserMessage) for e in entries) == 2000
    final_system = model.requests[-1].system
    assert "31337" in final_system and "/srv/keys/vault.pem" in final_system
