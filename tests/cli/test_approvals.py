"""Approvals in the terminal: chat asks inline; a run nobody can answer denies at once."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import invoke, tool_workspace
from tests.helpers import read_jsonl

TOOL = '''
from pathlib import Path
from loopwright import tool

@tool(permission="ask")
def wipe(target: str = "cache") -> str:
    """Wipe a folder."""
    (Path(__file__).parent.parent / "wiped.txt").write_text(target)
    return f"wiped {target}"
'''


def _results(ws: Path, session: str) -> list[str]:
    lines = read_jsonl(ws / "sessions" / session / "transcript.jsonl")
    return [line["content"] for line in lines if line.get("role") == "tool"]


def test_chat_prompts_inline_and_runs_the_call_once_approved(tmp_path: Path) -> None:
    ws = tool_workspace(tmp_path / "w", "wiper", TOOL, "wipe")
    result = invoke(["chat", "-w", str(ws), "-s", "s"], input="please wipe\ny\n/exit\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "? wipe" in out and "needs approval" in out and "allow it? [y]es / [n]o / [s]kip" in out
    assert "✓ approve" in out
    assert (ws / "wiped.txt").read_text() == "cache"
    assert _results(ws, "s") == ["wiped cache"]


def test_chat_denial_and_a_bad_answer_first(tmp_path: Path) -> None:
    ws = tool_workspace(tmp_path / "w", "wiper", TOOL, "wipe")
    result = invoke(["chat", "-w", str(ws), "-s", "s"], input="please wipe\nmaybe\nn\n/exit\n")
    assert result.exit_code == 0, result.output
    assert "please answer y, n or s" in result.stdout and "✗ deny" in result.stdout
    assert not (ws / "wiped.txt").exists()
    assert _results(ws, "s") == ["not executed: denied by the approver"]


def test_run_without_a_terminal_denies_and_says_how_to_allow(tmp_path: Path) -> None:
    ws = tool_workspace(tmp_path / "w", "wiper", TOOL, "wipe")
    result = invoke(["run", "please wipe", "-w", str(ws), "-s", "s"])
    assert result.exit_code == 0, result.output
    assert "standard input is not a terminal" in result.stderr and "permissions:" in result.stderr
    assert not (ws / "wiped.txt").exists()
    assert _results(ws, "s")[0].startswith("not executed: denied by the approver (nobody could approve it")
