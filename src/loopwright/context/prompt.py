"""The system prompt as ordered layers: stable ones first, dynamic ones last.

Keeping the stable prefix (identity, scope, tools) identical across runs lets providers' prompt
caches hold; memory and the current time change and therefore come last.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

from loopwright.context.registry import ContextLayer
from loopwright.models.base import ToolDefinition

__all__ = [
    "DEFAULT_IDENTITY",
    "compose_system_prompt",
    "dynamic_layers",
    "stable_layers",
    "tools_layer",
]

DEFAULT_IDENTITY = "You are a helpful assistant. Answer clearly and use the tools you have when they help."


def stable_layers(
    *, identity: str, tools: Sequence[ToolDefinition], workspace: Path | None
) -> list[ContextLayer]:
    """The layers that stay the same from run to run: identity, scope, tools."""
    layers = [ContextLayer(name="identity", content=identity.strip() or DEFAULT_IDENTITY, priority=10)]
    if workspace is not None:
        layers.append(
            ContextLayer(
                name="scope",
                content=(
                    "## Scope\nYou work in a workspace folder. File paths are relative to it; "
                    "tools cannot reach anything outside it."
                ),
                priority=20,
            )
        )
    layer = tools_layer(tools)
    if layer is not None:
        layers.append(layer)
    return layers


def tools_layer(tools: Sequence[ToolDefinition]) -> ContextLayer | None:
    """The ``## Tools`` list of the stable prefix (None without tools)."""
    if not tools:
        return None
    lines = "\n".join(f"- {t.name}: {_first_line(t.description)}" for t in tools)
    return ContextLayer(name="tools", content=f"## Tools\n{lines}", priority=30)


def dynamic_layers(
    *, memory: str, now: datetime, summary: str = "", recalled: str = ""
) -> list[ContextLayer]:
    """The layers that change: the summary of compacted messages, memory and the current time (last,
    to keep the cached prefix)."""
    layers = []
    if summary:
        layers.append(
            ContextLayer(
                name="summary",
                content=f"## Summary of the earlier conversation\n{summary}",
                priority=90,
                stable=False,
            )
        )
    if memory.strip():
        layers.append(
            ContextLayer(
                name="memory", content=f"## Memory (MEMORY.md)\n{memory.strip()}", priority=100, stable=False
            )
        )
    if recalled:
        layers.append(ContextLayer(name="recalled", content=recalled, priority=110, stable=False))
    layers.append(
        ContextLayer(
            name="datetime",
            content=f"Current date and time: {_minute(now)}",
            priority=200,
            stable=False,
        )
    )
    return layers


_minutes: dict[tuple[int, str], str] = {}


def _minute(now: datetime) -> str:
    """``now`` to the minute, formatted once per minute (this runs for every run)."""
    key = (int(now.timestamp()) // 60, str(now.tzinfo))
    text = _minutes.get(key)
    if text is None:
        _minutes.clear()
        text = _minutes[key] = now.strftime("%Y-%m-%d %H:%M %Z").strip()
    return text


def compose_system_prompt(layers: Iterable[ContextLayer]) -> str:
    return "\n\n".join(layer.content for layer in sorted(layers, key=lambda la: la.priority) if layer.content)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""
