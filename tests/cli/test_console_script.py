"""The real command in a subprocess: the console script, ``python -m loopwright`` and Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.helpers import SLOW_TOOL, tool_workspace
from tests.helpers import read_jsonl

_SCRIPT = Path(sys.executable).with_name("loopwright")
MODULE = [sys.executable, "-m", "loopwright"]
SCRIPT = [str(_SCRIPT)] if _SCRIPT.exists() else MODULE


def _run(command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=30, env=os.environ.copy()
    )


def test_console_script_demo() -> None:
    started = time.perf_counter()
    done = _run(SCRIPT, "demo")
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    assert " · done · 10 steps · 9 tool calls · " in done.stdout
    assert "run report" in done.stdout and done.stderr == ""
    assert elapsed < 10  # about a second on a laptop; generous for a loaded CI machine


def test_init_then_run_json(tmp_path: Path) -> None:
    folder = tmp_path / "made-by-init"
    assert _run(MODULE, "init", str(folder)).returncode == 0
    done = _run(MODULE, "run", "--json", "-w", str(folder), "What files are in this folder?")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0]["name"] == "loop:start" and events[-1]["name"] == "loop:end"
    report = events[-1]["report"]
    assert report["reason"] == "done" and report["toolCallCount"] == 9
    transcript = folder / "sessions" / report["sessionId"] / "transcript.jsonl"
    assert read_jsonl(transcript)[-1]["content"] == report["finalText"]


def test_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    done = _run(SCRIPT, "run", "-w", str(tmp_path), "hi")
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*MODULE, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )


def _read_until(process: subprocess.Popen[str], marker: str) -> str:
    assert process.stdout is not None
    seen = ""
    while marker not in seen:
        line = process.stdout.readline()
        assert line, f"process ended before printing {marker!r}: {seen!r}"
        seen += line
    return seen


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_in_chat_stops_the_run_and_keeps_the_chat(tmp_path: Path) -> None:
    ws = tool_workspace(tmp_path / "slow", "slow", SLOW_TOOL, "nap")
    chat = _start(["chat", "-w", str(ws), "-s", "chat"])
    assert chat.stdin is not None
    chat.stdin.write("take a nap\n")
    chat.stdin.flush()
    before = _read_until(chat, "→ nap {}")
    chat.send_signal(signal.SIGINT)
    out, err = chat.communicate("/exit\n", timeout=20)
    assert chat.returncode == 0, err
    assert "  ■ nap did not finish" in before + out and "stopped · " in out
    assert err == ""
    [report] = [json.loads(p.read_text()) for p in (ws / "sessions" / "chat" / "runs").glob("*.json")]
    assert report["reason"] == "stopped"
    lines = read_jsonl(ws / "sessions" / "chat" / "transcript.jsonl")
    assert [line["role"] for line in lines if "role" in line] == ["user", "assistant", "tool"]
    assert lines[-1]["synthetic"] is True


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_in_run_exits_130_with_a_stopped_report(tmp_path: Path) -> None:
    ws = tool_workspace(tmp_path / "slow", "slow", SLOW_TOOL, "nap")
    run = _start(["run", "-w", str(ws), "-s", "once", "take a nap"])
    _read_until(run, "→ nap {}")
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=20)
    assert run.returncode == 130
    assert err == "stopped; the session once keeps what was done\n"
    [report] = [json.loads(p.read_text()) for p in (ws / "sessions" / "once" / "runs").glob("*.json")]
    assert report["reason"] == "stopped"
