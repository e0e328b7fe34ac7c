"""Token accounting: how many tokens a conversation costs, counted or estimated.

Two counters implement :class:`TokenCounter`:

- :class:`CharCounter` — four characters per token, everywhere, with no dependency.
- :class:`BpeCounter` — the exact byte-pair encoding of OpenAI's models (``o200k_base``,
  ``cl100k_base``), from the optional extra ``loopwright[tokens]``. That extra installs ``toktok-rs``,
  whose wheels have the vocabularies compiled in: nothing is downloaded, ever (``tiktoken`` itself
  fetches its vocabularies from the internet on first use).

:func:`counter_for` picks the exact counter for ``openai:*`` and ``openai-responses:*`` models when
the extra is installed, and the character counter otherwise; it never fails.

Both counters charge the same framing on top of the text, measured against OpenAI's reported
prompt tokens (``bench/token_estimate.py``): :data:`MESSAGE_TOKENS` per message, :data:`TOOL_CALL_TOKENS`
per tool call plus :data:`PARALLEL_CALL_TOKENS` per call when one message makes several, and
:data:`MEDIA_TOKENS` per image or audio part.

:class:`HybridEstimate` is the estimate the loop checks against the context window: the input
tokens the provider last reported, plus a count of only the messages added since. Per-message counts
are cached, so a step costs in proportion to the new messages, not to the history.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from loopwright.errors import ConfigError
from loopwright.messages import AssistantMessage, Message
from loopwright.models.base import ToolDefinition

__all__ = [
    "CHARS_PER_TOKEN",
    "MEDIA_TOKENS",
    "MESSAGE_TOKENS",
    "PARALLEL_CALL_TOKENS",
    "REQUEST_TOKENS",
    "TOOLS_TOKENS",
    "TOOL_CALL_TOKENS",
    "BpeCounter",
    "CharCounter",
    "Encoding",
    "HybridEstimate",
    "TokenCounter",
    "count_tool_definitions",
    "counter_for",
    "encoding_for",
    "exact_counting_available",
    "framing_tokens",
    "media_parts",
    "message_texts",
    "tool_definitions_text",
]

CHARS_PER_TOKEN = 4
MESSAGE_TOKENS = 4
"""Per message: the role and the markers around it (OpenAI: 3, plus 1 for the role)."""
TOOL_CALL_TOKENS = 7
"""Per tool call, on top of its name and arguments."""
PARALLEL_CALL_TOKENS = 10
"""Per tool call again when one message makes several (OpenAI wraps them in one parallel call)."""
REQUEST_TOKENS = 3
"""Per request: the start of the reply the model is primed with."""
TOOLS_TOKENS = 9
"""Per request with tools: the wrapping of the tool definitions, on top of their text."""
MEDIA_TOKENS = 250
"""Per image or audio part, whatever its size."""

Encoding = Literal["o200k_base", "cl100k_base"]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text and messages. Counts are deterministic: same input, same count."""

    @property
    def name(self) -> str:
        """What counts: ``"chars/4"`` or the encoding's name."""
        ...

    def count_text(self, text: str) -> int: ...

    def count_message(self, message: Message) -> int:
        """The message's text (content, tool calls' names and arguments, thinking) plus its framing."""
        ...

    def count_messages(self, messages: Sequence[Message]) -> list[int]:
        """``[count_message(m) for m in messages]``, in one batch where that is cheaper."""
        ...


def message_texts(message: Message) -> list[str]:
    """The texts of a message that reach the model: content, each tool call's name and arguments,
    each thinking block's text (encrypted or redacted reasoning is opaque and not counted)."""
    texts = [message.content]
    if type(message) is AssistantMessage:
        for call in message.tool_calls:
            texts.append(call.name)
            texts.append(call.arguments)
        for block in message.thinking:
            texts.append(block.text)
    return texts


def media_parts(message: Message) -> int:
    """How many image or audio parts the message carries.

    Messages have no such parts yet. When they do, count them here: every counter charges
    :data:`MEDIA_TOKENS` for each through :func:`framing_tokens`."""
    return 0


def framing_tokens(message: Message) -> int:
    """The tokens a message costs beyond its text: role markers, tool-call wrapping, media parts."""
    n = MESSAGE_TOKENS
    if type(message) is AssistantMessage and message.tool_calls:
        calls = len(message.tool_calls)
        n += calls * (TOOL_CALL_TOKENS + (PARALLEL_CALL_TOKENS if calls > 1 else 0))
    media = media_parts(message)
    if media:
        n += media * MEDIA_TOKENS
    return n


