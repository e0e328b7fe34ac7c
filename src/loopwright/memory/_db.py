"""The index database: its schema, and the refresh that keeps it in step with the memory files.

The index is a cache in ``<workspace>/.loopwright/memory.db`` (deleting it is always safe; an unreadable
one is rebuilt). It holds one row per file (modification time, size, content hash), one per chunk
(path, line range, date, heading, text, hash) with an FTS5 table over the chunks' text and heading, and
cached embedding vectors. :func:`refresh` lists and ``lstat``-s the files and reads only new or changed
ones (by modification time and size); deleted ones are dropped. A file modified within two seconds of
being indexed is *racy* (a same-size rewrite in the same clock tick would keep its time and size), so
it is read again, and re-indexed if its hash changed, until it is older than that.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import hashlib
import logging
import os
import re
import sqlite3
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopwright.errors import ConfigError
from loopwright.memory._markdown import Chunk, split_chunks
from loopwright.memory._store import MEMORY_FILE, NOTE_NAME_RE, NOTES_DIR, read_regular
from loopwright.tools._scope import ScopeError

__all__ = ["DB_NAME", "RefreshStats", "embedding_text", "open_db", "refresh", "require_fts5"]

log = logging.getLogger("loopwright")

DB_NAME = "memory.db"

_SCHEMA_VERSION = 1
_RACY_NS = 2_000_000_000
_DAY_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_SCHEMA = (
    "CREATE TABLE files (path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL,"
    " sha TEXT NOT NULL, racy INTEGER NOT NULL)",
    "CREATE TABLE chunks (id INTEGER PRIMARY KEY, path TEXT NOT NULL, start_line INTEGER NOT NULL,"
    " end_line INTEGER NOT NULL, day TEXT, heading TEXT NOT NULL, text TEXT NOT NULL, hash TEXT NOT NULL)",
    "CREATE INDEX chunks_path ON chunks(path)",
    "CREATE INDEX chunks_hash ON chunks(hash)",
    "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, heading, content='chunks', content_rowid='id',"
    " tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER chunks_insert AFTER INSERT ON chunks BEGIN"
    " INSERT INTO chunks_fts(rowid, text, heading) VALUES (new.id, new.text, new.heading); END",
    "CREATE TRIGGER chunks_delete AFTER DELETE ON chunks BEGIN"
    " INSERT INTO chunks_fts(chunks_fts, rowid, text, heading)"
    " VALUES ('delete', old.id, old.text, old.heading);"
    " END",
    "CREATE TABLE vectors (model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL,"
    " PRIMARY KEY (model, hash))",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RefreshStats:
    """What one refresh did: files ``read`` (opened), ``indexed`` (chunks rewritten), ``removed``, and
    the number left ``unchanged`` without being opened."""

    read: tuple[str, ...] = ()
    indexed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: int = 0


@functools.cache
def _fts5_problem() -> str | None:
    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        try:
            conn.execute("CREATE VIRTUAL TABLE probe USING fts5(text)")
        except sqlite3.OperationalError as exc:
            return str(exc)
    return None


def require_fts5() -> None:
    """Raise :class:`~loopwright.errors.ConfigError` if this Python's SQLite lacks FTS5."""
    problem = _fts5_problem()
    if problem is not None:
        raise ConfigError(
            f"memory search needs SQLite's FTS5 extension, but the SQLite {sqlite3.sqlite_version} in this "
            f"Python was built without it ({problem}); use a Python whose sqlite3 module includes FTS5 "
            "(the python.org, Homebrew, conda and most Linux builds do)"
        )


# --- the database ------------------------------------------------------------------------------


def open_db(path: Path) -> sqlite3.Connection:
    """A connection to the index at ``path`` with the current schema; an unreadable file is rebuilt."""
    for attempt in range(2):
        conn = sqlite3.connect(path, timeout=10, isolation_level=None)
        try:
            _ensure_schema(conn)
            return conn
        except sqlite3.DatabaseError as exc:
            conn.close()
            if attempt or type(exc) is not sqlite3.DatabaseError:  # "locked" and kin are not corruption
                raise
            log.warning("the memory index %s is unreadable (%s); rebuilding it", path, exc)
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
    raise AssertionError("unreachable")  # pragma: no cover


def _ensure_schema(conn: sqlite3.Connection) -> None:
    if conn.execute("PRAGMA user_version").fetchone()[0] == _SCHEMA_VERSION:
        return
    conn.execute("PRAGMA journal_mode=WAL")
    with _transaction(conn):
        if conn.execute("PRAGMA user_version").fetchone()[0] == _SCHEMA_VERSION:
            return  # another connection created it while we waited
        for table in ("chunks_fts", "chunks", "files", "vectors"):
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@dataclass(frozen=True, slots=True)
class _Known:
    signature: tuple[int, int]
    sha: str
    racy: bool


