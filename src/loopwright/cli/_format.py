"""Short human forms of durations, sizes, token counts, timestamps and tool arguments."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from loopwright.cli._term import clean
from loopwright.messages import Usage

__all__ = ["arguments", "count", "duration", "epoch_time", "local_time", "shorten", "size", "tokens"]

_ARGUMENTS_CHARS = 120


def duration(ms: float) -> str:
    """``0.4 ms``, ``12 ms``, ``1.25 s``, ``2m 05s``."""
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m {rest:02d}s"


def size(n: int) -> str:
    """``512 B``, ``1.2 KB``, ``3.4 MB``."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


def count(n: int, noun: str) -> str:
    """``1 step``, ``3 steps``, ``1,204 tokens``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def tokens(usage: Usage) -> str:
    """``1,234 tokens (1,100 in, 134 out)``."""
    total = count(usage.total_tokens, "token")
    if not usage.total_tokens:
        return total
    return f"{total} ({usage.input_tokens:,} in, {usage.output_tokens:,} out)"


def shorten(value: str, limit: int) -> str:
    """``value`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(clean(value).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def arguments(value: dict[str, Any] | str, limit: int = _ARGUMENTS_CHARS) -> str:
    """Tool-call arguments as compact JSON on one line, cut to ``limit`` characters."""
    if isinstance(value, str):  # arguments that were not valid JSON, shown as the model sent them
        return shorten(value, limit)
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return shorten(text, limit)


def local_time(iso: str) -> str:
    """An ISO 8601 timestamp as local ``YYYY-MM-DD HH:MM`` (the text itself if it does not parse)."""
    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        return clean(iso)
    if moment.tzinfo is not None:
        moment = moment.astimezone()
    return moment.strftime("%Y-%m-%d %H:%M")


def epoch_time(timestamp: float) -> str:
    """A Unix timestamp as local ``YYYY-MM-DD HH:MM``."""
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")
