"""Tool-result pruning: old, large tool results are shortened in what the model is sent.

The transcript is never changed: :func:`prune_tool_results` builds the *view* of the conversation
that goes to the model. It runs before compaction is considered, since it costs no model call and
often frees enough room by itself.

The rule (each number is a parameter; defaults in brackets):

- A *turn* starts at a user message. A tool result is *old* when it comes before the last
  ``keep_recent_turns`` [3] turns. The current turn (from the last user message on) is never old,
  whatever ``keep_recent_turns`` says.
- An old tool result whose content is longer than ``max_chars`` [2000] characters is replaced by
  its first ``head`` [500] and last ``tail`` [200] characters, joined by the marker
  ``[… N characters pruned from this old tool result …]`` on a line of its own (N characters were
  left out).
- Error results are never pruned: they are short, and the model needs to know what failed.
- Everything else is returned as the very same object. A pruned result keeps its position, call id,
  name and flags, so every call still has its result right after it.
"""

from __future__ import annotations

from collections.abc import Sequence

from loopwright.messages import Message, ToolResultMessage, UserMessage

__all__ = ["PRUNED_MARKER", "PruneCache", "prune_tool_results", "pruned_content"]

PRUNED_MARKER = "[… {n} characters pruned from this old tool result …]"


def pruned_content(content: str, *, head: int = 500, tail: int = 200) -> str:
    """``content``'s first ``head`` and last ``tail`` characters around the marker."""
    left_out = len(content) - head - tail
    end = content[len(content) - tail :] if tail else ""
    return f"{content[:head]}\n{PRUNED_MARKER.format(n=left_out)}\n{end}"


class PruneCache:
    """Results pruned by earlier calls, for :func:`prune_tool_results` to reuse.

    Pruning the same history again then costs a lookup per old large result instead of building
    it again, and returns the very same pruned objects, so per-message caches downstream (token
    counts) hit as well. Keep one per conversation (a run); it holds the messages it was given."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[int, tuple[ToolResultMessage, int, int, ToolResultMessage, int]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()


def prune_tool_results(
    messages: Sequence[Message],
    *,
    keep_recent_turns: int = 3,
    max_chars: int = 2000,
    head: int = 500,
    tail: int = 200,
    cache: PruneCache | None = None,
) -> tuple[list[Message], int]:
    """Return ``(view, characters_saved)``: ``messages`` with old, large, successful tool results
    shortened (the rule is in the module docstring). Unchanged messages are the same objects; when
    nothing is pruned, ``view`` is ``messages`` itself if it is a list. Treat the view as read-only.

    A :class:`PruneCache` passed as ``cache`` makes repeated calls on a growing history cheap.
    Raises :class:`ValueError` for a negative number or ``head + tail > max_chars``."""
    if min(keep_recent_turns, max_chars, head, tail) < 0:
        raise ValueError("keep_recent_turns, max_chars, head and tail must not be negative")
    if head + tail > max_chars:
        raise ValueError(f"head + tail ({head} + {tail}) must not exceed max_chars ({max_chars})")
    end = _old_end(messages, max(keep_recent_turns, 1))
    entries = cache._entries if cache is not None else None
    view: list[Message] | None = None
    saved = 0
    used = 0
    for i in range(end):
        m = messages[i]
        if type(m) is not ToolResultMessage or len(m.content) <= max_chars or m.is_error:
            continue
        hit = entries.get(id(m)) if entries is not None else None
        if hit is not None and hit[0] is m and hit[1] == head and hit[2] == tail:
            pruned, cut = hit[3], hit[4]
        else:
            content = pruned_content(m.content, head=head, tail=tail)
            cut = len(m.content) - len(content)
            if cut <= 0:
                continue  # the marker would cost more than it saves
            pruned = ToolResultMessage(
                tool_call_id=m.tool_call_id,
                name=m.name,
                content=content,
                is_error=m.is_error,
                synthetic=m.synthetic,
                run_id=m.run_id,
                timestamp=m.timestamp,
            )
            if entries is not None:
                entries[id(m)] = (m, head, tail, pruned, cut)
        if view is None:
            view = list(messages)
        view[i] = pruned
        saved += cut
        used += 1
    if cache is not None and len(cache._entries) > 2 * used + 1024:
        # Drop what this history no longer holds (its messages were compacted away).
        kept = {id(m) for m in (view or ())[:end] if type(m) is ToolResultMessage}
        cache._entries = {k: v for k, v in cache._entries.items() if id(v[3]) in kept}
    if view is None:
        return (messages if type(messages) is list else list(messages)), 0
    return view, saved


def _old_end(messages: Sequence[Message], turns: int) -> int:
    """The index where the last ``turns`` turns begin (0 when there are not that many)."""
    seen = 0
    for i in range(len(messages) - 1, -1, -1):
        if type(messages[i]) is UserMessage:
            seen += 1
            if seen == turns:
                return i
    return 0
