"""One transcript line <-> one message. Compact JSON, omitting empty fields.

The line format is the specification's (``role``, ``content``, ``tool_calls``, ``tool_call_id``,
``timestamp``) plus ``run_id`` on every line and a few optional fields; see docs/transcript.md.
Lines that are not messages carry a ``type`` (for example ``"compaction"``) and are kept as
:class:`TranscriptRecord`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from loopwright.messages import (
    AssistantMessage,
    Message,
    Thinking,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = ["Entry", "TranscriptRecord", "decode_dict", "decode_line", "encode_entry", "entry_to_dict"]

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_dumps_ascii = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptRecord:
    """A transcript line that is not a message (compaction, notes written by later features)."""

    type: str
    data: dict[str, Any]
    run_id: str | None = None
    timestamp: str | None = None


Entry = Message | TranscriptRecord


def entry_to_dict(entry: Entry) -> dict[str, Any]:
    if type(entry) is TranscriptRecord:
        d: dict[str, Any] = {"type": entry.type, **entry.data}
    elif type(entry) is UserMessage:
        d = {"role": "user", "content": entry.content}
        if entry.meta:
            d["meta"] = entry.meta
    elif type(entry) is AssistantMessage:
        d = {"role": "assistant", "content": entry.content}
        if entry.tool_calls:
            d["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in entry.tool_calls
            ]
        if entry.thinking:
            d["thinking"] = [_thinking_dict(t) for t in entry.thinking]
        if entry.model:
            d["model"] = entry.model
        if entry.usage is not None:
            d["usage"] = entry.usage.to_dict()
        if entry.finish_reason:
            d["finish_reason"] = entry.finish_reason
    elif type(entry) is ToolResultMessage:
        d = {"role": "tool", "tool_call_id": entry.tool_call_id, "name": entry.name, "content": entry.content}
        if entry.is_error:
            d["is_error"] = True
        if entry.synthetic:
            d["synthetic"] = True
    else:  # pragma: no cover - the union is closed
        raise TypeError(f"not a transcript entry: {entry!r}")
    if entry.run_id is not None:
        d["run_id"] = entry.run_id
    if entry.timestamp is not None:
        d["timestamp"] = entry.timestamp
    return d


def _thinking_dict(t: Thinking) -> dict[str, Any]:
    d: dict[str, Any] = {"text": t.text}
    if t.signature:
        d["signature"] = t.signature
    if t.redacted:
        d["redacted"] = t.redacted
    if t.provider:
        d["provider"] = t.provider
    return d


def encode_entry(entry: Entry) -> str:
    """The JSONL line for ``entry``, with its trailing newline. Text that is not valid Unicode (a lone
    surrogate a model sent) is written escaped, so any entry can be stored."""
    data = entry_to_dict(entry)
    line = _dumps(data)
    if not line.isascii():
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:
            line = _dumps_ascii(data)
    return line + "\n"


def decode_line(line: str) -> Entry:
    """Parse one transcript line; raise ``ValueError`` with a reason if it is not a valid entry."""
    data = json.loads(line)
    if not isinstance(data, dict):
        raise ValueError("line is not a JSON object")
    return decode_dict(data)


def decode_dict(data: dict[str, Any]) -> Entry:
    run_id = _opt_str(data, "run_id")
    timestamp = _opt_str(data, "timestamp")
    role = data.get("role")
    if role is None:
        kind = data.get("type")
        if not isinstance(kind, str):
            raise ValueError("entry has neither 'role' nor 'type'")
        rest = {k: v for k, v in data.items() if k not in ("type", "run_id", "timestamp")}
        return TranscriptRecord(type=kind, data=rest, run_id=run_id, timestamp=timestamp)
    content = data.get("content", "")
    if not isinstance(content, str):
        raise ValueError("'content' must be a string")
    if role == "user":
        meta = data.get("meta")
        return UserMessage(
            content=content, run_id=run_id, timestamp=timestamp, meta=meta if isinstance(meta, dict) else None
        )
    if role == "assistant":
        calls = tuple(
            ToolCall(id=str(c["id"]), name=str(c["name"]), arguments=_args_text(c.get("arguments", "{}")))
            for c in data.get("tool_calls") or ()
        )
        thinking = tuple(
            Thinking(
                text=str(t.get("text", "")),
                signature=t.get("signature"),
                redacted=t.get("redacted"),
                provider=t.get("provider"),
            )
            for t in data.get("thinking") or ()
        )
        usage = data.get("usage")
        return AssistantMessage(
            content=content,
            tool_calls=calls,
            thinking=thinking,
            model=_opt_str(data, "model"),
            usage=Usage.from_dict(usage) if isinstance(usage, dict) else None,
            finish_reason=_opt_str(data, "finish_reason"),
            run_id=run_id,
            timestamp=timestamp,
        )
    if role == "tool":
        call_id = data.get("tool_call_id")
        if not isinstance(call_id, str):
            raise ValueError("tool entry without 'tool_call_id'")
        return ToolResultMessage(
            tool_call_id=call_id,
            name=str(data.get("name", "")),
            content=content,
            is_error=bool(data.get("is_error", False)),
            synthetic=bool(data.get("synthetic", False)),
            run_id=run_id,
            timestamp=timestamp,
        )
    raise ValueError(f"unknown role {role!r}")


def _args_text(value: Any) -> str:
    # Written as the raw string the model produced; accept an object from hand-written transcripts.
    return value if isinstance(value, str) else _dumps(value)


def _opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None
