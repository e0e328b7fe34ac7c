"""Helpers for the command-line tests."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

from typer.testing import CliRunner, Result

from loopwright.cli import app

#: A tool that takes its time: a run is still inside it when the test stops the run.
SLOW_TOOL = '''
import asyncio
from loopwright import tool

@tool
async def nap(seconds: float = 30) -> str:
    """Sleep a while."""
    await asyncio.sleep(seconds)
    return "rested"
'''

#: AGENT.md of a workspace whose only tool is ``tools/<module>.py:<function>``.
_AGENT_MD = """\
---
name: {name}
model: test
tools:
  - {tool}
---
You are a test agent.
"""


def invoke(
    args: Sequence[str], *, input: str | None = None, env: Mapping[str, str | None] | None = None
) -> Result:
    """Run ``loopwright ARGS`` in-process; stdout and stderr are kept apart."""
    return CliRunner().invoke(app, list(args), input=input, env=env)


def tool_workspace(root: Path, module: str, source: str, function: str) -> Path:
    """A workspace whose only tool is ``function`` from ``tools/<module>.py`` (given as ``source``)."""
    (root / "tools").mkdir(parents=True)
    (root / "tools" / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    agent_md = _AGENT_MD.format(name=root.name, tool=f"{module}:{function}")
    (root / "AGENT.md").write_text(agent_md, encoding="utf-8")
    return root


def session_ids(root: Path) -> list[str]:
    sessions = root / "sessions"
    return sorted(p.name for p in sessions.iterdir() if p.is_dir()) if sessions.is_dir() else []
