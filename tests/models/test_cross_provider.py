"""A conversation that moves between providers (a fallback chain) never sends one provider's
signed or encrypted reasoning to another."""

from __future__ import annotations

from loopwright.messages import AssistantMessage, Thinking, ToolCall, ToolResultMessage, UserMessage
from loopwright.models.anthropic import AnthropicModel
from loopwright.models.base import ModelRequest
from loopwright.models.openai_responses import OpenAIResponsesModel
from loopwright.sessions import decode_line, encode_entry

OPENAI_REASONING = Thinking(
    text="o-thoughts", signature="rs_abc", redacted="gAAAA-encrypted", provider="openai-responses"
)
ANTHROPIC_THINKING = Thinking(text="a-thoughts", signature="sig-anthropic", provider="anthropic")


def _conversation(thinking: Thinking) -> ModelRequest:
    return ModelRequest(
        system="",
        messages=[
            UserMessage(content="hi"),
            AssistantMessage(thinking=(thinking,), tool_calls=(ToolCall(id="c1", name="t", arguments="{}"),)),
            ToolResultMessage(tool_call_id="c1", name="t", content="ok"),
        ],
    )


async def test_anthropic_never_gets_openai_reasoning() -> None:
    model = AnthropicModel("claude-x", base_url="http://127.0.0.1:9", api_key="k")
    body = model.request_body(_conversation(OPENAI_REASONING))
    assistant = body["messages"][1]
    assert [b["type"] for b in assistant["content"]] == ["tool_use"]
    own = model.request_body(_conversation(ANTHROPIC_THINKING))["messages"][1]["content"]
    assert own[0] == {"type": "thinking", "thinking": "a-thoughts", "signature": "sig-anthropic"}
    await model.aclose()


async def test_responses_never_gets_anthropic_thinking() -> None:
    model = OpenAIResponsesModel("gpt-x", base_url="http://127.0.0.1:9/v1", api_key="k")
    items = model.request_body(_conversation(ANTHROPIC_THINKING))["input"]
    assert [i.get("type") for i in items if i.get("type") == "reasoning"] == []
    own = model.request_body(_conversation(OPENAI_REASONING))["input"]
    assert [i["id"] for i in own if i.get("type") == "reasoning"] == ["rs_abc"]
    await model.aclose()


def test_the_origin_survives_the_transcript() -> None:
    line = encode_entry(AssistantMessage(thinking=(OPENAI_REASONING,)))
    decoded = decode_line(line)
    assert isinstance(decoded, AssistantMessage) and decoded.thinking[0].provider == "openai-responses"
