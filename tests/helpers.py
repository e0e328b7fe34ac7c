"""Small helpers shared by tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loopwright import Agent
from loopwright.events import RunEvent
from loopwright.messages import AssistantMessage, Message, ToolResultMessage
from loopwright.sessions._codec import TranscriptRecord


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def record_events(agent: Agent) -> list[RunEvent]:
    seen: list[RunEvent] = []
    agent.on("*", seen.append)
    return seen


def assert_paired(messages: list[Message]) -> None:
    """Every tool call has exactly one result, right after its assistant message (journal and other
    records between them are not messages)."""
    messages = [m for m in messages if not isinstance(m, TranscriptRecord)]
    i = 0
    while i < len(messages):
        m = messages[i]
        if isinstance(m, AssistantMessage) and m.tool_calls:
            ids = [c.id for c in m.tool_calls]
            following = messages[i + 1 : i + 1 + len(ids)]
            got = [r.tool_call_id for r in following if isinstance(r, ToolResultMessage)]
            assert sorted(got) == sorted(ids), f"calls {ids} answered by {got}"
            i += 1 + len(ids)
            continue
        assert not isinstance(m, ToolResultMessage), f"orphan tool result {m.tool_call_id}"
        i += 1