def _known(conn: sqlite3.Connection) -> dict[str, _Known]:
    rows = conn.execute("SELECT path, mtime_ns, size, sha, racy FROM files")
    return {path: _Known((mtime, size), sha, bool(racy)) for path, mtime, size, sha, racy in rows}


def refresh(conn: sqlite3.Connection, root: Path) -> RefreshStats:
    disk = _scan(root)
    known = _known(conn)
    if not _stale(disk, known):
        return RefreshStats(unchanged=len(disk))
    read: list[str] = []
    indexed: list[str] = []
    with _transaction(conn):
        known = _known(conn)  # another process may have refreshed while we waited for the lock
        present: set[str] = set()
        for name, signature in disk.items():
            old = known.get(name)
            if old is not None and old.signature == signature and not old.racy:
                present.add(name)
                continue
            read.append(name)
            found = _read(root, name)
            if found is None:
                continue
            present.add(name)
            data, info = found
            sha = hashlib.sha256(data).hexdigest()
            row = (
                info.st_mtime_ns,
                info.st_size,
                sha,
                abs(time.time_ns() - info.st_mtime_ns) < _RACY_NS,
                name,
            )
            if old is not None and old.sha == sha:
                conn.execute("UPDATE files SET mtime_ns = ?, size = ?, sha = ?, racy = ? WHERE path = ?", row)
                continue
            conn.execute("DELETE FROM chunks WHERE path = ?", (name,))
            conn.executemany(
                "INSERT INTO chunks(path, start_line, end_line, day, heading, text, hash)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                _chunk_rows(name, data.decode("utf-8", errors="replace")),
            )
            conn.execute(
                "INSERT OR REPLACE INTO files(mtime_ns, size, sha, racy, path) VALUES (?, ?, ?, ?, ?)", row
            )
            indexed.append(name)
        removed = sorted(name for name in known if name not in present)
        for name in removed:
            conn.execute("DELETE FROM chunks WHERE path = ?", (name,))
            conn.execute("DELETE FROM files WHERE path = ?", (name,))
        if indexed or removed:
            conn.execute("DELETE FROM vectors WHERE hash NOT IN (SELECT hash FROM chunks)")
    return RefreshStats(
        read=tuple(read), indexed=tuple(indexed), removed=tuple(removed), unchanged=len(disk) - len(read)
    )


def _stale(disk: dict[str, tuple[int, int]], known: dict[str, _Known]) -> bool:
    if disk.keys() != known.keys():
        return True
    return any(known[name].racy or known[name].signature != signature for name, signature in disk.items())


def _scan(root: Path) -> dict[str, tuple[int, int]]:
    """(mtime_ns, size) of ``MEMORY.md`` and each ``memory/*.md``: regular files only, no symlinks."""
    found: dict[str, tuple[int, int]] = {}
    info = _lstat(root / MEMORY_FILE)
    if info is not None and stat.S_ISREG(info.st_mode):
        found[MEMORY_FILE] = (info.st_mtime_ns, info.st_size)
    info = _lstat(root / NOTES_DIR)
    if info is None or not stat.S_ISDIR(info.st_mode):  # lstat: a symlinked memory/ is never entered
        return found
    with contextlib.suppress(OSError), os.scandir(root / NOTES_DIR) as entries:
        for entry in entries:
            if NOTE_NAME_RE.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                entry_info = entry.stat(follow_symlinks=False)
                found[f"{NOTES_DIR}/{entry.name}"] = (entry_info.st_mtime_ns, entry_info.st_size)
    return found


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _read(root: Path, name: str) -> tuple[bytes, os.stat_result] | None:
    try:
        return read_regular(root / name, name)
    except (ScopeError, ValueError, OSError) as exc:
        log.warning("not indexing memory file %r: %s", name, exc)
        return None


def _chunk_rows(name: str, text: str) -> Iterator[tuple[Any, ...]]:
    day = _note_day(name)
    for chunk in split_chunks(text):
        yield (name, chunk.start_line, chunk.end_line, day, chunk.heading, chunk.text, _chunk_hash(chunk))


def _note_day(name: str) -> str | None:
    base = name.rpartition("/")[2]
    if name == MEMORY_FILE or not _DAY_RE.match(base):
        return None
    try:
        return dt.date.fromisoformat(base[:10]).isoformat()
    except ValueError:
        return None


def embedding_text(heading: str, text: str) -> str:
    return f"{heading}\n{text}" if heading else text


def _chunk_hash(chunk: Chunk) -> str:
    return hashlib.sha256(embedding_text(chunk.heading, chunk.text).encode("utf-8")).hexdigest()[:32]
