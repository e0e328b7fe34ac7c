"""Printing untrusted text safely, NO_COLOR, formatting, and the live renderer on a terminal."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from loopwright.cli import _format
from loopwright.cli._render import LiveRenderer
from loopwright.cli._term import clean, json_text
from loopwright.events import RunEvent, StepStarted, TextChunk, ThinkingChunk, ToolCallEnded, ToolCallStarted
from loopwright.messages import Usage
from tests.cli.helpers import invoke

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text", "plain text"),
        ("tab\tand\nnewline", "tab\tand\nnewline"),
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b[2J\x1b[Hcleared", "cleared"),
        ("\x1b]0;title\x07after", "after"),
        ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("\x1bPdcs\x1b\\after", "after"),
        ("\x9b31mC1", "31mC1"),
        ("bell\x07 back\x08space\rcr", "bell backspacecr"),
        ("windows\r\nline", "windows\nline"),
        ("cut \x1b[3", "cut 3"),  # an escape cut by a chunk boundary loses its ESC
        ("émoji 🎉 and [bold]markup[/bold]", "émoji 🎉 and [bold]markup[/bold]"),
    ],
)
def test_clean(raw: str, shown: str) -> None:
    assert clean(raw) == shown


@given(st.text())
def test_clean_never_leaves_a_control_character(value: str) -> None:
    assert not _CONTROL.search(clean(value))


@given(st.text())
def test_json_text_round_trips_and_escapes_controls(value: str) -> None:
    dumped = json_text({"v": value})
    assert json.loads(dumped) == {"v": value}
    assert not _CONTROL.search(dumped)


def test_format() -> None:
    assert [_format.duration(ms) for ms in (0.42, 12.4, 1250, 125_000)] == [
        "0.4 ms",
        "12 ms",
        "1.25 s",
        "2m 05s",
    ]
    assert [_format.size(n) for n in (512, 2048, 5 * 1024 * 1024)] == ["512 B", "2.0 KB", "5.0 MB"]
    assert _format.count(1, "step") == "1 step" and _format.count(1204, "token") == "1,204 tokens"
    assert _format.tokens(Usage(input_tokens=1000, output_tokens=234)) == "1,234 tokens (1,000 in, 234 out)"
    assert _format.arguments({"path": "a"}) == '{"path":"a"}'
    assert _format.arguments({"text": "x" * 500}, 20) == '{"text":"xxxxxxxxxx…'
    assert _format.arguments("{not json") == "{not json"


def _terminal(events: list[RunEvent], *, spinner: bool) -> str:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, color_system="truecolor", width=100)
    renderer = LiveRenderer(console, spinner=spinner)
    for event in events:
        renderer(event)
    renderer.close()
    return screen.getvalue()


def test_live_renderer_on_a_terminal_emits_only_its_own_styles() -> None:
    hostile = "[red]x[/red] \x1b]0;owned\x07\x1b[2J\x9b1;1H done"
    events: list[RunEvent] = [
        StepStarted(run_id="r", step=0),
        ThinkingChunk(run_id="r", text="hmm \x1b[5m"),
        TextChunk(run_id="r", text=hostile),
        ToolCallStarted(run_id="r", step=0, call_id="c1", tool_name="t\x1b[8m", arguments={"a": "\x1b[31m"}),
        ToolCallEnded(
            run_id="r", step=0, call_id="c1", tool_name="t", result="\x1b[41m", is_error=True, latency_ms=3
        ),
    ]
    out = _terminal(events, spinner=False)
    sequences = re.findall(r"\x1b\[[0-9;?]*[A-Za-z]", out)
    assert sequences and all(re.fullmatch(r"\x1b\[[0-9;]*m", seq) for seq in sequences)  # styles only
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "\x1b" not in plain and "\x07" not in plain and "\x9b" not in plain
    assert "[red]x[/red] 1;1H done" in plain
    assert '→ t {"a":"\\u001b[31m"}' in plain  # JSON escapes the argument's ESC
    assert "[5m" not in plain and "[41m" not in plain


def test_live_renderer_blocks_and_parallel_calls() -> None:
    events: list[RunEvent] = [
        TextChunk(run_id="r", text="Let me look."),
        ToolCallStarted(run_id="r", step=0, call_id="a", tool_name="one", arguments={}),
        ToolCallStarted(run_id="r", step=0, call_id="b", tool_name="two", arguments={"x": 1}),
        ToolCallEnded(
            run_id="r", step=0, call_id="b", tool_name="two", result="ok", is_error=False, latency_ms=2
        ),
        ToolCallEnded(
            run_id="r", step=0, call_id="a", tool_name="one", result="", is_error=False, latency_ms=5
        ),
        TextChunk(run_id="r", text="Done."),
    ]
    plain = re.sub(r"\x1b\[[0-9;]*m", "", _terminal(events, spinner=False))
    # Results that do not follow their own start line name their tool again.
    assert 'Let me look.\n\n→ one {}\n→ two {"x":1}\n' in plain
    assert "  ✓ two 2.0 ms · 2 B\n" in plain and "  ✓ one 5.0 ms · 0 B\n" in plain
    assert plain.endswith("\n\nDone.\n")
    with_spinner = _terminal(events, spinner=True)
    assert "running one, two" in with_spinner and "✓ one" in with_spinner


def test_no_color_is_honoured(workspace: Path) -> None:
    colored = invoke(["run", "-w", str(workspace), "hi"], env={"FORCE_COLOR": "1", "NO_COLOR": None})
    assert re.search(r"\x1b\[[0-9;]*3[0-7]m|\x1b\[[0-9;]*;3[0-7]m", colored.stdout)
    plain = invoke(["run", "-w", str(workspace), "hi"], env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert plain.exit_code == 0
    assert not re.search(r"\x1b\[(?:[0-9]+;)*3[0-7](?:;[0-9]+)*m", plain.stdout)  # no foreground colours


def test_verbose_shows_library_logs(workspace: Path) -> None:
    env = {"LOOPWRIGHT_MAX_RETRIES": "0"}
    quiet = invoke(["run", "-w", str(workspace), "-m", "openai:gpt-4o-mini", "hi"], env=env)
    loud = invoke(["-v", "run", "-w", str(workspace), "-m", "openai:gpt-4o-mini", "hi"], env=env)
    assert quiet.exit_code == loud.exit_code == 1
    assert len(quiet.stderr.splitlines()) == 1
    assert "WARNING loopwright" in loud.stderr
