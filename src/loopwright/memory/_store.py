"""The memory files of a workspace, and the only code that writes them.

Two kinds of file, both plain markdown a person can edit::

    MEMORY.md              curated, durable notes in ``## sections``
    memory/2024-05-01.md   one append-only log per day: ``- 14:03 what happened``

:meth:`MemoryStore.resolve` is the gate every path passes: the name must be ``MEMORY.md`` or a
``.md`` file directly inside ``memory/``, it goes through
:func:`~loopwright.tools._scope.resolve_in_scope`, and its real path must be exactly that name under
the real workspace, so no symlink (the file, or ``memory/`` itself, pointing out of the workspace or
elsewhere inside it) is ever followed. Writes are read-modify-write under a lock (a thread lock, plus
``flock`` on ``.loopwright/memory.lock`` where available, so other processes wait too), and each ends
with a temporary file renamed over the target, so a reader sees the old file or the new, never half.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Literal

from loopwright.memory._markdown import append_text, check_section, note_bullet, replace_section
from loopwright.tools._scope import ScopeError, resolve_in_scope

__all__ = [
    "MEMORY_FILE",
    "NOTES_DIR",
    "NOTE_NAME_RE",
    "STATE_DIR",
    "MemoryStore",
    "WriteMode",
    "read_regular",
    "state_dir",
]

MEMORY_FILE = "MEMORY.md"
NOTES_DIR = "memory"
STATE_DIR = ".loopwright"
"""Where loopwright keeps derived state of a workspace (the search index, the write lock)."""

WriteMode = Literal["append", "replace_section"]

NOTE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.md")
_OPEN_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_OPEN_TEMP = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_MAX_FILE_BYTES = 10 * 1024 * 1024
_MEMORY_HEADER = "# Memory\n\n"

_locks_guard = threading.Lock()
_locks: dict[str, threading.Lock] = {}


def _local_time() -> datetime:
    return datetime.now().astimezone()


class MemoryStore:
    """Reads and writes the memory files of the workspace at ``workspace_root``.

    ``clock`` gives the current local time (for the date of a note and its ``HH:MM`` stamp).
    Methods are blocking; call them from a worker thread in async code.
    """

    __slots__ = ("_clock", "_root")

    def __init__(self, workspace_root: Path | str, *, clock: Callable[[], datetime] | None = None) -> None:
        self._root = Path(os.path.abspath(Path(workspace_root).expanduser()))
        self._clock = clock or _local_time

    def __repr__(self) -> str:
        return f"MemoryStore({str(self._root)!r})"

    @property
    def root(self) -> Path:
        return self._root

    def resolve(self, name: str) -> Path:
        """The real path of ``MEMORY.md`` or ``memory/<file>.md``; :class:`ScopeError` for anything else.

        Refused: other names, ``..``, absolute paths, names with more slashes, and any path whose real
        location is not exactly ``name`` inside the real workspace (a symlink anywhere on the way).
        """
        folder, _, base = name.rpartition("/")
        if name != MEMORY_FILE and not (folder == NOTES_DIR and NOTE_NAME_RE.fullmatch(base)):
            raise ScopeError(name, f"memory files are {MEMORY_FILE} and {NOTES_DIR}/<name>.md only")
        real = resolve_in_scope([self._root], name, for_write=True)
        if str(real) != os.path.join(os.path.realpath(self._root), *name.split("/")):
            raise ScopeError(name, "memory files and the memory/ folder must not be symlinks")
        return real

    def note_name(self, when: date) -> str:
        """The relative name of the daily note for ``when``: ``memory/2024-05-01.md``."""
        return f"{NOTES_DIR}/{when.isoformat()}.md"

    def read_memory(self) -> str:
        """The text of ``MEMORY.md`` (``""`` when it is missing)."""
        return _read_text(self.resolve(MEMORY_FILE), MEMORY_FILE) or ""

    def append_note(self, text: str, *, when: date | None = None) -> Path:
        """Append ``text`` as a ``- HH:MM`` bullet to the daily note of ``when`` (default today).

        Creates ``memory/`` and the file (headed ``# YYYY-MM-DD``) when missing. Returns the file's path.
        """
        now = self._clock()
        day = when or now.date()
        name = self.note_name(day)
        bullet = note_bullet(text, now.strftime("%H:%M"))
        with _locked(self._root):
            self._make_notes_dir()
            path = self.resolve(name)
            current = _read_text(path, name)
            if current is None:
                updated = f"# {day.isoformat()}\n\n{bullet}"
            else:
                updated = (current if current.endswith("\n") or not current else current + "\n") + bullet
            _atomic_write(path, updated)
        return path

    def write_memory(self, text: str, *, mode: WriteMode = "append", section: str | None = None) -> Path:
        """Change ``MEMORY.md``; returns its path.

        ``append`` adds ``text`` at the end of the file, or at the end of ``## section`` (created when
        missing); ``replace_section`` replaces the body of ``## section`` (required) with ``text``.
        """
        if mode not in ("append", "replace_section"):
            raise ValueError(f"unknown mode {mode!r}; use 'append' or 'replace_section'")
        name = None if section is None else check_section(section)
        if mode == "replace_section" and name is None:
            raise ValueError("mode 'replace_section' needs the name of the section to replace")
        with _locked(self._root):
            path = self.resolve(MEMORY_FILE)
            current = _read_text(path, MEMORY_FILE)
            document = _MEMORY_HEADER if current is None else current
            if mode == "replace_section" and name is not None:
                updated = replace_section(document, text, name)
            else:
                updated = append_text(document, text, name)
            _atomic_write(path, updated)
        return path

    def _make_notes_dir(self) -> None:
        folder = self._root / NOTES_DIR
        try:
            mode = os.lstat(folder).st_mode
        except FileNotFoundError:
            os.mkdir(folder)
            return
        if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
            raise ScopeError(f"{NOTES_DIR}/", "memory/ must be a real folder, not a file or a symlink")


def state_dir(root: Path) -> Path:
    """``root/.loopwright``, created when missing; refused (:class:`ScopeError`) if it is a symlink."""
    folder = Path(root) / STATE_DIR
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder)
    if not stat.S_ISDIR(os.lstat(folder).st_mode):
        raise ScopeError(f"{STATE_DIR}/", "the state folder must be a real folder, not a file or a symlink")
    return folder


def read_regular(path: Path, name: str) -> tuple[bytes, os.stat_result] | None:
    """The bytes and ``fstat`` of a regular file (not following a final symlink); ``None`` if missing.

    Raises :class:`ScopeError` for a symlink or special file, :class:`ValueError` for a huge one.
    """
    try:
        fd = os.open(path, _OPEN_READ)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno is not None and os.path.islink(path):
            raise ScopeError(name, "memory files must not be symlinks") from None
        raise
    with open(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ScopeError(name, "not a regular file")
        if info.st_size > _MAX_FILE_BYTES:
            raise ValueError(f"{name!r} is larger than {_MAX_FILE_BYTES} bytes")
        return handle.read(), info


def _read_text(path: Path, name: str) -> str | None:
    found = read_regular(path, name)
    return None if found is None else found[0].decode("utf-8", errors="replace")


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to a fresh file beside ``path`` and rename it over ``path``."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, _OPEN_TEMP, 0o644)
    try:
        with open(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Serialise writers of one workspace: threads of this process, then other processes."""
    key = os.path.realpath(root)
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock, _process_lock(Path(key)):
        yield


if sys.platform == "win32":  # pragma: no cover - loopwright is tested on POSIX

    @contextlib.contextmanager
    def _process_lock(root: Path) -> Iterator[None]:
        yield

else:
    import fcntl

    @contextlib.contextmanager
    def _process_lock(root: Path) -> Iterator[None]:
        fd = os.open(state_dir(root) / "memory.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock
