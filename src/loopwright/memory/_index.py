"""Searching the memory files: keyword (SQLite FTS5, BM25) and hybrid (plus embeddings, fused by rank).

Every search first refreshes the index (:mod:`loopwright.memory._db`), so results reflect the files on
disk. User text never reaches FTS5 as syntax: :func:`fts_query` keeps only its words, each quoted,
joined with ``OR``, so quotes, ``-``, ``*``, ``:``, parentheses and the words ``AND``/``NOT``/``NEAR``
are plain text. BM25 weighs a chunk's text fully and its heading at half; equal scores go to the newer
note.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import operator
import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from loopwright._threads import run_blocking
from loopwright.memory._db import DB_NAME, RefreshStats, embedding_text, open_db, refresh, require_fts5
from loopwright.memory._embeddings import (
    Embedder,
    pack_vector,
    reciprocal_rank_fusion,
    unit_vector,
    unpack_vector,
)
from loopwright.memory._store import MEMORY_FILE, STATE_DIR, state_dir

__all__ = ["MemoryHit", "MemoryIndex", "Source", "fts_query"]

Source = Literal["all", "daily", "memory"]
"""Which files a search covers: everything, the daily notes only, or ``MEMORY.md`` only."""

_TERM_RE = re.compile(r"[^\W_]+")
_MAX_TERMS = 64
_MAX_K = 100
_CANDIDATES = 50
_EMBED_BATCH = 64
_BULLET_RE = re.compile(r"^[-*+] ")
_SOURCE_FILTER = {
    "all": "",
    "daily": f"AND c.path != '{MEMORY_FILE}'",
    "memory": f"AND c.path = '{MEMORY_FILE}'",
}
_KEYWORD_SQL = (
    "SELECT c.id, c.path, c.start_line, c.end_line, c.day, c.text, bm25(chunks_fts, 1.0, 0.5) AS rank"
    " FROM chunks_fts JOIN chunks AS c ON c.id = chunks_fts.rowid"
    " WHERE chunks_fts MATCH ? {filter} ORDER BY rank, c.day DESC, c.path, c.start_line LIMIT ?"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryHit:
    """One search result: lines ``lines[0]``-``lines[1]`` of ``path`` (relative to the workspace).

    ``score`` is higher for better hits: the negated BM25 rank for keyword search, the fused
    reciprocal-rank score for hybrid search. ``date`` is the daily note's date (``None`` for MEMORY.md).
    """

    path: str
    lines: tuple[int, int]
    text: str
    score: float
    date: dt.date | None = None

    @property
    def location(self) -> str:
        """``path:line`` or ``path:first-last``."""
        first, last = self.lines
        return f"{self.path}:{first}" if first == last else f"{self.path}:{first}-{last}"

    def format(self, max_chars: int = 500) -> str:
        """``path:lines (date): text`` on one line: whitespace collapsed, a leading ``- `` cut, clipped."""
        when = f" ({self.date.isoformat()})" if self.date is not None else ""
        text = _BULLET_RE.sub("", " ".join(self.text.split()), count=1)
        if len(text) > max_chars:
            text = text[: max_chars - 1] + "…"
        return f"{self.location}{when}: {text}"

    def __str__(self) -> str:
        return self.format()


def fts_query(text: str) -> str | None:
    """An FTS5 query matching any word of ``text`` (at most 64, each a quoted string), or ``None``."""
    terms = dict.fromkeys(term.lower() for term in _TERM_RE.findall(text))
    return " OR ".join(f'"{term}"' for term in list(terms)[:_MAX_TERMS]) or None


class MemoryIndex:
    """The search index of the memory files of the workspace at ``workspace_root``.

    :meth:`search` (keyword, blocking) and :meth:`hybrid_search` (async; needs ``embedder``) refresh
    the index first, so results always reflect the files on disk. Every call opens its own SQLite
    connection, so one index may be used from any thread, and several processes may share the file.
    """

    __slots__ = ("_embedder", "_root")

    def __init__(self, workspace_root: Path | str, *, embedder: Embedder | None = None) -> None:
        self._root = Path(os.path.abspath(Path(workspace_root).expanduser()))
        self._embedder = embedder

    def __repr__(self) -> str:
        return f"MemoryIndex({str(self._root)!r})"

    @property
    def root(self) -> Path:
        return self._root

    @property
    def db_path(self) -> Path:
        return self._root / STATE_DIR / DB_NAME

    @property
    def embedder(self) -> Embedder | None:
        return self._embedder

    def refresh(self) -> RefreshStats:
        """Bring the index up to date with the files; cheap (one ``lstat`` per file) when nothing changed."""
        with self._connect() as conn:
            return refresh(conn, self._root)

    def search(self, query: str, k: int = 5, *, source: Source = "all") -> list[MemoryHit]:
        """The ``k`` chunks that best match the words of ``query`` (BM25), best first. Never raises for
        the query's content: any text is searched as plain words."""
        _check(k, source)
        match = fts_query(query)
        if match is None:
            return []
        with self._connect() as conn:
            refresh(conn, self._root)
            rows = conn.execute(_KEYWORD_SQL.format(filter=_SOURCE_FILTER[source]), (match, k)).fetchall()
        return [_hit(row, -row[6]) for row in rows]

    async def hybrid_search(self, query: str, k: int = 5, *, source: Source = "all") -> list[MemoryHit]:
        """The ``k`` best chunks by reciprocal-rank fusion of BM25 and embedding cosine similarity.

        Chunks without a cached vector are embedded first (in batches), then the query. The embedder's
        errors propagate (:class:`~loopwright.errors.ModelError` for :class:`OpenAICompatibleEmbedder`).
        """
        _check(k, source)
        embedder = self._embedder
        if embedder is None:
            raise ValueError("hybrid_search needs an embedder: MemoryIndex(root, embedder=...)")
        if not query.strip():
            return []
        model = embedder.name
        missing = await run_blocking(self._refresh_and_missing, model)
        for start in range(0, len(missing), _EMBED_BATCH):
            batch = missing[start : start + _EMBED_BATCH]
            vectors = _checked(await embedder.embed([text for _, text in batch]), len(batch), model)
            await run_blocking(self._store_vectors, model, [h for h, _ in batch], vectors)
        [query_vector] = _checked(await embedder.embed([query]), 1, model)
        return await run_blocking(self._fuse, query, query_vector, k, source, model)

    # --- blocking parts ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        require_fts5()
        conn = open_db(state_dir(self._root) / DB_NAME)
        try:
            yield conn
        finally:
            conn.close()

    def _refresh_and_missing(self, model: str) -> list[tuple[str, str]]:
        """Refresh, then the (hash, text to embed) of every chunk without a vector for ``model``."""
        with self._connect() as conn:
            refresh(conn, self._root)
            rows = conn.execute(
                "SELECT c.hash, c.heading, c.text FROM chunks AS c LEFT JOIN vectors AS v"
                " ON v.model = ? AND v.hash = c.hash WHERE v.hash IS NULL GROUP BY c.hash ORDER BY c.id",
                (model,),
            ).fetchall()
        return [(row[0], embedding_text(row[1], row[2])) for row in rows]

    def _store_vectors(self, model: str, hashes: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
        rows = []
        for chunk_hash, vector in zip(hashes, vectors, strict=True):
            unit = unit_vector(vector)
            rows.append((model, chunk_hash, pack_vector(unit) if unit is not None else b""))
        with self._connect() as conn:
            conn.executemany("INSERT OR REPLACE INTO vectors(model, hash, vector) VALUES (?, ?, ?)", rows)

    def _fuse(
        self, query: str, query_vector: Sequence[float], k: int, source: Source, model: str
    ) -> list[MemoryHit]:
        where = _SOURCE_FILTER[source]
        match = fts_query(query)
        with self._connect() as conn:
            keyword: list[int] = []
            if match is not None:
                sql = _KEYWORD_SQL.format(filter=where)
                keyword = [row[0] for row in conn.execute(sql, (match, _CANDIDATES))]
            semantic = _nearest(conn, unit_vector(query_vector), model, where)
            scores = reciprocal_rank_fusion(keyword, semantic)
            ids = list(scores)
            marks = ",".join("?" * len(ids))
            rows = conn.execute(
                f"SELECT id, path, start_line, end_line, day, text FROM chunks WHERE id IN ({marks})", ids
            ).fetchall()
        hits = [_hit(row, scores[row[0]]) for row in rows]
        hits.sort(key=lambda h: (-h.score, -h.date.toordinal() if h.date else 0, h.path, h.lines))
        return hits[:k]


# --- helpers -------------------------------------------------------------------------------------


def _nearest(conn: sqlite3.Connection, query: Sequence[float] | None, model: str, where: str) -> list[int]:
    """Chunk ids by cosine similarity to the (unit) query vector, best first, at most ``_CANDIDATES``."""
    if query is None:
        return []
    scored: list[tuple[float, int]] = []
    rows = conn.execute(
        f"SELECT c.id, v.vector FROM chunks AS c JOIN vectors AS v ON v.model = ? AND v.hash = c.hash"
        f" WHERE 1 {where}",
        (model,),
    )
    for chunk_id, blob in rows:
        vector = unpack_vector(blob)
        if len(vector) == len(query):
            scored.append((sum(map(operator.mul, query, vector)), chunk_id))
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    return [chunk_id for _, chunk_id in scored[:_CANDIDATES]]


def _hit(row: Sequence[Any], score: float) -> MemoryHit:
    _, path, first, last, day, text = row[:6]
    return MemoryHit(
        path=path,
        lines=(first, last),
        text=text,
        score=score,
        date=dt.date.fromisoformat(day) if day else None,
    )


def _check(k: int, source: str) -> None:
    if not 1 <= k <= _MAX_K:
        raise ValueError(f"k must be between 1 and {_MAX_K}, got {k}")
    if source not in _SOURCE_FILTER:
        raise ValueError(f"unknown source {source!r}; use 'all', 'daily' or 'memory'")


def _checked(vectors: list[list[float]], expected: int, model: str) -> list[list[float]]:
    if len(vectors) != expected:
        raise ValueError(f"embedder {model!r} returned {len(vectors)} vectors for {expected} texts")
    return vectors
