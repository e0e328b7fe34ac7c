"""Export, import and fork: sessions move between stores losslessly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopwright import Agent, InputError, NotFoundError, UserMessage, tool
from loopwright.sessions import FileSessionStore, MemorySessionStore, export_session, import_session
from loopwright.testing import ScriptedModel, TestModel


@tool
def shout(text: str) -> str:
    """Upper-case."""
    return text.upper()


async def _session(tmp_path: Path) -> Agent:
    agent = Agent(
        TestModel(), tools=[shout], workspace=tmp_path, config={"context_window": 900, "reserve_floor": 100}
    )
    for i in range(12):
        await agent.run(f"message {i}: " + "words " * 40, session_id="orig")
    return agent


async def test_export_import_export_round_trips_exactly(tmp_path: Path) -> None:
    agent = await _session(tmp_path / "a")
    snapshot = await agent.export_session("orig")
    assert any(e.get("type") == "compaction" for e in snapshot["entries"])  # records travel too
    other = MemorySessionStore()
    assert await import_session(other, json.loads(json.dumps(snapshot))) == "orig"
    assert await export_session(other, "orig") == snapshot
    files = FileSessionStore(tmp_path / "b")
    await import_session(files, snapshot)
    assert await export_session(files, "orig") == snapshot


async def test_fork_is_independent(tmp_path: Path) -> None:
    agent = await _session(tmp_path)
    fork_id = await agent.fork("orig")
    before = await agent.export_session("orig")
    await agent.run("only in the fork", session_id=fork_id)
    assert await agent.export_session("orig") == before
    forked = await agent.transcript(fork_id)
    users = [e for e in forked if isinstance(e, UserMessage)]
    assert users[-1].content == "only in the fork"
    assert forked[: len(before["entries"])] == (await agent.transcript("orig"))


async def test_import_refuses_bad_snapshots_and_overwrites(tmp_path: Path) -> None:
    agent = await _session(tmp_path)
    snapshot = await agent.export_session("orig")
    with pytest.raises(InputError, match="already exists"):
        await agent.import_session(snapshot)
    with pytest.raises(InputError, match="not a session snapshot"):
        await agent.import_session({"format": "other"})
    broken = {**snapshot, "entries": [{"role": "wizard", "content": "x"}]}
    with pytest.raises(InputError, match="entry 0: unknown role 'wizard'"):
        await agent.import_session(broken, session_id="new")
    assert await agent.store.get("new") is None  # nothing half-imported
    with pytest.raises(NotFoundError):
        await agent.export_session("missing")


async def test_forked_history_continues_the_conversation() -> None:
    model = ScriptedModel(["first", "in the fork"])
    agent = Agent(model)
    report = await agent.run("hello")
    fork_id = await agent.fork(report.session_id, new_id="branch")
    await agent.run("continue", session_id=fork_id)
    assert [m.content for m in model.requests[1].messages] == ["hello", "first", "continue"]
