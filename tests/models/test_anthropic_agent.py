"""End to end: an Agent on AnthropicModel runs a recorded parallel tool-use conversation to its final answer."""

from __future__ import annotations

from loopwright import Agent
from loopwright.messages import AssistantMessage, ToolResultMessage, UserMessage
from loopwright.models.anthropic import AnthropicModel
from loopwright.sessions._codec import TranscriptRecord
from loopwright.testing import ReplayServer
from loopwright.tools import tool
from tests.helpers import assert_paired
from tests.models._shared import RECORDINGS
from tests.models.test_anthropic_recordings import PELICAN_NAMES

RECORDING = RECORDINGS / "anthropic-stream-parallel-tool-use-two-turn.json"
CALL_IDS = ["toolu_01LtHJmixrs9NcWQkK8hu8hj", "toolu_01N8a4jWyf116qKTMqKKmjyt"]


async def test_agent_loop_on_a_recorded_conversation() -> None:
    names = iter(["Charles", "Sammy"])

    @tool
    def pelican_name_generator() -> str:
        """Suggest a name for a pet pelican."""
        return next(names)

    with ReplayServer.from_recording(RECORDING) as server:
        model = AnthropicModel("claude-haiku-4-5-20251001", base_url=server.base_url, api_key="test-key")
        try:
            agent = Agent(model, system="You name pets.", tools=[pelican_name_generator])
            report = await agent.run("Two names for a pet pelican", session_id="s")
        finally:
            await model.aclose()
        assert server.errors == []

    assert (report.reason, report.error) == ("done", None)
    assert report.final_text == PELICAN_NAMES
    assert report.step_count == 2 and report.tool_call_count == 2
    usage = report.total_usage
    assert (usage.input_tokens, usage.output_tokens, usage.requests) == (542 + 678, 62 + 82, 2)

    entries = await agent.transcript("s")
    assert_paired(entries)  # type: ignore[arg-type]
    assert [type(e) for e in entries if not isinstance(e, TranscriptRecord)] == [
        UserMessage,
        AssistantMessage,
        ToolResultMessage,
        ToolResultMessage,
        AssistantMessage,
    ]
    results = [e for e in entries if isinstance(e, ToolResultMessage)]
    assert sorted((r.tool_call_id, r.content) for r in results) == sorted(
        zip(CALL_IDS, ["Charles", "Sammy"], strict=True)
    )
    assert all(not r.is_error and not r.synthetic for r in results)

    # What the loop sent: the cached stable system prompt and tool, then both results in one user turn.
    first, second = (r.json for r in server.requests)
    assert [r.path for r in server.requests] == ["/v1/messages", "/v1/messages"]
    assert first["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert first["system"][0]["text"].startswith("You name pets.")
    assert [(t["name"], t.get("cache_control")) for t in first["tools"]] == [
        ("pelican_name_generator", {"type": "ephemeral"})
    ]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert [b["id"] for b in second["messages"][1]["content"]] == CALL_IDS
    assert sorted((b["tool_use_id"], b["content"]) for b in second["messages"][2]["content"]) == sorted(
        zip(CALL_IDS, ["Charles", "Sammy"], strict=True)
    )