def tool_definitions_text(tools: Sequence[ToolDefinition]) -> str:
    """The tool definitions as OpenAI shows them to the model (a TypeScript-like namespace): the
    text counted for them. Other providers word them differently; an anchor absorbs the difference."""
    parts = ["namespace functions {\n\n"]
    for tool in tools:
        if tool.description:
            parts.append(f"// {tool.description}\n")
        params = tool.parameters
        if params.get("properties"):
            fields = _ts_fields(params, params.get("$defs") or params.get("definitions") or {}, 0)
            parts.append(f"type {tool.name} = (_: {{\n{fields}}}) => any;\n\n")
        else:
            parts.append(f"type {tool.name} = () => any;\n\n")
    parts.append("} // namespace functions")
    return "".join(parts)


def count_tool_definitions(counter: TokenCounter, tools: Sequence[ToolDefinition]) -> int:
    """What a request's tool definitions cost (0 without tools)."""
    return counter.count_text(tool_definitions_text(tools)) + TOOLS_TOKENS if tools else 0


_TS_SCALARS = {
    "integer": "number",
    "number": "number",
    "string": "string",
    "boolean": "boolean",
    "null": "null",
}


def _ts_fields(schema: dict[str, Any], defs: dict[str, Any], depth: int) -> str:
    required = set(schema.get("required") or ())
    lines = []
    for name, prop in (schema.get("properties") or {}).items():
        if isinstance(prop, dict) and prop.get("description"):
            lines.append(f"// {prop['description']}\n")
        optional = "" if name in required else "?"
        lines.append(f"{name}{optional}: {_ts_type(prop, defs, depth)},\n")
    return "".join(lines)


def _ts_type(schema: Any, defs: dict[str, Any], depth: int) -> str:
    if not isinstance(schema, dict) or depth > 8:
        return "any"
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _ts_type(defs.get(ref.rsplit("/", 1)[-1]), defs, depth + 1)
    if "enum" in schema:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(_ts_type(s, defs, depth + 1) for s in schema[key])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_ts_type({**schema, "type": k}, defs, depth + 1) for k in kind)
    if kind == "array":
        return f"{_ts_type(schema.get('items'), defs, depth + 1)}[]"
    if kind == "object" and schema.get("properties"):
        return f"{{\n{_ts_fields(schema, defs, depth + 1)}}}"
    return _TS_SCALARS.get(str(kind), "any")


