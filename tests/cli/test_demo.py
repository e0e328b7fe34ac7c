"""``loopwright demo``: the offline showcase behind ``make demo``."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.cli.helpers import invoke


def _workspace_in(output: str) -> Path:
    match = re.search(r"^workspace (\S+)$", output, re.MULTILINE)
    assert match, output
    return Path(match.group(1))


def test_demo_runs_offline_and_cleans_up() -> None:
    result = invoke(["demo"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    for card in (
        '→ read_file {"path":"README.md"}',
        '→ list_files {"path":"."}',
        '→ edit_file {"path":"todo.md","old_text":"- [ ] try loopwright","new_text":"- [x] try loopwright"}',
        '→ write_file {"path":"notes/demo.md"',
        "→ current_time {}",
        '→ word_count {"text":"# Garden planner',
    ):
        assert card in out
    assert "✗" not in out  # every tool got arguments that work
    assert "I used 9 tool(s)." in out
    assert " · done · 10 steps · 9 tool calls · " in out
    assert re.search(r"^transcript +\S+/sessions/[\w-]+/transcript\.jsonl$", out, re.MULTILINE)
    assert "run report\n  10 steps · 9 tool calls · " in out
    assert "    ✓ edit_file " in out
    assert "loopwright init my-agent" in out
    assert not _workspace_in(out).exists()
    assert result.stderr == ""


def test_demo_keep_leaves_a_working_workspace() -> None:
    result = invoke(["demo", "--keep"])
    root = _workspace_in(result.stdout)
    try:
        assert result.exit_code == 0, result.output
        assert f"Workspace kept at {root}" in result.stdout
        assert "- [x] try loopwright" in (root / "todo.md").read_text()
        assert (root / "notes" / "demo.md").read_text().startswith("# Notes from the demo agent")
        [session] = [p.name for p in (root / "sessions").iterdir()]
        assert f"loopwright sessions show {session} -w {root} --runs" in result.stdout
        shown = invoke(["sessions", "show", session, "-w", str(root)])
        assert shown.exit_code == 0 and "tool edit_file · call_3 ✓" in shown.stdout
    finally:
        shutil.rmtree(root, ignore_errors=True)
