"""The embedded default session store: one folder per session under ``<workspace>/sessions/``.

Layout of ``sessions/<id>/``::

    session.json            metadata (written atomically: temp file + rename)
    transcript.jsonl        append-only transcript, one entry per line
    transcript.torn.jsonl   lines set aside at load (a line torn by a crash, an undecodable line)
    runs/<runId>.json       one report per run

Appends are written and flushed at once (a crash loses at most the line being written); ``sync``
fsyncs. Loading keeps a per-session cache of parsed entries and the byte offset they end at, so a
later load reads only what another process appended since (never the whole file again).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from io import TextIOWrapper
from pathlib import Path

from loopwright._threads import run_blocking
from loopwright.errors import NotFoundError, StorageError
from loopwright.report import RunReport
from loopwright.sessions._codec import Entry, decode_line, encode_entry
from loopwright.sessions.base import LoadedTranscript, SessionInfo, validate_session_id

__all__ = ["FileSessionStore"]

log = logging.getLogger("loopwright.sessions")

TRANSCRIPT = "transcript.jsonl"
TORN = "transcript.torn.jsonl"
INFO = "session.json"
RUNS = "runs"
_WRITE_ATTEMPTS = 3
INLINE_SYNC_LIMIT = 0.002
"""An fsync slower than this (seconds) moves all later syncs of the store to a worker thread."""


@dataclass(slots=True)
class _Cached:
    entries: list[Entry]
    offset: int
    inode: int


class FileSessionStore:
    """Implements :class:`~loopwright.sessions.SessionStore` on plain files."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._cache: dict[str, _Cached] = {}
        self._handles: dict[str, TextIOWrapper] = {}
        self._inline_sync = True

    def session_dir(self, session_id: str) -> Path:
        return self.root / validate_session_id(session_id)

    def transcript_path(self, session_id: str) -> Path:
        return self.session_dir(session_id) / TRANSCRIPT

    # --- metadata -------------------------------------------------------------------------------

    async def get(self, session_id: str) -> SessionInfo | None:
        path = self.session_dir(session_id) / INFO
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot read {str(path)!r}: {exc}") from exc
        return SessionInfo.from_dict(data)

    async def create(self, info: SessionInfo) -> None:
        folder = self.session_dir(info.id)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / TRANSCRIPT).touch(exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create session folder {str(folder)!r}: {exc}") from exc
        await self.save_info(info)

    async def save_info(self, info: SessionInfo) -> None:
        _atomic_write(self.session_dir(info.id) / INFO, json.dumps(info.to_dict(), ensure_ascii=False))

    async def list_sessions(self) -> list[SessionInfo]:
        if not self.root.is_dir():
            return []
        found = []
        for child in self.root.iterdir():
            if (child / INFO).is_file():
                try:
                    found.append(
                        SessionInfo.from_dict(json.loads((child / INFO).read_text(encoding="utf-8")))
                    )
                except (OSError, ValueError, KeyError) as exc:
                    log.warning("skipping unreadable session metadata %s: %s", child / INFO, exc)
        return sorted(found, key=lambda i: i.updated_at, reverse=True)

    # --- transcript -----------------------------------------------------------------------------

    async def load(self, session_id: str) -> LoadedTranscript:
        path = self.transcript_path(session_id)
        try:
            stat = path.stat()
        except FileNotFoundError:
            if await self.get(session_id) is None:
                raise NotFoundError("session", session_id) from None
            return LoadedTranscript(entries=[])
        cached = self._cache.get(session_id)
        if cached is not None and cached.inode == stat.st_ino and cached.offset == stat.st_size:
            return LoadedTranscript(entries=list(cached.entries))
        start = 0
        entries: list[Entry] = []
        if cached is not None and cached.inode == stat.st_ino and cached.offset < stat.st_size:
            start, entries = cached.offset, list(cached.entries)
        warnings: list[str] = []
        offset = self._read_from(session_id, path, start, entries, warnings)
        self._cache[session_id] = _Cached(entries=entries, offset=offset, inode=stat.st_ino)
        return LoadedTranscript(entries=list(entries), warnings=warnings)

    def _read_from(
        self, session_id: str, path: Path, start: int, out: list[Entry], warnings: list[str]
    ) -> int:
        """Parse lines from byte ``start``; set aside bad lines; return the offset of the good end."""
        with path.open("rb") as f:
            f.seek(start)
            data = f.read()
        offset = start
        pos = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            complete = nl != -1
            raw = data[pos:] if not complete else data[pos:nl]
            try:
                text = raw.decode("utf-8")
                entry = decode_line(text) if text.strip() else None
            except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
                entry, text = None, raw.decode("utf-8", errors="replace")
                self._set_aside(session_id, text)
                kind = "torn last line" if not complete else "invalid line"
                warnings.append(
                    f"session {session_id!r}: {kind} at byte {offset + pos} set aside in {TORN} ({exc})"
                )
                if not complete:
                    self._truncate(path, offset + pos)
                    return offset + pos
                pos = nl + 1
                continue
            if entry is not None:
                out.append(entry)
            if not complete:
                # A whole entry without its newline (crash between the two): complete the line.
                with path.open("ab") as f:
                    f.write(b"\n")
                return offset + len(data) + 1
            pos = nl + 1
        return offset + pos

    def _set_aside(self, session_id: str, text: str) -> None:
        with (self.session_dir(session_id) / TORN).open("a", encoding="utf-8") as f:
            f.write(text.rstrip("\n") + "\n")

    def _truncate(self, path: Path, size: int) -> None:
        self._close_handle(path.parent.name)
        with path.open("r+b") as f:
            f.truncate(size)

    async def append(self, session_id: str, entries: Sequence[Entry]) -> None:
        text = "".join(encode_entry(e) for e in entries)
        for attempt in range(1, _WRITE_ATTEMPTS + 1):
            try:
                handle = self._handles.get(session_id)
                if handle is None:
                    handle = self._open(session_id)
                handle.write(text)
                handle.flush()
                break
            except OSError as exc:
                self._close_handle(session_id)
                if attempt == _WRITE_ATTEMPTS:
                    raise StorageError(f"cannot append to session {session_id!r}: {exc}") from exc
        cached = self._cache.get(session_id)
        if cached is not None:
            cached.entries.extend(entries)
            cached.offset += len(text.encode("utf-8"))

    def _open(self, session_id: str) -> TextIOWrapper:
        path = self.transcript_path(session_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a", encoding="utf-8", newline="")
        self._handles[session_id] = handle
        cached = self._cache.get(session_id)
        if cached is not None and cached.offset != handle.tell():
            # Someone else appended since our last load: drop the cache, the next load rereads.
            del self._cache[session_id]
        return handle

    async def sync(self, session_id: str) -> None:
        handle = self._handles.get(session_id)
        if handle is None:
            return
        handle.flush()
        try:
            if self._inline_sync:
                # On a fast disk an fsync takes ~0.1 ms: less than handing it to a thread. If one is
                # ever slow, every later sync goes to the worker pool so the event loop stays free.
                started = time.perf_counter()
                os.fsync(handle.fileno())
                if time.perf_counter() - started > INLINE_SYNC_LIMIT:
                    self._inline_sync = False
            else:
                await run_blocking(os.fsync, handle.fileno())
        except OSError as exc:
            raise StorageError(f"cannot sync session {session_id!r}: {exc}") from exc

    async def close(self, session_id: str) -> None:
        self._close_handle(session_id)

    def _close_handle(self, session_id: str) -> None:
        handle = self._handles.pop(session_id, None)
        if handle is not None:
            try:
                handle.close()
            except OSError as exc:  # pragma: no cover - close after a failed write
                log.warning("closing transcript of %s failed: %s", session_id, exc)

    # --- reports --------------------------------------------------------------------------------

    async def save_report(self, session_id: str, report: RunReport) -> None:
        folder = self.session_dir(session_id) / RUNS
        data = report.to_dict()
        text = json.dumps(data, ensure_ascii=False)
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate from a model: store it escaped
                text = json.dumps(data)
        _atomic_write(folder / f"{validate_session_id(report.id)}.json", text)

    async def list_reports(self, session_id: str) -> list[RunReport]:
        folder = self.session_dir(session_id) / RUNS
        if not folder.is_dir():
            return []
        reports = []
        for path in folder.glob("*.json"):
            try:
                reports.append(RunReport.from_dict(json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("skipping unreadable run report %s: %s", path, exc)
        return sorted(reports, key=lambda r: r.started_at)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    for attempt in range(1, _WRITE_ATTEMPTS + 1):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
            return
        except OSError as exc:
            if attempt == _WRITE_ATTEMPTS:
                raise StorageError(f"cannot write {str(path)!r}: {exc}") from exc