class CharCounter:
    """Four characters per token (rounded up per message), plus the framing of each message."""

    name = "chars/4"

    def count_text(self, text: str) -> int:
        return -(-len(text) // CHARS_PER_TOKEN)

    def count_message(self, message: Message) -> int:
        if type(message) is AssistantMessage and (message.tool_calls or message.thinking):
            chars = sum(len(t) for t in message_texts(message))
        else:
            chars = len(message.content)
        return -(-chars // CHARS_PER_TOKEN) + framing_tokens(message)

    def count_messages(self, messages: Sequence[Message]) -> list[int]:
        count = self.count_message
        return [count(m) for m in messages]


def exact_counting_available() -> bool:
    """True when the ``tokens`` extra (``toktok-rs``) is installed."""
    return importlib.util.find_spec("toktok") is not None


class BpeCounter:
    """Exact token counts with OpenAI's byte-pair encodings (needs ``loopwright[tokens]``).

    The vocabulary loads on first use (0.3-0.7 s and about 60 MB, once per process). An async
    program calls :meth:`load` from a worker thread at startup, so the first count does not hold up
    the event loop."""

    def __init__(self, encoding: Encoding = "o200k_base") -> None:
        if encoding not in ("o200k_base", "cl100k_base"):
            raise ConfigError(f"unknown encoding {encoding!r}: use 'o200k_base' or 'cl100k_base'")
        try:
            toktok = importlib.import_module("toktok")  # untyped: typed at the boundary below
        except ImportError as exc:
            raise ConfigError(
                "exact token counts need the optional extra: pip install 'loopwright[tokens]'"
            ) from exc
        self._batch_count: Callable[..., list[int]] = toktok.batch_count
        self.encoding: Encoding = encoding

    @property
    def name(self) -> str:
        return self.encoding

    def __repr__(self) -> str:
        return f"BpeCounter({self.encoding!r})"

    def load(self) -> None:
        """Load the vocabulary now (it otherwise loads at the first count)."""
        self._count([""])

    def count_text(self, text: str) -> int:
        return self._count([text])[0] if text else 0

    def count_message(self, message: Message) -> int:
        return sum(self._count([t for t in message_texts(message) if t])) + framing_tokens(message)

    def count_messages(self, messages: Sequence[Message]) -> list[int]:
        # One call for the whole batch: each call costs ~25 µs on its own, counting costs ~1 µs
        # per short text.
        texts: list[str] = []
        owners: list[int] = []
        for i, m in enumerate(messages):
            for t in message_texts(m):
                if t:
                    texts.append(t)
                    owners.append(i)
        counts = [framing_tokens(m) for m in messages]
        for i, n in zip(owners, self._count(texts), strict=True):
            counts[i] += n
        return counts

    def _count(self, texts: list[str]) -> list[int]:
        try:
            return self._batch_count(texts, self.encoding, threads=1)
        except UnicodeEncodeError:
            # Lone surrogates cannot be UTF-8: pair what pairs, replace the rest (as tiktoken does).
            clean = [t.encode("utf-16", "surrogatepass").decode("utf-16", "replace") for t in texts]
            return self._batch_count(clean, self.encoding, threads=1)


_CL100K_PREFIXES = ("gpt-4-", "gpt-3.5", "gpt-35", "text-embedding-", "davinci-002", "babbage-002")
_COUNTERS: dict[str, TokenCounter] = {}


def encoding_for(model_name: str) -> Encoding | None:
    """The encoding of an ``openai:MODEL`` or ``openai-responses:MODEL`` name; None for others.

    ``cl100k_base`` for GPT-4 (not 4o/4.1/4.5), GPT-3.5 and the embedding models; ``o200k_base`` for
    everything else (GPT-4o, GPT-4.1, GPT-5, the o-series, and OpenAI models yet to come)."""
    provider, sep, model = model_name.partition(":")
    if not sep or provider not in ("openai", "openai-responses"):
        return None
    model = model.lower().removeprefix("ft:")
    if model == "gpt-4" or model.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return "o200k_base"


def counter_for(model_name: str) -> TokenCounter:
    """The best counter for a model (``"openai:gpt-4o"``): exact for OpenAI models when the ``tokens``
    extra is installed, four characters per token otherwise. Never raises; counters are shared."""
    encoding = encoding_for(model_name)
    key = encoding if encoding is not None and exact_counting_available() else CharCounter.name
    counter = _COUNTERS.get(key)
    if counter is None:
        counter = CharCounter()
        if encoding is not None and key == encoding:
            try:
                counter = BpeCounter(encoding)
            except ConfigError:  # found but not importable (a broken install): count characters
                key = CharCounter.name
        counter = _COUNTERS.setdefault(key, counter)
    return counter


class HybridEstimate:
    """The tokens the next request will cost: the provider's last reported input tokens (the
    *anchor*) plus a count of the messages after it; with no anchor, a count of everything.

    - :meth:`record_actual` sets the anchor after each model call: the reported input tokens and the
      index of the last message that request contained.
    - :meth:`estimate` returns ``anchor + counts of messages[index + 1:]``; without an anchor, the
      count of everything: system prompt, tool definitions, all messages and the request framing.
    - :meth:`reset` drops the anchor. Call it when messages are replaced (a compaction) and the
      replaced range includes or precedes the anchor's index, or when the system prompt changes:
      the provider's count no longer describes what is sent. ``replaced(start)`` does the index
      check for you. An anchor beyond the end of the messages passed is stale: :meth:`estimate`
      drops it.

    Each message's count is cached by identity (the message is kept alive while cached), so a step
    counts only the messages it has not seen and sums only those after the anchor: its cost grows
    with the new messages, not with the history. Messages are values; one that is changed in place
    keeps its old count.
    """

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self.counter: TokenCounter = counter if counter is not None else CharCounter()
        self._anchor_tokens = 0
        self._anchor_index = -1
        self._counts: dict[int, tuple[Message, int]] = {}
        # The unanchored running total: (list, its length, its last message, total of its messages).
        self._running: tuple[Sequence[Message], int, Message | None, int] | None = None
        self._system: tuple[str, int] = ("", 0)
        self._tools: tuple[Sequence[ToolDefinition], int] = ((), 0)

    @property
    def anchor(self) -> tuple[int, int] | None:
        """``(input_tokens, entry_index)`` of the last recorded call, or None."""
        return (self._anchor_tokens, self._anchor_index) if self._anchor_index >= 0 else None

    def record_actual(self, input_tokens: int, entry_index: int) -> None:
        """The provider reported ``input_tokens`` for a request whose messages ended at
        ``entry_index``. Pass the whole prompt: OpenAI's prompt tokens include cached ones,
        Anthropic's input tokens do not (add its cache read and cache write tokens). A report of
        zero tokens (a provider that does not count) is ignored."""
        if input_tokens > 0 and entry_index >= 0:
            self._anchor_tokens = input_tokens
            self._anchor_index = entry_index

    def reset(self) -> None:
        """Drop the anchor (message counts stay cached: they do not change)."""
        self._anchor_tokens = 0
        self._anchor_index = -1

    def replaced(self, start: int) -> None:
        """Messages from ``start`` on were replaced, removed or shifted: reset when that range
        includes or precedes the anchor's index (changes after it leave the anchor valid)."""
        if 0 <= start <= self._anchor_index:
            self.reset()

    def estimate(
        self, system: str, messages: Sequence[Message], *, tools: Sequence[ToolDefinition] = ()
    ) -> int:
        """The tokens of a request sending ``system``, ``messages`` and ``tools`` (the tools and
        the system prompt only count while there is no anchor: an anchor includes them)."""
        index = self._anchor_index
        if index >= len(messages):
            self.reset()
            index = -1
        if len(self._counts) > 2 * len(messages) + 1024:
            self._forget_all_but(messages)  # messages no longer in the conversation (a compaction)
        if index >= 0:
            return self._anchor_tokens + self._sum(messages, index + 1)
        return REQUEST_TOKENS + self._fixed(system, tools) + self._total(messages)

    def message_tokens(self, message: Message) -> int:
        """One message's count (cached)."""
        return self.message_counts((message,))[0]

    def message_counts(self, messages: Sequence[Message]) -> list[int]:
        """Each message's count (cached; the ones not seen yet are counted in one batch), for
        choosing where to cut at a compaction."""
        counts = self._counts
        out: list[int] = []
        missing: list[int] = []
        for i, m in enumerate(messages):
            cached = counts.get(id(m))
            if cached is not None and cached[0] is m:
                out.append(cached[1])
            else:
                out.append(0)
                missing.append(i)
        if missing:
            fresh = self.counter.count_messages([messages[i] for i in missing])
            for i, n in zip(missing, fresh, strict=True):
                out[i] = n
                counts[id(messages[i])] = (messages[i], n)
        return out

    # --- internals ------------------------------------------------------------------------------

    def _sum(self, messages: Sequence[Message], start: int) -> int:
        counts = self._counts
        total = 0
        missing: list[Message] = []
        for m in messages[start:]:
            cached = counts.get(id(m))
            if cached is not None and cached[0] is m:
                total += cached[1]
            else:
                missing.append(m)
        if missing:
            total += self._count_missing(missing)
        return total

    def _total(self, messages: Sequence[Message]) -> int:
        """The sum over all messages; O(new) when ``messages`` is the same list as last time, grown
        by appends."""
        running = self._running
        n = len(messages)
        if running is not None:
            seq, length, last, total = running
            if seq is messages and length <= n and (length == 0 or messages[length - 1] is last):
                if length < n:
                    total += self._sum(messages, length)
                self._running = (messages, n, messages[-1] if n else None, total)
                return total
        total = self._sum(messages, 0)
        self._running = (messages, n, messages[-1] if n else None, total)
        return total

    def _fixed(self, system: str, tools: Sequence[ToolDefinition]) -> int:
        """System prompt and tool definitions, counted once per distinct value."""
        if self._system[0] != system:
            self._system = (system, self.counter.count_text(system) if system else 0)
        if self._tools[0] is not tools:
            self._tools = (tools, count_tool_definitions(self.counter, tools))
        n = self._system[1] + self._tools[1]
        if system and not tools:  # with tools, the system prompt shares their message
            n += MESSAGE_TOKENS
        return n

    def _count_missing(self, missing: list[Message]) -> int:
        fresh = self.counter.count_messages(missing)
        counts = self._counts
        for m, c in zip(missing, fresh, strict=True):
            counts[id(m)] = (m, c)
        return sum(fresh)

    def _forget_all_but(self, messages: Sequence[Message]) -> None:
        counts = self._counts
        self._counts = {id(m): counts[id(m)] for m in messages if id(m) in counts}
