"""Compaction rules: where to cut, what to ask the model, what must survive, what the record says.

The transcript is never rewritten. A compaction appends a record::

    {"type": "compaction", "id": "…", "keep_from": {"run": "<run id>", "offset": 3},
     "summary": "…", "covered": 412, "tokens_before": 118230, "tokens_after": 21544, …}

meaning: every message before the ``offset``-th message of run ``run`` is replaced, in the context a
model sees, by ``summary``. Later compactions fold the previous summary into theirs (the model is
asked to *update* it, not to summarise a summary), so only the latest active record matters. An
``{"type": "uncompact", "compaction": "<id>"}`` record undoes one: the originals were never removed.

**Where the cut goes.** Never between a tool call and its result: only before a user message, or
before an assistant message whose preceding tool calls are all answered. The most recent
``keep_fraction`` (25%) of the usable window (``context_window - reserve_floor``) is kept verbatim,
and always the current user message.

**What must survive.** Identifiers in the compacted messages — file paths, URLs, ids (UUIDs, hex
strings, ``ABC-123`` tickets, ``#123``), and numbers of three or more digits the user wrote — are
checked against the summary. A summary that drops some is retried once with the missing ones named;
if it still drops them, they are appended verbatim under ``## Identifiers``, so none is ever lost.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from loopwright.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from loopwright.sessions._codec import Entry, TranscriptRecord

__all__ = [
    "COMPACTION_SYSTEM",
    "ActiveCompaction",
    "active_compaction",
    "anchor_of",
    "choose_cut",
    "compaction_prompt",
    "context_after",
    "extract_identifiers",
    "missing_identifiers",
    "render_messages",
]

COMPACTION_SYSTEM = (
    "You maintain the working memory of an assistant whose conversation has grown too long. "
    "Write a summary that lets the assistant continue the work without the original messages. "
    "Use exactly these sections: ## Goal, ## Constraints, ## Progress, ## Decisions, ## Next steps, "
    "## Critical context. Keep every file path, URL, id and number the user gave, verbatim. "
    "Be concrete and brief; do not invent anything."
)

_MAX_IDENTIFIERS = 60
"""At most this many new identifiers per compaction, and this many carried from earlier ones."""
_RESULT_CHARS = 600

_URL = re.compile(r"https?://[^\s<>\"'`)\]]+")
_PATH = re.compile(
    r"(?<![\w@])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+|(?<![\w/.])[\w-]{2,}\.[A-Za-z][A-Za-z0-9]{0,5}\b"
)
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_HEX = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,40}\b")
_TICKET = re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d+\b|#\d{2,}\b")
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*\.?\d*(?![\w.]*\w)")


@dataclass(frozen=True, slots=True, kw_only=True)
class ActiveCompaction:
    id: str
    keep_run: str
    keep_offset: int
    summary: str
    flushed: bool
    """A memory flush has happened since this compaction (no new flush in this cycle)."""


def active_compaction(entries: Iterable[Entry]) -> tuple[ActiveCompaction | None, bool]:
    """The compaction in force (the latest not undone), and whether a memory flush happened in the
    current cycle (since that compaction, or since the start when there is none)."""
    stack: list[ActiveCompaction] = []
    flushed = False
    for e in entries:
        if type(e) is not TranscriptRecord:
            continue
        if e.type == "compaction":
            keep = e.data.get("keep_from") or {}
            stack.append(
                ActiveCompaction(
                    id=str(e.data.get("id", "")),
                    keep_run=str(keep.get("run", "")),
                    keep_offset=int(keep.get("offset", 0)),
                    summary=str(e.data.get("summary", "")),
                    flushed=False,
                )
            )
            flushed = False
        elif e.type == "uncompact":
            target = e.data.get("compaction")
            stack = [c for c in stack if c.id != target]
        elif e.type == "memory_flush":
            flushed = True
    return (stack[-1] if stack else None), flushed


def context_after(messages: Sequence[Message], active: ActiveCompaction | None) -> tuple[list[Message], int]:
    """The messages a model still sees after ``active`` (all of them when it is None or its anchor is
    missing), and how many were compacted away."""
    if active is None:
        return list(messages), 0
    seen = 0
    for i, m in enumerate(messages):
        if m.run_id == active.keep_run and type(m) is not ToolResultMessage:
            if seen == active.keep_offset:
                return list(messages[i:]), i
            seen += 1
    return list(messages), 0


def anchor_of(messages: Sequence[Message], index: int) -> tuple[str, int]:
    """How a compaction record names the message at ``index``: its run and its position among that
    run's user and assistant messages (tool results can move when a transcript is repaired; these
    cannot)."""
    target = messages[index]
    run_id = target.run_id or ""
    offset = sum(1 for m in messages[:index] if m.run_id == run_id and type(m) is not ToolResultMessage)
    return run_id, offset


def _safe_cuts(messages: Sequence[Message], start: int, end: int) -> list[int]:
    """Indices in [start, end) where the context may begin: not between a call and its results."""
    cuts = []
    open_calls: set[str] = set()
    for i in range(len(messages)):
        m = messages[i]
        if start <= i < end and not open_calls and i > 0 and type(m) in (UserMessage, AssistantMessage):
            cuts.append(i)
        if type(m) is AssistantMessage and m.tool_calls:
            open_calls = {c.id for c in m.tool_calls}
        elif type(m) is ToolResultMessage:
            open_calls.discard(m.tool_call_id)
        else:
            open_calls = set() if type(m) is UserMessage else open_calls
    return cuts


def choose_cut(
    messages: Sequence[Message], token_counts: Sequence[int], keep_tokens: int, *, must_keep: int
) -> int | None:
    """The index where the kept context begins: the latest safe cut that keeps at least
    ``keep_tokens`` of the most recent messages (and everything from ``must_keep`` on); ``None``
    when no cut would remove anything."""
    kept = 0
    boundary = len(messages)
    while boundary > 0 and kept < keep_tokens:
        boundary -= 1
        kept += token_counts[boundary]
    boundary = min(boundary, must_keep)
    cuts = [c for c in _safe_cuts(messages, 1, boundary + 1)]
    return cuts[-1] if cuts else None


def render_messages(messages: Iterable[Message]) -> str:
    """The messages as a plain transcript for the summariser (long tool results shortened)."""
    lines = []
    for m in messages:
        if type(m) is UserMessage:
            lines.append(f"USER: {m.content}")
        elif type(m) is AssistantMessage:
            if m.content:
                lines.append(f"ASSISTANT: {m.content}")
            for c in m.tool_calls:
                lines.append(f"ASSISTANT CALLS {c.name}({c.arguments})")
        elif type(m) is ToolResultMessage:
            text = m.content
            if len(text) > _RESULT_CHARS:
                text = text[: _RESULT_CHARS // 2] + " […] " + text[-_RESULT_CHARS // 4 :]
            lines.append(f"TOOL {m.name}{' (error)' if m.is_error else ''}: {text}")
    return "\n".join(lines)


def compaction_prompt(previous_summary: str, messages: Sequence[Message], missing: Sequence[str] = ()) -> str:
    """The user message of a compaction call."""
    parts = []
    if previous_summary:
        parts.append(
            "Here is the summary written at the previous compaction. UPDATE it with the messages that "
            "follow — keep what still holds, change what changed, add what is new:\n\n"
            f"<previous_summary>\n{previous_summary}\n</previous_summary>"
        )
    else:
        parts.append("Summarise the conversation below.")
    parts.append(f"<messages>\n{render_messages(messages)}\n</messages>")
    if missing:
        parts.append(
            "Your previous attempt dropped these identifiers; the summary MUST contain each of them "
            "verbatim: " + ", ".join(missing)
        )
    return "\n\n".join(parts)


def extract_identifiers(messages: Iterable[Message], previous_summary: str = "") -> list[str]:
    """Identifiers that must survive a compaction of ``messages`` (most recent first, bounded)."""
    found: dict[str, None] = {}

    def add(values: Iterable[str]) -> None:
        for v in values:
            v = v.rstrip(".,;:!?")
            if len(v) >= 3 and v not in found:
                found[v] = None

    texts: list[tuple[str, bool]] = []
    for m in messages:
        if type(m) is UserMessage:
            texts.append((m.content, True))
        elif type(m) is AssistantMessage:
            texts.append((m.content, False))
            texts.extend((c.arguments, False) for c in m.tool_calls)
    for text, from_user in reversed(texts):
        # most specific first; each kind is taken out before the next looks, so a UUID's parts are
        # not also reported as hex strings or numbers
        for pattern in (_URL, _UUID, _TICKET, _PATH, _HEX):
            add(v for v in pattern.findall(text) if not v.replace(".", "").isdigit())
            text = pattern.sub(" ", text)
        if from_user:
            add(n for n in _NUMBER.findall(text) if sum(ch.isdigit() for ch in n) >= 3)
    fresh = list(found)[:_MAX_IDENTIFIERS]
    # Identifiers an earlier summary carried carry on first (they are the session's long-lived
    # facts), then the new ones, most recent first; each group is bounded, so summaries stay small.
    carried = [i for i in _identifiers_in(previous_summary) if i not in found][:_MAX_IDENTIFIERS]
    return carried + fresh


def _identifiers_in(summary: str) -> list[str]:
    marker = "## Identifiers"
    if marker not in summary:
        return []
    block = summary.split(marker, 1)[1]
    return [line.strip(" -*`") for line in block.splitlines() if line.strip(" -*`")]


def missing_identifiers(summary: str, identifiers: Iterable[str]) -> list[str]:
    return [i for i in identifiers if i not in summary]
