"""The restart test: a run waits for an approval, its process is killed, a new process restores the
checkpoint, approves, and the run completes with exactly one execution of the approved tool."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import read_jsonl

TOOLS = '''
from pathlib import Path
from loopwright import tool

LOG = Path(__file__).resolve().parent.parent / "executions.log"


@tool
def lookup(name: str) -> str:
    """Look up an address."""
    with LOG.open("a") as f:
        f.write(f"lookup {name}\\n")
    return f"{name}@example.com"


@tool(permission="ask")
def send_email(to: str) -> str:
    """Send an email."""
    with LOG.open("a") as f:
        f.write(f"send_email {to}\\n")
    return f"sent to {to}"
'''

FIRST = """
import asyncio, json, sys, time
from pathlib import Path
from loopwright import Agent
from loopwright.messages import ToolCall
from loopwright.testing import ScriptedModel

ws = Path(sys.argv[1])
model = ScriptedModel([
    [ToolCall(id="c1", name="lookup", arguments='{"name": "ann"}')],
    [ToolCall(id="c2", name="send_email", arguments='{"to": "ann@example.com"}')],
    "never reached",
])
agent = Agent(model, workspace=ws)

def on_request(event):
    (ws / "snapshot.json").write_text(json.dumps(agent.dump()))
    print("PENDING", flush=True)

agent.on("approval_requested", on_request)
asyncio.run(agent.run("mail ann", session_id="s"))
print("FINISHED (should have been killed)", flush=True)
"""

SECOND = """
import asyncio, json, sys
from pathlib import Path
from loopwright import Agent
from loopwright.testing import ScriptedModel

ws = Path(sys.argv[1])
source = sys.argv[2]

async def main():
    if source == "dump":
        snapshot = json.loads((ws / "snapshot.json").read_text())
    else:  # what the dead process left in the session store
        snapshot = await Agent(workspace=ws).checkpoints()
    agent = Agent.restore(snapshot, model=ScriptedModel(["Sent it to ann."]), workspace=ws)
    pending = [r.call_id for r in agent.pending_approvals()]
    report = await agent.resume_with_approval("c2", "approve")
    print(json.dumps({"pending": pending, "reason": report.reason, "final": report.final_text,
                      "run": report.id, "calls": [c.tool_name for s in report.steps for c in s.tool_calls]}))

asyncio.run(main())
"""

AGENT_MD = "---\nname: mailer\nmodel: test\ntools: [lookup:lookup, lookup:send_email]\n---\nYou send mail.\n"


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "tools").mkdir(parents=True)
    (ws / "tools" / "lookup.py").write_text(TOOLS)
    (ws / "AGENT.md").write_text(AGENT_MD)
    return ws


def _env() -> dict[str, str]:
    root = Path(__file__).resolve().parents[2]
    return {**os.environ, "PYTHONPATH": f"{root / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("source", ["dump", "store"])
def test_kill_while_pending_then_restore_approve_and_finish_once(tmp_path: Path, source: str) -> None:
    ws = _workspace(tmp_path)
    (tmp_path / "first.py").write_text(FIRST)
    (tmp_path / "second.py").write_text(SECOND)
    child = subprocess.Popen(
        [sys.executable, str(tmp_path / "first.py"), str(ws)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "PENDING", line + (child.stderr.read() if child.stderr else "")
        os.kill(child.pid, signal.SIGKILL)  # no cleanup of any kind
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
        for pipe in (child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()
    assert child.returncode == -signal.SIGKILL
    log = ws / "executions.log"
    assert log.read_text().splitlines() == ["lookup ann"]

    done = subprocess.run(
        [sys.executable, str(tmp_path / "second.py"), str(ws), source],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["pending"] == ["c2"]
    assert result["reason"] == "done" and result["final"] == "Sent it to ann."
    assert result["calls"] == ["lookup", "send_email"]
    # exactly one execution of each: the approved tool once, the earlier call never again
    assert log.read_text().splitlines() == ["lookup ann", "send_email ann@example.com"]
    lines = read_jsonl(ws / "sessions" / "s" / "transcript.jsonl")
    results = [line for line in lines if line.get("role") == "tool"]
    assert [(r["tool_call_id"], r["content"]) for r in results] == [
        ("c1", "ann@example.com"),
        ("c2", "sent to ann@example.com"),
    ]
