"""SQLSessionStore: the SessionStore contract on SQLite and PostgreSQL, entries stored exactly as
the file backend writes them, and sessions moved between the two backends without loss."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from loopwright import Agent, tool
from loopwright.errors import NotFoundError
from loopwright.messages import AssistantMessage, ToolCall, ToolResultMessage, Usage, UserMessage
from loopwright.report import RunReport, StepReport
from loopwright.sessions import (
    FileSessionStore,
    SessionInfo,
    SessionStore,
    TranscriptRecord,
    entry_to_dict,
    export_session,
    import_session,
)
from loopwright.sessions.sql import SQLSessionStore
from loopwright.sql import Database
from loopwright.testing import ScriptedModel

ENTRIES = [
    UserMessage(
        content='héllo ✓ \n"quoted"', run_id="r1", timestamp="2026-11-22T10:00:00.000Z", meta={"k": [1]}
    ),
    AssistantMessage(
        content="",
        tool_calls=(ToolCall(id="c1", name="add", arguments='{"a": 1, "b": 2}'),),
        model="scripted",
        usage=Usage(input_tokens=10, output_tokens=3, requests=1),
        finish_reason="tool_calls",
        run_id="r1",
    ),
    ToolResultMessage(tool_call_id="c1", name="add", content="3", run_id="r1"),
    ToolResultMessage(
        tool_call_id="c2", name="x", content="boom", is_error=True, synthetic=True, run_id="r1"
    ),
    TranscriptRecord(type="compaction", data={"summary": "s", "firstKept": 2}, run_id="r1"),
    TranscriptRecord(type="tool_start", data={"call_id": "c9", "tool": "future"}, run_id="r1"),
    AssistantMessage(content="3", run_id="r1"),
]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_it_is_a_session_store(database: Database) -> None:
    assert isinstance(SQLSessionStore(database), SessionStore)


async def test_entries_come_back_exactly_as_written(database: Database) -> None:
    store = SQLSessionStore(database)
    await store.create(SessionInfo(id="s1"))
    await store.append("s1", ENTRIES[:3])
    await store.append("s1", ENTRIES[3:])
    await store.sync("s1")
    loaded = await store.load("s1")
    assert loaded.warnings == []
    assert [entry_to_dict(e) for e in loaded.entries] == [entry_to_dict(e) for e in ENTRIES]
    assert (await store.load("s1")).entries == loaded.entries  # stable on reload
    await store.append("s1", [UserMessage(content="later", run_id="r2")])
    assert [entry_to_dict(e) for e in await store.load_run("s1", "r1")] == [entry_to_dict(e) for e in ENTRIES]
    assert [e.content for e in await store.load_run("s1", "r2")] == ["later"]  # type: ignore[union-attr]


async def test_sessions_are_kept_apart_and_listed_newest_first(database: Database) -> None:
    store = SQLSessionStore(database)
    await store.create(SessionInfo(id="old", updated_at="2026-01-01T00:00:00.000Z", title="first"))
    await store.create(SessionInfo(id="new", updated_at="2026-06-01T00:00:00.000Z"))
    await store.append("old", [UserMessage(content="in old")])
    await store.append("new", [UserMessage(content="in new")])
    assert [i.id for i in await store.list_sessions()] == ["new", "old"]
    assert [e.content for e in (await store.load("old")).messages] == ["in old"]
    info = await store.get("old")
    assert info is not None and info.title == "first"
    info.title, info.message_count = "renamed", 7
    await store.save_info(info)
    again = await store.get("old")
    assert again is not None and (again.title, again.message_count) == ("renamed", 7)
    assert await store.get("missing") is None
    with pytest.raises(NotFoundError, match="session 'missing' not found"):
        await store.load("missing")


async def test_reports_are_saved_replaced_and_listed_oldest_first(database: Database) -> None:
    store = SQLSessionStore(database)
    await store.create(SessionInfo(id="s"))
    late = RunReport(id="r2", session_id="s", model="m", started_at=20.0, final_text="two")
    early = RunReport(id="r1", session_id="s", model="m", started_at=10.0, final_text="one")
    early.steps.append(StepReport(index=0, type="initial", usage=Usage(input_tokens=5)))
    await store.save_report("s", late)
    await store.save_report("s", early)
    late.final_text = "two, final"
    await store.save_report("s", late)
    reports = await store.list_reports("s")
    assert [(r.id, r.final_text) for r in reports] == [("r1", "one"), ("r2", "two, final")]
    assert reports[0].to_dict() == early.to_dict()


async def test_an_agent_keeps_its_conversation_in_sql(database: Database) -> None:
    model = ScriptedModel([[ScriptedModel.call("add", a=2, b=3)], "5", "still 5"])
    agent = Agent(model, tools=[add], store=SQLSessionStore(database))
    first = await agent.run("2 + 3?", session_id="chat")
    second = await agent.run("and again?", session_id="chat")
    assert (first.final_text, second.final_text) == ("5", "still 5")
    seen = [m.content for m in model.requests[-1].messages]
    assert seen[0] == "2 + 3?" and "and again?" in seen and "5" in seen
    store = SQLSessionStore(database)  # a fresh store: nothing cached
    info = await store.get("chat")
    assert info is not None and info.run_count == 2
    assert [r.final_text for r in await store.list_reports("chat")] == ["5", "still 5"]


async def test_concurrent_appends_to_different_sessions_keep_each_order(database: Database) -> None:
    store = SQLSessionStore(database)
    for sid in ("a", "b", "c"):
        await store.create(SessionInfo(id=sid))

    async def write(sid: str) -> None:
        for i in range(15):
            await store.append(sid, [UserMessage(content=f"{sid}{i}")])

    await asyncio.gather(*(write(s) for s in ("a", "b", "c")))
    for sid in ("a", "b", "c"):
        assert [e.content for e in (await store.load(sid)).messages] == [f"{sid}{i}" for i in range(15)]


async def test_sessions_move_between_file_and_sql_without_loss(database: Database, tmp_path: Path) -> None:
    files = FileSessionStore(tmp_path / "sessions")
    model = ScriptedModel([[ScriptedModel.call("add", a=1, b=1)], "2"])
    await Agent(model, tools=[add], store=files).run("1 + 1?", session_id="moved")
    await files.append("moved", [TranscriptRecord(type="tool_start", data={"call_id": "z"})])
    await files.close("moved")
    original = await export_session(files, "moved")

    sql = SQLSessionStore(database)
    await import_session(sql, original)
    from_sql = await export_session(sql, "moved")
    assert from_sql == original

    back = FileSessionStore(tmp_path / "other")
    await import_session(back, from_sql)
    assert await export_session(back, "moved") == original
    await back.close("moved")
    lines_before = (tmp_path / "sessions/moved/transcript.jsonl").read_text(encoding="utf-8").splitlines()
    lines_after = (tmp_path / "other/moved/transcript.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(x) for x in lines_after] == [json.loads(x) for x in lines_before]
