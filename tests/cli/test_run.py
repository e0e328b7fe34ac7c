"""``loopwright run``: streaming, tool cards, footer, --json, errors and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.helpers import invoke, session_ids, tool_workspace
from tests.helpers import read_jsonl

_HOSTILE_TOOL = '''
from loopwright import tool

@tool
def hostile() -> str:
    """Return text full of markup and terminal escapes."""
    return "[bold]boom[/bold] \\x1b[31mred\\x1b[0m \\x1b]0;pwned\\x07 \\x9b2J :smile:"
'''


def test_streams_text_tool_cards_and_footer(workspace: Path) -> None:
    result = invoke(["run", "-w", str(workspace), "Describe this folder"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    # One card per tool: name and compact JSON arguments, then the outcome with its duration.
    assert "→ list_files {}" in out
    assert '→ word_count {"text":"example"}' in out
    assert "✓ " in out and " ms · " in out
    assert "✗ " in out and "FileNotFoundError" in out  # read_file of a missing file: an error result
    # The final answer (TestModel's) is streamed.
    assert "I used 9 tool(s)." in out
    [session] = session_ids(workspace)
    footer = out.rstrip("\n").splitlines()[-1]
    assert footer.startswith(f"session {session} · done · 10 steps · 9 tool calls · ")
    assert " tokens (" in footer and footer.endswith(" ms")
    assert result.stderr == ""


def test_continues_a_session(workspace: Path) -> None:
    first = invoke(["run", "-w", str(workspace), "one"])
    [session] = session_ids(workspace)
    second = invoke(["run", "-w", str(workspace), "--session", session, "two"])
    assert first.exit_code == second.exit_code == 0
    assert session_ids(workspace) == [session]
    info = json.loads((workspace / "sessions" / session / "session.json").read_text())
    assert info["runCount"] == 2


def test_named_session_and_message_from_stdin(workspace: Path) -> None:
    result = invoke(["run", "-w", str(workspace), "-s", "from-stdin", "-"], input="hello from a pipe\n")
    assert result.exit_code == 0, result.output
    lines = read_jsonl(workspace / "sessions" / "from-stdin" / "transcript.jsonl")
    assert lines[0]["role"] == "user" and lines[0]["content"] == "hello from a pipe"


def test_json_prints_one_event_per_line_and_nothing_else(workspace: Path) -> None:
    result = invoke(["run", "-w", str(workspace), "--json", "hi"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    names = [e["name"] for e in events]
    assert names[0] == "loop:start" and names[-1] == "loop:end"
    assert names[1:3] == ["loop:context", "loop:execute"]
    assert names.count("tool:start") == names.count("tool:end") == 9
    assert "stream:delta" in names and "loop:persist" in names
    run_ids = {e["runId"] for e in events}
    assert len(run_ids) == 1
    start = events[0]
    assert start["type"] == "run_start" and start["sessionId"]
    tool_start = next(e for e in events if e["name"] == "tool:start")
    assert tool_start["toolName"] == "read_file" and tool_start["arguments"] == {"path": "example"}
    tool_end = next(e for e in events if e["name"] == "tool:end")
    assert tool_end["isError"] is True and tool_end["duration"] >= 0
    end = events[-1]
    assert end["success"] is True and end["reason"] == "done"
    report = end["report"]
    assert report["id"] == start["runId"] and report["sessionId"] == start["sessionId"]
    assert report["stepCount"] == 10 and report["toolCallCount"] == 9
    text = "".join(e["content"] for e in events if e["name"] == "stream:delta")
    assert text == report["finalText"]


def test_model_and_tool_text_is_printed_literally(tmp_path: Path) -> None:
    ws = tool_workspace(tmp_path / "hostile", "hostile", _HOSTILE_TOOL, "hostile")
    result = invoke(["run", "-w", str(ws), "go"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "[bold]boom[/bold]" in out  # markup is not interpreted
    assert ":smile:" in out  # nor emoji codes
    assert "red" in out and "pwned" in out
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out


def test_json_keeps_text_intact_but_escaped(tmp_path: Path) -> None:
    ws = tool_workspace(tmp_path / "hostile", "hostile", _HOSTILE_TOOL, "hostile")
    result = invoke(["run", "-w", str(ws), "--json", "go"])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x9b" not in result.stdout
    end = json.loads(result.stdout.splitlines()[-1])
    tool_end = next(json.loads(line) for line in result.stdout.splitlines() if '"tool:end"' in line)
    assert tool_end["result"].startswith("[bold]boom[/bold] \x1b[31mred")
    assert "\x9b2J" in tool_end["result"]
    assert end["name"] == "loop:end"


def test_max_tool_iterations_flag_wins(workspace: Path) -> None:
    result = invoke(["run", "-w", str(workspace), "--max-tool-iterations", "2", "hi"])
    assert result.exit_code == 0, result.output
    assert " · max_steps · 3 steps · 2 tool calls · " in result.stdout  # 2 tool steps, then a final answer


def test_timeout_is_a_failed_run(workspace: Path) -> None:
    result = invoke(["run", "-w", str(workspace), "--timeout", "0.000001", "hi"])
    assert result.exit_code == 1
    assert " · timeout · " in result.stdout
    assert result.stderr.splitlines() == ["error: run failed: run exceeded its execution timeout of 1e-06 s"]


def test_model_failure_exits_1_with_one_line(workspace: Path) -> None:
    env = {"LOOPWRIGHT_MAX_RETRIES": "0"}  # the provider's port is closed in tests: fail fast
    result = invoke(["run", "-w", str(workspace), "-m", "openai:gpt-4o-mini", "hi"], env=env)
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("error: run failed: openai model 'gpt-4o-mini' failed")
    assert "Traceback" not in result.output
    assert " · error · " in result.stdout


def test_missing_workspace_suggests_init(tmp_path: Path) -> None:
    result = invoke(["run", "-w", str(tmp_path), "hi"])
    assert result.exit_code == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: no AGENT.md in ") and "loopwright init" in line


def test_invalid_agent_md_lists_each_problem_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "AGENT.md").write_text(
        "---\nname: x\nmodle: test\nmax_tool_iterations: 0\n---\nhi\n", encoding="utf-8"
    )
    result = invoke(["run", "-w", str(tmp_path), "hi"])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0] == f"error: invalid agent definition {tmp_path / 'AGENT.md'}"
    assert lines[1].startswith("  line 3: modle: unknown key; did you mean 'model'?")
    assert lines[2].startswith("  line 4: max_tool_iterations: ")
    assert len(lines) == 3 and "Traceback" not in result.output


def test_usage_errors_exit_2(workspace: Path) -> None:
    cases = [
        (["-m", "nope"], "error: unknown model 'nope'"),
        (["--max-tool-iterations", "0"], "error: invalid loop configuration: max_tool_iterations"),
        (["-s", "../escape"], "error: invalid session id '../escape'"),
    ]
    for args, message in cases:
        result = invoke(["run", "-w", str(workspace), *args, "hi"])
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.startswith(message), (args, result.stderr)
    empty = invoke(["run", "-w", str(workspace), "   "])
    assert empty.exit_code == 2
    assert empty.stderr == "error: message is empty: send some text\n"
