"""Token estimates: four characters per token (exact tokenizers come with context management)."""

from __future__ import annotations

from collections.abc import Iterable

from loopwright.messages import AssistantMessage, Message

__all__ = ["CHARS_PER_TOKEN", "estimate_tokens", "message_chars"]

CHARS_PER_TOKEN = 4
_PER_MESSAGE_OVERHEAD = 4  # role markers and separators, in tokens


def message_chars(m: Message) -> int:
    n = len(m.content)
    if type(m) is AssistantMessage:
        for c in m.tool_calls:
            n += len(c.name) + len(c.arguments)
        for t in m.thinking:
            n += len(t.text)
    return n


def estimate_tokens(system: str, messages: Iterable[Message]) -> int:
    chars = len(system)
    count = 0
    for m in messages:
        chars += message_chars(m)
        count += 1
    return chars // CHARS_PER_TOKEN + count * _PER_MESSAGE_OVERHEAD
