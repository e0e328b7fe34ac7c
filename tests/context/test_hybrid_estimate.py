"""HybridEstimate: the provider's last count plus the messages since, at the cost of the new ones."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from loopwright.context.accounting import (
    MESSAGE_TOKENS,
    REQUEST_TOKENS,
    CharCounter,
    HybridEstimate,
    count_tool_definitions,
)
from loopwright.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from loopwright.models.base import ToolDefinition

SYSTEM = "You are terse."  # 14 characters: 4 tokens


class CountingCounter(CharCounter):
    """A character counter that remembers how many messages it was asked to count."""

    def __init__(self) -> None:
        self.counted = 0

    def count_message(self, message: Message) -> int:
        self.counted += 1
        return super().count_message(message)

    def count_messages(self, messages: Sequence[Message]) -> list[int]:
        self.counted += len(messages)
        return [CharCounter.count_message(self, m) for m in messages]


class WatchedList(Sequence[Message]):
    """A sequence that counts how many of its items were read."""

    def __init__(self, items: list[Message]) -> None:
        self.items = items
        self.reads = 0

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            part = self.items[index]
            self.reads += len(part)
            return part
        self.reads += 1
        return self.items[index]

    def __iter__(self) -> Iterator[Message]:
        for m in self.items:
            self.reads += 1
            yield m


def conversation(steps: int) -> list[Message]:
    out: list[Message] = [UserMessage(content="please look at the repository")]
    for i in range(steps):
        call = ToolCall(id=f"c{i}", name="read_file", arguments=f'{{"path": "f{i}.py"}}')
        out.append(AssistantMessage(content="", tool_calls=(call,)))
        out.append(ToolResultMessage(tool_call_id=call.id, name="read_file", content="x" * (40 + i % 7)))
    return out


def test_without_an_anchor_everything_is_counted_with_the_system_prompt() -> None:
    messages = conversation(3)
    counter = CharCounter()
    expected = REQUEST_TOKENS + 4 + MESSAGE_TOKENS + sum(counter.count_message(m) for m in messages)
    hybrid = HybridEstimate(counter)
    assert hybrid.anchor is None
    assert hybrid.estimate(SYSTEM, messages) == expected
    assert hybrid.estimate("", messages) == expected - 4 - MESSAGE_TOKENS


def test_tools_count_only_without_an_anchor() -> None:
    messages = conversation(1)
    tools = [ToolDefinition(name="read_file", description="Read a file.", parameters={})]
    counter = CharCounter()
    hybrid = HybridEstimate(counter)
    without = hybrid.estimate(SYSTEM, messages)
    # with tools, the system prompt shares the tools' message: no framing of its own
    assert hybrid.estimate(SYSTEM, messages, tools=tools) == (
        without + count_tool_definitions(counter, tools) - MESSAGE_TOKENS
    )
    hybrid.record_actual(500, len(messages) - 1)
    assert hybrid.estimate(SYSTEM, messages, tools=tools) == 500


def test_anchor_plus_the_messages_after_it() -> None:
    messages = conversation(2)
    counter = CharCounter()
    hybrid = HybridEstimate(counter)
    hybrid.record_actual(1000, len(messages) - 1)
    assert hybrid.anchor == (1000, len(messages) - 1)
    assert hybrid.estimate(SYSTEM, messages) == 1000
    added = conversation(1)[1:]
    messages.extend(added)
    assert hybrid.estimate(SYSTEM, messages) == 1000 + sum(counter.count_message(m) for m in added)
    # the system prompt is part of the anchor: changing it does not change the estimate
    assert hybrid.estimate(SYSTEM * 10, messages) == hybrid.estimate(SYSTEM, messages)


def test_a_report_of_zero_tokens_is_ignored() -> None:
    hybrid = HybridEstimate()
    hybrid.record_actual(0, 3)
    assert hybrid.anchor is None
    hybrid.record_actual(10, -1)
    assert hybrid.anchor is None


def test_reset_counts_everything_again() -> None:
    messages = conversation(2)
    hybrid = HybridEstimate()
    full = hybrid.estimate(SYSTEM, messages)
    hybrid.record_actual(99_999, len(messages) - 1)
    assert hybrid.estimate(SYSTEM, messages) == 99_999
    hybrid.reset()
    assert hybrid.anchor is None
    assert hybrid.estimate(SYSTEM, messages) == full


def test_replacing_messages_before_or_at_the_anchor_resets_it() -> None:
    hybrid = HybridEstimate()
    hybrid.record_actual(700, 5)
    hybrid.replaced(6)  # after the anchor: still valid
    assert hybrid.anchor == (700, 5)
    hybrid.replaced(5)  # includes the anchor
    assert hybrid.anchor is None
    hybrid.record_actual(700, 5)
    hybrid.replaced(0)  # precedes it
    assert hybrid.anchor is None


def test_an_anchor_beyond_the_messages_is_dropped() -> None:
    messages = conversation(4)
    hybrid = HybridEstimate()
    full_short = hybrid.estimate(SYSTEM, messages[:3])
    hybrid.record_actual(5000, len(messages) - 1)
    assert hybrid.estimate(SYSTEM, messages[:3]) == full_short  # compacted without a reset
    assert hybrid.anchor is None


def test_each_message_is_counted_once() -> None:
    counter = CountingCounter()
    hybrid = HybridEstimate(counter)
    messages = conversation(5_000)  # 10,001 entries
    hybrid.estimate(SYSTEM, messages)
    assert counter.counted == len(messages)
    hybrid.record_actual(123_456, len(messages) - 1)
    for step in range(3):
        before = counter.counted
        call = ToolCall(id=f"n{step}", name="grep", arguments="{}")
        messages.append(AssistantMessage(content="searching", tool_calls=(call,)))
        messages.append(ToolResultMessage(tool_call_id=call.id, name="grep", content="found"))
        hybrid.estimate(SYSTEM, messages)
        assert counter.counted - before == 2
        hybrid.record_actual(123_456 + step, len(messages) - 1)
    before = counter.counted
    hybrid.estimate(SYSTEM, messages)
    assert counter.counted == before  # nothing new: nothing counted


def test_a_new_run_over_the_same_messages_counts_nothing_again() -> None:
    counter = CountingCounter()
    hybrid = HybridEstimate(counter)
    messages = conversation(1_000)
    first = hybrid.estimate(SYSTEM, messages)
    counted = counter.counted
    reloaded = list(messages)  # a store's load: a new list of the same message objects
    assert hybrid.estimate(SYSTEM, reloaded) == first
    assert counter.counted == counted


def test_an_anchored_step_reads_only_the_new_messages() -> None:
    hybrid = HybridEstimate(CountingCounter())
    watched = WatchedList(conversation(5_000))
    hybrid.estimate(SYSTEM, watched)
    hybrid.record_actual(50_000, len(watched) - 1)
    watched.items.append(UserMessage(content="and now?"))
    watched.reads = 0
    hybrid.estimate(SYSTEM, watched)
    assert watched.reads == 1


def test_an_unanchored_list_grown_in_place_is_summed_from_where_it_was() -> None:
    counter = CountingCounter()
    hybrid = HybridEstimate(counter)
    messages = conversation(5_000)
    watched = WatchedList(messages)
    total = hybrid.estimate(SYSTEM, watched)
    watched.items.append(UserMessage(content="abcd"))
    watched.reads = 0
    grown = hybrid.estimate(SYSTEM, watched)
    assert grown == total + 1 + MESSAGE_TOKENS
    assert watched.reads <= 3  # the last message seen before, the new one, the new last one


def test_messages_left_behind_by_a_compaction_are_forgotten() -> None:
    counter = CountingCounter()
    hybrid = HybridEstimate(counter)
    messages = conversation(3_000)
    hybrid.estimate(SYSTEM, messages)
    kept = messages[-10:]
    hybrid.replaced(0)
    hybrid.estimate(SYSTEM, kept)
    counted = counter.counted
    assert hybrid.estimate(SYSTEM, messages[-10:]) == hybrid.estimate(SYSTEM, kept)
    assert counter.counted == counted  # the kept ones are still cached
    hybrid.estimate(SYSTEM, messages)  # the forgotten ones are counted again
    assert counter.counted == counted + len(messages) - 10


def test_message_counts_are_cached_and_batched() -> None:
    counter = CountingCounter()
    hybrid = HybridEstimate(counter)
    messages = conversation(10)
    expected = [CharCounter().count_message(m) for m in messages]
    assert hybrid.message_counts(messages[:5]) == expected[:5]
    assert counter.counted == 5
    assert hybrid.message_counts(messages) == expected
    assert counter.counted == len(messages)
    assert hybrid.message_tokens(messages[7]) == expected[7]
    hybrid.estimate(SYSTEM, messages)
    assert counter.counted == len(messages)
