"""The JSONL store: torn lines, repairs, incremental loads, metadata."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.helpers import assert_paired, read_jsonl

from loopwright import Agent
from loopwright.errors import InputError, NotFoundError
from loopwright.messages import AssistantMessage, Thinking, ToolCall, ToolResultMessage, Usage, UserMessage
from loopwright.sessions import FileSessionStore, MemorySessionStore, SessionInfo, decode_line, encode_entry
from loopwright.sessions._codec import TranscriptRecord
from loopwright.testing import ScriptedModel, TestModel


async def _store_with(tmp_path: Path, *entries: object) -> FileSessionStore:
    store = FileSessionStore(tmp_path / "sessions")
    await store.create(SessionInfo(id="s"))
    await store.append("s", list(entries))  # type: ignore[arg-type]
    await store.close("s")
    return store


async def test_torn_last_line_is_set_aside_and_earlier_lines_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await _store_with(tmp_path, UserMessage(content="one"), AssistantMessage(content="two"))
    path = store.transcript_path("s")
    good = path.read_bytes()
    with path.open("ab") as f:
        f.write(b'{"role":"user","content":"thr')  # crash in the middle of a write
    fresh = FileSessionStore(tmp_path / "sessions")
    loaded = await fresh.load("s")
    assert [m.content for m in loaded.messages] == ["one", "two"]
    assert len(loaded.warnings) == 1 and "torn last line" in loaded.warnings[0]
    assert path.read_bytes() == good  # cut back to the last complete line, so appends stay clean
    assert (path.parent / "transcript.torn.jsonl").read_text() == '{"role":"user","content":"thr\n'
    await fresh.append("s", [UserMessage(content="four")])
    await fresh.close("s")
    assert [m.content for m in (await FileSessionStore(tmp_path / "sessions").load("s")).messages] == [
        "one",
        "two",
        "four",
    ]


async def test_invalid_middle_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    store = await _store_with(tmp_path, UserMessage(content="one"))
    path = store.transcript_path("s")
    with path.open("a") as f:
        f.write("this is not json\n")
        f.write(encode_entry(AssistantMessage(content="after")))
    loaded = await FileSessionStore(tmp_path / "sessions").load("s")
    assert [m.content for m in loaded.messages] == ["one", "after"]
    assert "invalid line" in loaded.warnings[0]
    assert "this is not json" in (path.parent / "transcript.torn.jsonl").read_text()


async def test_complete_entry_missing_its_newline_is_kept(tmp_path: Path) -> None:
    store = await _store_with(tmp_path, UserMessage(content="one"))
    path = store.transcript_path("s")
    with path.open("a") as f:
        f.write(encode_entry(AssistantMessage(content="whole")).rstrip("\n"))
    loaded = await FileSessionStore(tmp_path / "sessions").load("s")
    assert [m.content for m in loaded.messages] == ["one", "whole"]
    assert path.read_text().endswith("\n")


async def test_loads_read_only_what_was_appended_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await _store_with(tmp_path, *(UserMessage(content=str(i)) for i in range(100)))
    await store.load("s")
    other = FileSessionStore(tmp_path / "sessions")  # another process appends
    await other.append("s", [UserMessage(content="new")])
    await other.close("s")
    decoded: list[str] = []
    import loopwright.sessions.file as file_module

    real = file_module.decode_line

    def counting(line: str) -> object:
        decoded.append(line)
        return real(line)

    monkeypatch.setattr(file_module, "decode_line", counting)
    loaded = await store.load("s")
    assert len(loaded.messages) == 101 and loaded.messages[-1].content == "new"
    assert len(decoded) == 1


async def test_a_dangling_tool_call_is_answered_at_the_next_load(tmp_path: Path) -> None:
    store = await _store_with(
        tmp_path,
        UserMessage(content="go", run_id="r1"),
        AssistantMessage(
            tool_calls=(ToolCall(id="c1", name="echo"), ToolCall(id="c2", name="echo")), run_id="r1"
        ),
        ToolResultMessage(tool_call_id="c1", name="echo", content="ok", run_id="r1"),
    )
    model = ScriptedModel(["resumed"])
    agent = Agent(model, workspace=tmp_path, store=store)
    report = await agent.run("next", session_id="s")
    assert report.final_text == "resumed"
    sent = list(model.requests[0].messages)
    assert_paired(sent)
    synthetic = [m for m in sent if isinstance(m, ToolResultMessage) and m.synthetic]
    assert [(m.tool_call_id, m.run_id) for m in synthetic] == [("c2", "r1")]
    assert "not executed" in synthetic[0].content
    lines = read_jsonl(store.transcript_path("s"))
    assert lines[3]["tool_call_id"] == "c2" and lines[3]["synthetic"] is True
    assert lines[4]["role"] == "user"


async def test_unknown_session_and_bad_ids(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    with pytest.raises(NotFoundError, match="session 'nope' not found"):
        await store.load("nope")
    for bad in ("../x", "a/b", "", ".hidden", "x" * 200, "a..b"):
        with pytest.raises(InputError, match="invalid session id"):
            store.session_dir(bad)


async def test_session_list_and_metadata_round_trip(tmp_path: Path) -> None:
    agent = Agent(TestModel(), workspace=tmp_path)
    a = await agent.run("first question")
    b = await agent.run("second question")
    listed = await agent.sessions()
    assert {s.id for s in listed} == {a.session_id, b.session_id}
    info = json.loads((tmp_path / "sessions" / a.session_id / "session.json").read_text())
    assert info["title"] == "first question" and info["messageCount"] == 2 and info["runCount"] == 1


messages = st.one_of(
    st.builds(UserMessage, content=st.text(), run_id=st.none() | st.text(min_size=1)),
    st.builds(
        AssistantMessage,
        content=st.text(),
        tool_calls=st.lists(
            st.builds(ToolCall, id=st.text(min_size=1), name=st.text(min_size=1), arguments=st.text()),
            max_size=3,
        ).map(tuple),
        thinking=st.lists(st.builds(Thinking, text=st.text(), signature=st.none() | st.text(min_size=1))).map(
            tuple
        ),
        usage=st.none()
        | st.builds(Usage, input_tokens=st.integers(0, 10**9), output_tokens=st.integers(0, 10**9)),
        timestamp=st.none() | st.text(min_size=1),
    ),
    st.builds(
        ToolResultMessage,
        tool_call_id=st.text(min_size=1),
        name=st.text(),
        content=st.text(),
        is_error=st.booleans(),
        synthetic=st.booleans(),
    ),
    st.builds(
        TranscriptRecord,
        type=st.sampled_from(["compaction", "note"]),
        data=st.dictionaries(
            st.text(min_size=1).filter(lambda k: k not in ("type", "run_id", "timestamp")), st.integers()
        ),
    ),
)


@given(messages)
@settings(max_examples=300)
def test_codec_round_trips_every_entry(entry: object) -> None:
    line = encode_entry(entry)  # type: ignore[arg-type]
    assert line.endswith("\n") and "\n" not in line[:-1]
    assert decode_line(line) == entry


async def test_memory_store_implements_the_same_contract() -> None:
    store = MemorySessionStore()
    with pytest.raises(NotFoundError):
        await store.load("s")
    await store.create(SessionInfo(id="s"))
    await store.append("s", [UserMessage(content="x")])
    assert [m.content for m in (await store.load("s")).messages] == ["x"]
    agent = Agent(TestModel(text="mem"), store=store)
    assert (await agent.run("y", session_id="s")).final_text == "mem"
    assert len((await store.load("s")).entries) == 3
