"""Tool-result pruning: only old, large, successful results shrink; nothing else changes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.helpers import assert_paired

from loopwright.context.pruning import PRUNED_MARKER, PruneCache, prune_tool_results, pruned_content
from loopwright.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage

BIG = "".join(f"line {i:05d} of a long tool output\n" for i in range(200))  # 6,000 characters


def turn(n: int, *results: tuple[str, bool]) -> list[Message]:
    """A user turn: the question, one assistant message calling a tool per result, the answer."""
    out: list[Message] = [UserMessage(content=f"question {n}")]
    calls = tuple(ToolCall(id=f"t{n}c{i}", name="read_file", arguments="{}") for i in range(len(results)))
    if calls:
        out.append(AssistantMessage(content="", tool_calls=calls))
        for call, (content, is_error) in zip(calls, results, strict=True):
            out.append(
                ToolResultMessage(
                    tool_call_id=call.id,
                    name=call.name,
                    content=content,
                    is_error=is_error,
                    run_id="r1",
                    timestamp="2026-11-22T10:00:00.000Z",
                )
            )
    out.append(AssistantMessage(content=f"answer {n}"))
    return out


def history(*turns: list[Message]) -> list[Message]:
    return [m for t in turns for m in t]


def test_an_old_large_result_keeps_its_head_and_tail_around_the_marker() -> None:
    messages = history(turn(1, (BIG, False)), turn(2), turn(3), turn(4))
    view, saved = prune_tool_results(messages)
    old = messages[2]
    new = view[2]
    assert isinstance(old, ToolResultMessage) and isinstance(new, ToolResultMessage)
    left_out = len(BIG) - 500 - 200
    assert new.content == (
        BIG[:500] + "\n[… " + str(left_out) + " characters pruned from this old tool result …]\n" + BIG[-200:]
    )
    assert new.content == pruned_content(BIG)
    assert PRUNED_MARKER.format(n=left_out) in new.content
    assert saved == len(BIG) - len(new.content)
    assert (new.tool_call_id, new.name, new.is_error, new.synthetic, new.run_id, new.timestamp) == (
        old.tool_call_id,
        old.name,
        old.is_error,
        old.synthetic,
        old.run_id,
        old.timestamp,
    )
    assert old.content == BIG  # the transcript's message is untouched
    assert all(a is b for i, (a, b) in enumerate(zip(messages, view, strict=True)) if i != 2)
    assert_paired(view)


def test_results_of_the_last_three_turns_are_kept() -> None:
    messages = history(turn(1), turn(2, (BIG, False)), turn(3, (BIG, False)), turn(4, (BIG, False)))
    view, saved = prune_tool_results(messages)
    assert view is messages and saved == 0


def test_the_current_turn_is_never_pruned() -> None:
    messages = history(turn(1, (BIG, False)), turn(2, (BIG, False)))
    view, saved = prune_tool_results(messages, keep_recent_turns=0)
    assert view[2] is not messages[2]  # turn 1 is old with no recent turns kept
    assert all(a is b for a, b in zip(messages[4:], view[4:], strict=True))  # turn 2 is current
    # a turn still under way (no answer yet) is current too
    running = history(turn(1))
    running += turn(2, (BIG, False))[:-1]
    view, saved = prune_tool_results(running, keep_recent_turns=0)
    assert view is running and saved == 0


def test_error_and_small_results_are_kept() -> None:
    exactly_max = "y" * 2000
    messages = history(
        turn(1, (BIG, True), (exactly_max, False), ("short", False)), turn(2), turn(3), turn(4)
    )
    view, saved = prune_tool_results(messages)
    assert view is messages and saved == 0


def test_nothing_to_prune_returns_the_same_objects() -> None:
    messages = history(turn(1, ("small", False)), turn(2), turn(3), turn(4))
    view, saved = prune_tool_results(messages)
    assert view is messages and saved == 0
    as_tuple = tuple(messages)
    view, saved = prune_tool_results(as_tuple)
    assert isinstance(view, list) and all(a is b for a, b in zip(as_tuple, view, strict=True))
    assert prune_tool_results([]) == ([], 0)


def test_the_numbers_are_parameters() -> None:
    content = "abcdefghij" * 20  # 200 characters
    messages = history(turn(1, (content, False)), turn(2))
    view, saved = prune_tool_results(messages, keep_recent_turns=1, max_chars=100, head=10, tail=5)
    new = view[2]
    assert isinstance(new, ToolResultMessage)
    assert new.content == "abcdefghij\n[… 185 characters pruned from this old tool result …]\nfghij"
    assert saved == 200 - len(new.content)


def test_a_marker_longer_than_what_it_replaces_is_not_used() -> None:
    messages = history(turn(1, ("z" * 40, False)), turn(2))
    view, saved = prune_tool_results(messages, keep_recent_turns=1, max_chars=30, head=10, tail=10)
    assert view is messages and saved == 0


@pytest.mark.parametrize(
    "options",
    [
        {"head": 1500, "tail": 600},
        {"max_chars": -1},
        {"keep_recent_turns": -1},
        {"tail": -5},
    ],
)
def test_invalid_numbers_are_refused(options: dict[str, int]) -> None:
    numbers = {"keep_recent_turns": 3, "max_chars": 2000, "head": 500, "tail": 200} | options
    with pytest.raises(ValueError):
        prune_tool_results(
            history(turn(1)),
            keep_recent_turns=numbers["keep_recent_turns"],
            max_chars=numbers["max_chars"],
            head=numbers["head"],
            tail=numbers["tail"],
        )


def test_a_cache_returns_the_same_pruned_objects() -> None:
    messages = history(turn(1, (BIG, False), (BIG + "!", False)), turn(2), turn(3), turn(4))
    cache = PruneCache()
    first, _ = prune_tool_results(messages, cache=cache)
    assert len(cache) == 2
    messages += turn(5, (BIG, False))
    second, saved_again = prune_tool_results(messages, cache=cache)
    assert second[2] is first[2] and second[3] is first[3]
    assert (second, saved_again) == prune_tool_results(messages)  # same values as without a cache
    third, _ = prune_tool_results(messages, cache=cache, head=100, tail=100)  # other numbers: rebuilt
    assert isinstance(third[2], ToolResultMessage) and len(third[2].content) < len(second[2].content)
    cache.clear()
    assert len(cache) == 0


# --- property: nothing but old, large, successful results ever changes --------------------------

_sizes = st.sampled_from([0, 10, 1999, 2000, 2001, 2500, 9000])


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    for n in range(draw(st.integers(0, 8))):
        results = draw(st.lists(st.tuples(_sizes, st.booleans()), max_size=3))
        t = turn(n, *(("r" * size, is_error) for size, is_error in results))
        if draw(st.booleans()):
            t = t[:-1]  # a turn without its final answer
        messages += t
    return messages


@settings(max_examples=300, deadline=None)
@given(
    messages=conversations(),
    keep=st.integers(0, 4),
    max_chars=st.sampled_from([100, 2000, 3000]),
    use_cache=st.booleans(),
)
def test_only_old_large_successful_results_change(
    messages: list[Message], keep: int, max_chars: int, use_cache: bool
) -> None:
    head, tail = min(500, max_chars // 2), min(200, max_chars // 4)
    users = [i for i, m in enumerate(messages) if isinstance(m, UserMessage)]
    old_end = users[-max(keep, 1)] if len(users) >= max(keep, 1) else 0
    cache = PruneCache() if use_cache else None
    view, saved = prune_tool_results(
        messages, keep_recent_turns=keep, max_chars=max_chars, head=head, tail=tail, cache=cache
    )
    assert len(view) == len(messages)
    expected_saved = 0
    for i, (before, after) in enumerate(zip(messages, view, strict=True)):
        prunable = (
            isinstance(before, ToolResultMessage)
            and i < old_end
            and not before.is_error
            and len(before.content) > max_chars
        )
        if not prunable:
            assert after is before
            continue
        assert isinstance(before, ToolResultMessage) and isinstance(after, ToolResultMessage)
        assert after.content == pruned_content(before.content, head=head, tail=tail)
        assert (after.tool_call_id, after.name, after.is_error, after.synthetic) == (
            before.tool_call_id,
            before.name,
            before.is_error,
            before.synthetic,
        )
        expected_saved += len(before.content) - len(after.content)
    assert saved == expected_saved
    assert_paired(view)
    if expected_saved == 0:
        assert view is messages
