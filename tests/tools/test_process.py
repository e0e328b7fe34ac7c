"""A subprocess tool is killed, children and all, when its call times out."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from loopwright import Agent, ToolCall, tool
from loopwright.testing import ScriptedModel
from loopwright.tools import run_process


async def test_output_and_exit_code() -> None:
    result = await run_process(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"]
    )
    assert (result.returncode, result.stdout, result.stderr, result.truncated) == (3, "out\n", "err\n", False)


async def test_a_timed_out_tool_kills_its_process_and_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = (
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        "time.sleep(60)\n"
    )

    @tool(timeout=1.0)
    async def slow_program() -> str:
        """Runs a program that never ends."""
        result = await run_process([sys.executable, "-c", script])
        return result.stdout

    model = ScriptedModel([[ToolCall(id="p", name="slow_program")], "gave up"])
    report = await Agent(model, tools=[slow_program]).run("go")
    assert report.steps[0].tool_calls[0].error == "tool 'slow_program' timed out after 1 s and was cancelled"
    parent, child = (int(p) for p in pids.read_text().split())
    for pid in (parent, child):
        assert not _alive(pid), f"process {pid} survived its tool"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs once a SIGKILL sent to it has had time to land (up to 10 s: on a
    loaded machine a killed grandchild can take a moment to die)."""
    deadline = time.monotonic() + 10.0
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return _running(pid)
