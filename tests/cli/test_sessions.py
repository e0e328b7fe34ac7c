"""``loopwright sessions list`` and ``loopwright sessions show``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import invoke, session_ids


@pytest.fixture
def two_sessions(workspace: Path) -> list[str]:
    """Session ``s1`` (its read_file finds no file: an error result), then ``s2``."""
    for session, message in (("s1", "first [bold]question[/bold]"), ("s2", "second question")):
        assert invoke(["run", "-w", str(workspace), "-s", session, message]).exit_code == 0
    assert session_ids(workspace) == ["s1", "s2"]
    return ["s1", "s2"]


def test_list_shows_a_table(workspace: Path, two_sessions: list[str]) -> None:
    result = invoke(["sessions", "list", "-w", str(workspace)])
    assert result.exit_code == 0, result.output
    for session in two_sessions:
        assert session in result.stdout  # ids are never cut
    assert "first [bold]question[/bold]" in result.stdout
    assert "second question" in result.stdout
    header = result.stdout.splitlines()[0].split()
    assert header[:3] == ["id", "/", "title"] and header[-3:] == ["msgs", "runs", "tokens"]


def test_list_on_a_wide_terminal_has_a_title_column(workspace: Path, two_sessions: list[str]) -> None:
    result = invoke(["sessions", "list", "-w", str(workspace)], env={"COLUMNS": "160"})
    header = result.stdout.splitlines()[0].split()
    assert header == ["id", "title", "updated", "messages", "runs", "tokens"]
    row = next(line for line in result.stdout.splitlines() if "second question" in line)
    assert row.split()[-3:][0] == "20" and row.split()[-2] == "1"  # 20 messages, 1 run


def test_list_json(workspace: Path, two_sessions: list[str]) -> None:
    result = invoke(["sessions", "list", "-w", str(workspace), "--json"])
    sessions = json.loads(result.stdout)
    assert sorted(s["id"] for s in sessions) == two_sessions
    assert {s["title"] for s in sessions} == {"first [bold]question[/bold]", "second question"}
    assert all(s["runCount"] == 1 and s["usage"]["totalTokens"] > 0 for s in sessions)


def test_list_empty_and_not_a_workspace(workspace: Path, tmp_path: Path) -> None:
    empty = invoke(["sessions", "list", "-w", str(workspace)])
    assert empty.exit_code == 0 and empty.stdout.startswith("No sessions yet.")
    missing = invoke(["sessions", "list", "-w", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "does not exist" in missing.stderr
    (tmp_path / "plain").mkdir()
    plain = invoke(["sessions", "list", "-w", str(tmp_path / "plain")])
    assert plain.exit_code == 2 and "is not a loopwright workspace" in plain.stderr


def test_show_renders_the_transcript(workspace: Path, two_sessions: list[str]) -> None:
    session = two_sessions[0]
    result = invoke(["sessions", "show", session, "-w", str(workspace)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith(f"session {session}\n  first [bold]question[/bold]\n")
    assert "20 messages · 1 run" in out
    assert "\nuser · " in out and "\n  first [bold]question[/bold]\n" in out
    assert "\nassistant · test · " in out
    assert '  → read_file {"path":"example"}  call_0' in out
    assert "tool read_file · call_0 ✗ error" in out  # an error result is marked
    assert "tool list_files · call_1 ✓" in out
    assert "I used 9 tool(s)." in out


def test_show_runs(workspace: Path, two_sessions: list[str]) -> None:
    result = invoke(["sessions", "show", two_sessions[0], "-w", str(workspace), "--runs"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Runs (1)" in out
    assert "  10 steps · 9 tool calls · " in out
    assert "  step 0 initial · model " in out and " in / " in out
    assert "  step 9 tool followup · " in out
    assert "    ✗ read_file " in out and "    ✓ word_count " in out


def test_show_json(workspace: Path, two_sessions: list[str]) -> None:
    result = invoke(["sessions", "show", two_sessions[0], "-w", str(workspace), "--json", "--runs"])
    document = json.loads(result.stdout)
    assert document["session"]["id"] == two_sessions[0]
    roles = [entry["role"] for entry in document["transcript"] if "role" in entry]
    assert roles[0] == "user" and roles[-1] == "assistant" and roles.count("tool") == 9
    [run] = document["runs"]
    assert run["stepCount"] == 10
    without_runs = json.loads(
        invoke(["sessions", "show", two_sessions[0], "-w", str(workspace), "--json"]).stdout
    )
    assert "runs" not in without_runs


def test_show_unknown_session_exits_2(workspace: Path) -> None:
    result = invoke(["sessions", "show", "no-such-session", "-w", str(workspace)])
    assert result.exit_code == 2
    assert result.stderr == "error: session 'no-such-session' not found\n"


def test_compact_and_uncompact_commands(tmp_path: Path) -> None:
    from loopwright.cli import app  # noqa: F401  (the commands are registered on the app)

    ws = tmp_path / "agent"
    assert invoke(["init", str(ws)]).exit_code == 0
    for i in range(5):
        message = f"message {i}: " + "some words about the project and its plans " * 8
        assert invoke(["run", "-w", str(ws), "-s", "long", message]).exit_code == 0
    done = invoke(["sessions", "compact", "long", "-w", str(ws)])
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("compacted long: about ")
    records = [
        line
        for line in (ws / "sessions/long/transcript.jsonl").read_text().splitlines()
        if '"type":"compaction"' in line
    ]
    assert len(records) == 1
    undone = invoke(["sessions", "uncompact", "long", "-w", str(ws)])
    assert undone.exit_code == 0 and undone.stdout.startswith("undid compaction ")
    again = invoke(["sessions", "uncompact", "long", "-w", str(ws)])
    assert again.stdout.strip() == "long has no compaction to undo"
    missing = invoke(["sessions", "compact", "nope", "-w", str(ws)])
    assert missing.exit_code == 2 and "session 'nope' not found" in missing.stderr


def test_chat_compact_command(tmp_path: Path) -> None:
    ws = tmp_path / "agent"
    assert invoke(["init", str(ws)]).exit_code == 0
    lines = "".join(f"note {i}: " + "details of the plan " * 10 + "\n" for i in range(4))
    result = invoke(["chat", "-w", str(ws), "-s", "c"], input=lines + "/compact\n/exit\n")
    assert result.exit_code == 0, result.output
    assert "compacted: about " in result.stdout


def test_export_then_import_into_another_workspace(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for ws in (a, b):
        assert invoke(["init", str(ws)]).exit_code == 0
    assert invoke(["run", "-w", str(a), "-s", "moving", "pack the boxes"]).exit_code == 0
    snapshot = tmp_path / "moving.json"
    out = invoke(["sessions", "export", "moving", "-w", str(a), "-o", str(snapshot)])
    assert out.exit_code == 0 and json.loads(snapshot.read_text())["format"] == "loopwright-session/v1"
    done = invoke(["sessions", "import", str(snapshot), "-w", str(b)])
    assert done.exit_code == 0 and done.stdout.strip() == "imported moving"
    assert (b / "sessions/moving/transcript.jsonl").read_text() == (
        a / "sessions/moving/transcript.jsonl"
    ).read_text()
    again = invoke(["sessions", "import", str(snapshot), "-w", str(b)])
    assert again.exit_code == 2 and "already exists" in again.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert "cannot read snapshot" in invoke(["sessions", "import", str(bad), "-w", str(b)]).stderr
