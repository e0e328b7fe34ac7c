"""Long-lived memory for a workspace agent: ``MEMORY.md``, daily notes in ``memory/``, and search.

- :class:`MemoryStore` reads and writes the files, and nothing else (see its module for the rules).
- :class:`MemoryIndex` searches them: SQLite FTS5 with BM25, refreshed incrementally before each
  search; with an :class:`Embedder`, hybrid ranking by reciprocal-rank fusion.
- :func:`memory_tools` gives the model ``memory_write`` and ``memory_search``;
  :func:`memory_context` gives the loop a ``## Relevant memory`` block for a message.
"""

from loopwright.memory._db import RefreshStats, require_fts5
from loopwright.memory._embeddings import Embedder, OpenAICompatibleEmbedder, reciprocal_rank_fusion
from loopwright.memory._index import MemoryHit, MemoryIndex, Source, fts_query
from loopwright.memory._store import MEMORY_FILE, NOTES_DIR, MemoryStore, WriteMode
from loopwright.memory._tools import memory_context, memory_search_tool, memory_tools, memory_write_tool

__all__ = [
    "MEMORY_FILE",
    "NOTES_DIR",
    "Embedder",
    "MemoryHit",
    "MemoryIndex",
    "MemoryStore",
    "OpenAICompatibleEmbedder",
    "RefreshStats",
    "Source",
    "WriteMode",
    "fts_query",
    "memory_context",
    "memory_search_tool",
    "memory_tools",
    "memory_write_tool",
    "reciprocal_rank_fusion",
    "require_fts5",
]
