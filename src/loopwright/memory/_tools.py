"""Memory for the loop: the ``memory_write`` and ``memory_search`` tools, and :func:`memory_context`.

The tools are ordinary :class:`~loopwright.tools.FunctionTool` objects bound to one workspace. They
take no paths: ``memory_write`` reaches only ``MEMORY.md`` and today's ``memory/YYYY-MM-DD.md`` through
:class:`~loopwright.memory.MemoryStore`, so whatever the model sends, nothing else can be written.
Keyword search and all writes are sync functions, so they run in the worker pool.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from loopwright._threads import run_blocking
from loopwright.errors import ConfigError
from loopwright.memory._embeddings import Embedder
from loopwright.memory._index import MemoryHit, MemoryIndex, Source
from loopwright.memory._store import MEMORY_FILE, NOTES_DIR, MemoryStore
from loopwright.tools._function import FunctionTool, tool
from loopwright.tools._scope import ScopeError
from loopwright.tools.base import Tool

__all__ = ["memory_context", "memory_search_tool", "memory_tools", "memory_write_tool"]

log = logging.getLogger("loopwright")

_MAX_NOTE_CHARS = 20_000
_MAX_RESULT_TEXT = 500
_CONTEXT_HEADING = "## Relevant memory"
_CONTEXT_TEXT = 300

_SEARCH_DOC = """Search your memory (MEMORY.md and the daily notes in memory/) for earlier notes.

    Results are "path:lines (date): text", best match first.

    Args:
        query: Words to look for, e.g. "deploy staging database".
        k: How many results to return.
    """


def memory_write_tool(
    workspace_root: Path | str, *, clock: Callable[[], datetime] | None = None
) -> FunctionTool[..., str]:
    """The ``memory_write`` tool for the workspace at ``workspace_root``."""
    store = MemoryStore(workspace_root, clock=clock)

    @tool
    def memory_write(
        text: Annotated[str, Field(min_length=1, max_length=_MAX_NOTE_CHARS)],
        where: Literal["daily", "memory"] = "daily",
        section: str | None = None,
        replace: bool = False,
    ) -> str:
        """Save something worth remembering in later sessions: what happened, decisions and progress to
        today's log (where="daily", memory/YYYY-MM-DD.md), lasting facts and preferences to MEMORY.md
        (where="memory"), which is read into every session.

        Args:
            text: What to remember: a sentence or a few short lines of markdown.
            where: Where to write: "daily" for today's log, "memory" for MEMORY.md.
            section: With where="memory": the "## section" of MEMORY.md to write under, e.g.
                "Preferences" (created if missing).
            replace: With where="memory" and a section: replace that section's text instead of adding to it.
        """
        if where == "daily":
            if section is not None or replace:
                raise ValueError('section and replace apply to where="memory" only')
            path = store.append_note(text)
            return f"saved to {NOTES_DIR}/{path.name}"
        if replace and section is None:
            raise ValueError("replace=true needs the section to replace")
        store.write_memory(text, mode="replace_section" if replace else "append", section=section)
        if section is None:
            return f"added to {MEMORY_FILE}"
        return f"{'replaced' if replace else 'added to'} section {section.strip()!r} of {MEMORY_FILE}"

    return memory_write


def memory_search_tool(
    workspace_root: Path | str, *, embedder: Embedder | None = None
) -> FunctionTool[..., Any]:
    """The ``memory_search`` tool: keyword search (BM25), or hybrid when ``embedder`` is given.

    If the embedder fails, the tool answers from keyword search and says so."""
    index = MemoryIndex(workspace_root, embedder=embedder)
    func: Callable[..., Any]
    if embedder is None:

        def memory_search(query: str, k: Annotated[int, Field(ge=1, le=20)] = 5) -> str:
            return _results(query, index.search(query, k))

        func = memory_search
    else:

        async def memory_hybrid_search(query: str, k: Annotated[int, Field(ge=1, le=20)] = 5) -> str:
            try:
                return _results(query, await index.hybrid_search(query, k))
            except Exception as exc:  # any embedder failure: keyword search still answers
                hits = await run_blocking(index.search, query, k)
                return f"(keyword search only; embeddings failed: {exc})\n" + _results(query, hits)

        func = memory_hybrid_search
    func.__doc__ = _SEARCH_DOC
    return FunctionTool(func, name="memory_search", idempotent=True)


def memory_tools(
    workspace_root: Path | str,
    *,
    embedder: Embedder | None = None,
    clock: Callable[[], datetime] | None = None,
) -> list[Tool]:
    """``memory_write`` and ``memory_search`` bound to the workspace at ``workspace_root``."""
    return [
        memory_write_tool(workspace_root, clock=clock),
        memory_search_tool(workspace_root, embedder=embedder),
    ]


async def memory_context(
    root: Path | str,
    query: str,
    k: int = 5,
    *,
    embedder: Embedder | None = None,
    source: Source = "all",
    max_chars: int = 2000,
) -> str:
    """A ``## Relevant memory`` block of the best ``k`` memory hits for ``query``; ``""`` when none.

    Meant for the prompt of a run: ``query`` is the user's message. It never raises for a broken or
    missing index (the problem is logged and the block is empty); a workspace with no memory files at
    all costs two ``lstat`` calls and no database. With ``embedder`` the ranking is hybrid, falling back
    to keyword search if the embedder fails. ``source="daily"`` leaves out MEMORY.md (when the prompt
    already holds all of it). The block is at most about ``max_chars`` characters.
    """
    index = MemoryIndex(root, embedder=embedder)
    try:
        if embedder is None:
            hits = await run_blocking(_keyword_hits, index, query, k, source)
        else:
            hits = await _hybrid_hits(index, query, k, source)
    except (ConfigError, ScopeError, sqlite3.Error, OSError, ValueError) as exc:
        log.warning("memory search failed, continuing without relevant memory: %s", exc)
        return ""
    return _context_block(hits, max_chars)


def _keyword_hits(index: MemoryIndex, query: str, k: int, source: Source) -> list[MemoryHit]:
    if not _has_memory(index.root):
        return []
    return index.search(query, k, source=source)


async def _hybrid_hits(index: MemoryIndex, query: str, k: int, source: Source) -> list[MemoryHit]:
    if not await run_blocking(_has_memory, index.root):
        return []
    try:
        return await index.hybrid_search(query, k, source=source)
    except Exception as exc:  # any embedder failure: keyword search still answers
        log.warning("memory embeddings failed, using keyword search: %s", exc)
        return await run_blocking(index.search, query, k, source=source)


def _has_memory(root: Path) -> bool:
    return os.path.lexists(root / MEMORY_FILE) or os.path.lexists(root / NOTES_DIR)


def _results(query: str, hits: list[MemoryHit]) -> str:
    if not hits:
        return f"no memory matches for {query!r}"
    return "\n".join(hit.format(_MAX_RESULT_TEXT) for hit in hits)


def _context_block(hits: list[MemoryHit], max_chars: int) -> str:
    lines = [_CONTEXT_HEADING]
    size = len(_CONTEXT_HEADING)
    for hit in hits:
        line = f"- {hit.format(_CONTEXT_TEXT)}"
        if size + len(line) + 1 > max_chars and len(lines) > 1:
            break
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) if len(lines) > 1 else ""
