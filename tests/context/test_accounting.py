"""Token counters: exact counts with the ``tokens`` extra, four characters per token without it."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwright.context import accounting
from loopwright.context.accounting import (
    MEDIA_TOKENS,
    MESSAGE_TOKENS,
    PARALLEL_CALL_TOKENS,
    TOOL_CALL_TOKENS,
    TOOLS_TOKENS,
    BpeCounter,
    CharCounter,
    TokenCounter,
    count_tool_definitions,
    counter_for,
    encoding_for,
    exact_counting_available,
    framing_tokens,
    message_texts,
    tool_definitions_text,
)
from loopwright.errors import ConfigError
from loopwright.messages import AssistantMessage, Message, Thinking, ToolCall, ToolResultMessage, UserMessage
from loopwright.models.base import ToolDefinition

needs_extra = pytest.mark.skipif(
    importlib.util.find_spec("toktok") is None,
    reason="the 'tokens' extra (toktok-rs) is not installed: pip install 'loopwright[tokens]'",
)

SPACES = "This is a test         with a lot of spaces"


# --- exact counts (the published token ids of tiktoken's and tiktoken-rs's own tests) ----------


@needs_extra
@pytest.mark.parametrize(
    ("encoding", "text", "tokens"),
    [
        ("o200k_base", SPACES, 10),
        ("cl100k_base", SPACES, 10),
        ("cl100k_base", "hello world", 2),
        ("cl100k_base", "rer", 1),
        ("cl100k_base", "'rer", 2),
        ("cl100k_base", "today\n \n", 2),
        ("cl100k_base", "today\n  \n", 2),
        ("cl100k_base", "👍", 3),
        ("o200k_base", "hello world", 2),
        ("o200k_base", "", 0),
        # special tokens inside text are text, not one token
        ("o200k_base", "<|endoftext|>", 7),
    ],
)
def test_exact_counts_of_fixed_strings(encoding: accounting.Encoding, text: str, tokens: int) -> None:
    assert BpeCounter(encoding).count_text(text) == tokens


@needs_extra
def test_lone_surrogates_count_as_replacement_characters() -> None:
    counter = BpeCounter("cl100k_base")
    assert counter.count_text("\ud83d") == counter.count_text("\ufffd")
    assert counter.count_text("\ud83d\udc4d") == 3  # a surrogate pair is the character it encodes


@needs_extra
def test_exact_message_counts_add_the_framing() -> None:
    counter = BpeCounter("cl100k_base")
    assert counter.count_message(UserMessage(content="hello world")) == 2 + MESSAGE_TOKENS
    one_call = AssistantMessage(
        content="",
        tool_calls=(ToolCall(id="c1", name="multiply", arguments='{"a": 1231, "b": 2331}'),),
    )
    text = counter.count_text("multiply") + counter.count_text('{"a": 1231, "b": 2331}')
    assert counter.count_message(one_call) == text + MESSAGE_TOKENS + TOOL_CALL_TOKENS
    two_calls = AssistantMessage(
        content="hello world",
        tool_calls=(ToolCall(id="c1", name="a", arguments="{}"), ToolCall(id="c2", name="b", arguments="{}")),
    )
    text = 2 + 2 * (counter.count_text("a") + counter.count_text("{}"))
    framing = MESSAGE_TOKENS + 2 * (TOOL_CALL_TOKENS + PARALLEL_CALL_TOKENS)
    assert counter.count_message(two_calls) == text + framing
    result = ToolResultMessage(tool_call_id="c1", name="multiply", content="hello world")
    assert counter.count_message(result) == 2 + MESSAGE_TOKENS


@needs_extra
def test_exact_counter_counts_thinking_text() -> None:
    counter = BpeCounter("o200k_base")
    plain = AssistantMessage(content="hello world")
    thought = AssistantMessage(content="hello world", thinking=(Thinking(text=SPACES, signature="sig"),))
    assert counter.count_message(thought) == counter.count_message(plain) + 10


def test_char_counter_counts_four_characters_per_token_rounded_up() -> None:
    counter = CharCounter()
    assert counter.name == "chars/4"
    assert [counter.count_text("a" * n) for n in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]
    assert counter.count_message(UserMessage(content="a" * 10)) == 3 + MESSAGE_TOKENS
    assistant = AssistantMessage(
        content="abcd",
        tool_calls=(ToolCall(id="c1", name="read", arguments='{"p":1}'),),
        thinking=(Thinking(text="x" * 9),),
    )
    chars = 4 + 4 + 7 + 9
    assert counter.count_message(assistant) == -(-chars // 4) + MESSAGE_TOKENS + TOOL_CALL_TOKENS


def test_media_parts_cost_a_fixed_amount_in_every_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    message = UserMessage(content="look at this")
    before = framing_tokens(message)
    monkeypatch.setattr(accounting, "media_parts", lambda m: 2)
    assert framing_tokens(message) == before + 2 * MEDIA_TOKENS
    assert CharCounter().count_message(message) == 3 + before + 2 * MEDIA_TOKENS


def test_message_texts_lists_what_reaches_the_model() -> None:
    assistant = AssistantMessage(
        content="c",
        tool_calls=(ToolCall(id="id-not-sent", name="n", arguments="{}"),),
        thinking=(Thinking(text="t", signature="opaque", redacted="opaque"),),
    )
    assert message_texts(assistant) == ["c", "n", "{}", "t"]
    assert message_texts(ToolResultMessage(tool_call_id="x", name="n", content="r")) == ["r"]


# --- choosing a counter -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("openai:gpt-4o", "o200k_base"),
        ("openai:gpt-4o-mini-2024-07-18", "o200k_base"),
        ("openai:gpt-4.1-mini", "o200k_base"),
        ("openai:gpt-5", "o200k_base"),
        ("openai:o3-mini", "o200k_base"),
        ("openai:chatgpt-4o-latest", "o200k_base"),
        ("openai:ft:gpt-4o-mini:acme::abc", "o200k_base"),
        ("openai-responses:gpt-5.5", "o200k_base"),
        ("openai:some-future-model", "o200k_base"),
        ("openai:gpt-4", "cl100k_base"),
        ("openai:gpt-4-turbo", "cl100k_base"),
        ("openai:gpt-4-0613", "cl100k_base"),
        ("openai:gpt-3.5-turbo", "cl100k_base"),
        ("openai:ft:gpt-3.5-turbo:acme::abc", "cl100k_base"),
        ("anthropic:claude-sonnet-4-5", None),
        ("openai-compatible:gpt-4o", None),
        ("ollama:llama3", None),
        ("gpt-4o", None),
        ("test", None),
    ],
)
def test_encoding_for_model_names(model: str, encoding: str | None) -> None:
    assert encoding_for(model) == encoding


@needs_extra
def test_counter_for_openai_models_is_exact_and_shared() -> None:
    counter = counter_for("openai:gpt-4o")
    assert isinstance(counter, BpeCounter) and counter.name == "o200k_base"
    assert counter_for("openai-responses:o3") is counter
    assert counter_for("openai:gpt-4").name == "cl100k_base"


def test_counter_for_other_models_counts_characters() -> None:
    assert isinstance(counter_for("anthropic:claude-haiku-4-5"), CharCounter)
    assert isinstance(counter_for("test"), CharCounter)


def test_counter_for_falls_back_to_characters_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "toktok", None)  # as if not installed: imports fail
    monkeypatch.setattr(accounting, "_COUNTERS", {})
    assert not exact_counting_available()
    with pytest.raises(ConfigError, match=r"loopwright\[tokens\]"):
        BpeCounter()
    counter = counter_for("openai:gpt-4o")
    assert isinstance(counter, CharCounter)
    assert counter.count_text(SPACES) == 11


def test_counter_for_survives_a_broken_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "toktok", None)
    monkeypatch.setattr(accounting, "_COUNTERS", {})
    monkeypatch.setattr(accounting, "exact_counting_available", lambda: True)  # found, not importable
    assert isinstance(counter_for("openai:gpt-4o"), CharCounter)


def test_unknown_encoding_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="'p50k_base'"):
        BpeCounter("p50k_base")  # type: ignore[arg-type]


# --- batches agree with single counts ----------------------------------------------------------

_texts = st.text(max_size=60)
_calls = st.lists(
    st.builds(ToolCall, id=st.just("c"), name=st.sampled_from(["read", "grep"]), arguments=_texts), max_size=3
)
_messages = st.lists(
    st.one_of(
        st.builds(UserMessage, content=_texts),
        st.builds(
            AssistantMessage,
            content=_texts,
            tool_calls=_calls.map(tuple),
            thinking=st.lists(st.builds(Thinking, text=_texts), max_size=2).map(tuple),
        ),
        st.builds(ToolResultMessage, tool_call_id=st.just("c"), name=st.just("read"), content=_texts),
    ),
    max_size=8,
)


def _counters() -> list[TokenCounter]:
    counters: list[TokenCounter] = [CharCounter()]
    if exact_counting_available():
        counters.append(BpeCounter("o200k_base"))
    return counters


@settings(max_examples=60, deadline=None)
@given(messages=_messages)
def test_count_messages_equals_count_message_each(messages: list[Message]) -> None:
    for counter in _counters():
        assert counter.count_messages(messages) == [counter.count_message(m) for m in messages]
        for m in messages:
            assert counter.count_message(m) >= framing_tokens(m)


# --- tool definitions ---------------------------------------------------------------------------


def test_tool_definitions_render_as_a_typescript_namespace() -> None:
    tools = [
        ToolDefinition(
            name="multiply",
            description="Multiply two numbers.",
            parameters={
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "description": "first"},
                    "b": {"type": ["number", "null"]},
                    "mode": {"enum": ["fast", "exact"]},
                    "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}},
                },
                "required": ["a", "b"],
                "$defs": {"Tag": {"type": "object", "properties": {"name": {"type": "string"}}}},
            },
        ),
        ToolDefinition(name="now", description="", parameters={"type": "object", "properties": {}}),
    ]
    assert tool_definitions_text(tools) == (
        "namespace functions {\n\n"
        "// Multiply two numbers.\n"
        "type multiply = (_: {\n"
        "// first\n"
        "a: number,\n"
        "b: number | null,\n"
        'mode?: "fast" | "exact",\n'
        "tags?: {\nname?: string,\n}[],\n"
        "}) => any;\n\n"
        "type now = () => any;\n\n"
        "} // namespace functions"
    )
    counter = CharCounter()
    assert count_tool_definitions(counter, tools) == (
        counter.count_text(tool_definitions_text(tools)) + TOOLS_TOKENS
    )
    assert count_tool_definitions(counter, []) == 0


def test_recursive_schemas_stop() -> None:
    node = {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}
    tool = ToolDefinition(
        name="walk",
        description="",
        parameters={"type": "object", "properties": node["properties"], "$defs": {"Node": node}},
    )
    assert "any" in tool_definitions_text([tool])
