"""Built-in tools bound to a workspace: read, list, write, edit and search files, tell the time, and
write and search the agent's memory (:mod:`loopwright.memory`).

Every path a model gives goes through :func:`~loopwright.tools._scope.resolve_in_scope` with the
workspace first among the roots and ``sessions/`` and ``.loopwright/`` denied, so an agent can neither
leave its workspace nor rewrite its own transcripts. Paths in results are relative to the workspace.
The file tools are plain sync functions, so they run in the worker pool and never block the loop.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import secrets
import stat
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from loopwright.tools._exec import make_exec_tool
from loopwright.tools._function import FunctionTool, tool
from loopwright.tools._scope import ScopeError, is_denied, open_beneath, open_folder_beneath, resolve_in_scope
from loopwright.tools.base import Tool

__all__ = ["BUILTIN_TOOL_NAMES", "DEFAULT_TOOL_NAMES", "DENIED_FOLDERS", "builtin_tool", "builtin_tools"]

DENIED_FOLDERS: tuple[str, ...] = ("sessions", ".loopwright")
"""Folders of the workspace the file tools never read, list, search or write."""

_MAX_LIST_ENTRIES = 500
_MAX_SEARCH_MATCHES = 200
_MAX_SEARCH_FILES = 20_000
_MAX_SEARCH_FILE_BYTES = 10 * 1024 * 1024
_MAX_EDIT_FILE_BYTES = 50 * 1024 * 1024
_MAX_LINE_CHARS = 2000
_MAX_MATCH_LINE_CHARS = 300
_BINARY_SNIFF_BYTES = 8192
_SKIPPED_FOLDERS = frozenset({".git"})
_OPEN_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_OPEN_TEMP = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True, slots=True)
class _Scope:
    """The roots a set of tools may touch; the first is the workspace."""

    roots: tuple[Path, ...]

    def resolve(self, path: str, *, must_exist: bool = False, for_write: bool = False) -> Path:
        return resolve_in_scope(
            self.roots, path, must_exist=must_exist, for_write=for_write, deny=DENIED_FOLDERS
        )

    def real_roots(self) -> list[str]:
        return [os.path.realpath(root) for root in self.roots]

    def root_of(self, real: str | Path) -> str:
        """The real root that holds ``real`` (a path :meth:`resolve` returned)."""
        path = os.fspath(real)
        inside = [r for r in self.real_roots() if path == r or path.startswith(r.rstrip(os.sep) + os.sep)]
        if not inside:
            raise ScopeError(path, "path leads outside the workspace")
        return max(inside, key=len)

    def open_file(self, real: str | Path, flags: int, path: str) -> int:
        """Open a resolved path from its root without following any symlink on the way."""
        return open_beneath(self.root_of(real), os.fspath(real), flags, path)

    def open_folder(self, real: str | Path, path: str, *, make_dirs: bool = False) -> int:
        return open_folder_beneath(self.root_of(real), os.fspath(real), path, make_dirs=make_dirs)


def _show(real: str | Path, workspace: str) -> str:
    """``real`` as the model should see it: relative to the (real) workspace, with ``/`` separators."""
    return os.path.relpath(real, workspace).replace(os.sep, "/")


# --- the tools -----------------------------------------------------------------------------------


def _make_read_file(scope: _Scope) -> FunctionTool[..., Any]:
    @tool(idempotent=True, groups=("fs",), level="guest")
    def read_file(
        path: str,
        offset: Annotated[int, Field(ge=0)] = 0,
        limit: Annotated[int, Field(ge=1, le=10_000)] = 2000,
    ) -> str:
        """Read a UTF-8 text file from the workspace, as numbered lines.

        Args:
            path: File path relative to the workspace, e.g. "src/app.py".
            offset: Number of lines to skip from the start of the file.
            limit: Maximum number of lines to return.
        """
        return _read_file(scope, path, offset, limit)

    return read_file


def _make_list_files(scope: _Scope) -> FunctionTool[..., Any]:
    @tool(idempotent=True, groups=("fs",), level="guest")
    def list_files(path: str = ".", recursive: bool = False) -> str:
        """List the files and folders in a workspace folder; folder names end with "/".

        Args:
            path: Folder path relative to the workspace; "." is the workspace itself.
            recursive: Also list everything inside the subfolders.
        """
        return _list_files(scope, path, recursive)

    return list_files


def _make_write_file(scope: _Scope) -> FunctionTool[..., Any]:
    @tool(idempotent=True, groups=("fs",), level="user")
    def write_file(path: str, content: str) -> int:
        """Create or replace a text file in the workspace; returns the number of bytes written.

        Missing parent folders are created. The file is replaced atomically: readers see either the
        old or the new content, never a mix.

        Args:
            path: File path relative to the workspace, e.g. "notes/todo.md".
            content: The complete new content of the file (UTF-8 text).
        """
        return _write_file(scope, path, content)

    return write_file


def _make_edit_file(scope: _Scope) -> FunctionTool[..., Any]:
    @tool(groups=("fs",), level="user")
    def edit_file(path: str, old_text: str, new_text: str) -> str:
        """Replace one exact piece of text in a workspace file.

        old_text must occur exactly once in the file, matching whitespace and indentation; include
        enough surrounding lines to make it unique.

        Args:
            path: File path relative to the workspace.
            old_text: The exact text to replace.
            new_text: The text to put in its place.
        """
        return _edit_file(scope, path, old_text, new_text)

    return edit_file


def _make_search_files(scope: _Scope) -> FunctionTool[..., Any]:
    @tool(idempotent=True, groups=("fs",), level="guest")
    def search_files(pattern: str, path: str = ".") -> str:
        """Search the text files of the workspace for lines matching a regular expression.

        Results are "path:line: text", at most 200 of them.

        Args:
            pattern: A Python regular expression, e.g. "def \\w+_test".
            path: Folder or file to search, relative to the workspace.
        """
        return _search_files(scope, pattern, path)

    return search_files


def _make_current_time(scope: _Scope) -> FunctionTool[..., Any]:
    @tool(idempotent=True, inline=True, level="guest")
    def current_time() -> str:
        """Return the current date and time in UTC, in ISO 8601 format."""
        return datetime.now(UTC).isoformat(timespec="seconds")

    return current_time


# The memory tools reach only MEMORY.md and memory/*.md of the workspace (never the extra roots).
# Imported on use: loopwright.memory imports this package, and plain file tools need no SQLite.


def _make_memory_write(scope: _Scope) -> FunctionTool[..., Any]:
    from loopwright.memory import memory_write_tool

    return _memory_tool(memory_write_tool(scope.roots[0]))


def _make_memory_search(scope: _Scope) -> FunctionTool[..., Any]:
    from loopwright.memory import memory_search_tool

    return _memory_tool(memory_search_tool(scope.roots[0]))


def _memory_tool(made: FunctionTool[..., Any]) -> FunctionTool[..., Any]:
    made.groups = ("memory",)
    made.level = "user"
    return made


def _make_exec(scope: _Scope) -> FunctionTool[..., Any]:
    return make_exec_tool(scope.roots[0])


_FACTORIES: dict[str, Callable[[_Scope], FunctionTool[..., Any]]] = {
    "read_file": _make_read_file,
    "list_files": _make_list_files,
    "write_file": _make_write_file,
    "edit_file": _make_edit_file,
    "search_files": _make_search_files,
    "current_time": _make_current_time,
    "exec": _make_exec,
    "memory_write": _make_memory_write,
    "memory_search": _make_memory_search,
}

BUILTIN_TOOL_NAMES: tuple[str, ...] = tuple(_FACTORIES)

DEFAULT_TOOL_NAMES: tuple[str, ...] = tuple(name for name in _FACTORIES if name != "exec")
"""What :func:`builtin_tools` gives when no names are asked for: everything but the shell (``exec``),
which an agent gets only by naming it."""


def builtin_tool(name: str, workspace: Path, *, extra_roots: Sequence[Path] = ()) -> Tool:
    """The built-in tool ``name`` confined to ``workspace`` (and ``extra_roots``, reached by relative paths
    such as ``../shared/x``). Raises :class:`KeyError` for an unknown name."""
    factory = _FACTORIES.get(name)
    if factory is None:
        raise KeyError(f"unknown built-in tool {name!r}; known tools: {', '.join(BUILTIN_TOOL_NAMES)}")
    return factory(_Scope((Path(workspace), *(Path(root) for root in extra_roots))))


def builtin_tools(
    workspace: Path, names: Sequence[str] | None = None, *, extra_roots: Sequence[Path] = ()
) -> list[Tool]:
    """The built-in tools called ``names`` (by default all but ``exec``), bound to ``workspace``."""
    return [
        builtin_tool(name, workspace, extra_roots=extra_roots)
        for name in (DEFAULT_TOOL_NAMES if names is None else names)
    ]


# --- implementations -----------------------------------------------------------------------------


def _read_file(scope: _Scope, path: str, offset: int, limit: int) -> str:
    real = scope.resolve(path, must_exist=True)
    window: list[str] = []
    total = 0
    with _open_regular(scope, real, path) as handle:
        if b"\x00" in handle.peek(_BINARY_SNIFF_BYTES)[:_BINARY_SNIFF_BYTES]:
            raise ValueError(f"{path!r} is a binary file, not text; read_file only reads UTF-8 text")
        text = io.TextIOWrapper(handle, encoding="utf-8", errors="strict", newline=None)
        try:
            for total, line in enumerate(text, start=1):  # streamed: huge files cost time, not memory
                if offset < total <= offset + limit:
                    line = _clip(line.rstrip("\n"), _MAX_LINE_CHARS)
                    window.append(f"{total:>6}\t{line}")
        except UnicodeDecodeError:
            raise ValueError(f"{path!r} is not a UTF-8 text file; read_file only reads UTF-8 text") from None
        finally:
            text.detach()
    if total == 0:
        return f"({path!r} is empty)"
    if offset >= total:
        raise ValueError(f"{path!r} has {total} lines; offset {offset} is past the end")
    shown_to = offset + len(window)
    if offset == 0 and shown_to == total:
        return "\n".join(window)
    more = f"; call again with offset={shown_to} for more" if shown_to < total else ""
    return "\n".join(window) + f"\n(lines {offset + 1}-{shown_to} of {total}{more})"


def _list_files(scope: _Scope, path: str, recursive: bool) -> str:
    real = scope.resolve(path, must_exist=True)
    if not real.is_dir():
        raise NotADirectoryError(f"{path!r} is a file, not a folder; use read_file to read it")
    workspace = scope.real_roots()[0]
    entries: list[str] = []
    total = 0
    with contextlib.closing(_walk(scope, real, recursive=recursive)) as walk:
        for entry_path, is_dir, _, _ in walk:
            total += 1
            if total <= _MAX_LIST_ENTRIES:
                entries.append(_show(entry_path, workspace) + ("/" if is_dir else ""))
            elif recursive:
                break
    if not entries:
        return f"({path!r} is empty)"
    if total > _MAX_LIST_ENTRIES:
        hidden = "more entries" if recursive else f"{total - _MAX_LIST_ENTRIES} more entries"
        entries.append(f"... ({hidden} not shown; list a subfolder to see them)")
    return "\n".join(entries)


def _write_file(scope: _Scope, path: str, content: str) -> int:
    real = scope.resolve(path, for_write=True)
    if real.is_dir():
        raise IsADirectoryError(f"{path!r} is a folder; give the path of a file inside it")
    data = content.encode("utf-8")
    with _relative_os_errors(path):
        try:
            folder = scope.open_folder(real.parent, path, make_dirs=True)
        except (FileExistsError, NotADirectoryError):
            raise NotADirectoryError(f"cannot write {path!r}: one of its parent folders is a file") from None
        try:
            _atomic_write(folder, real.name, data)
        finally:
            os.close(folder)
    return len(data)


def _edit_file(scope: _Scope, path: str, old_text: str, new_text: str) -> str:
    if not old_text:
        raise ValueError("old_text is empty; give the exact text to replace (use write_file for new files)")
    real = scope.resolve(path, must_exist=True)
    with _open_regular(scope, real, path) as handle:
        data = handle.read(_MAX_EDIT_FILE_BYTES + 1)
    if len(data) > _MAX_EDIT_FILE_BYTES:
        raise ValueError(f"{path!r} is too large to edit (over {_MAX_EDIT_FILE_BYTES} bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path!r} is not a UTF-8 text file; edit_file only edits UTF-8 text") from None
    first = text.find(old_text)
    if first < 0:
        raise ValueError(
            f"old_text was not found in {path!r}; read the file and copy the text exactly, "
            "including whitespace and indentation"
        )
    if text.find(old_text, first + 1) >= 0:
        count = max(text.count(old_text), 2)
        raise ValueError(
            f"old_text occurs {count} times in {path!r}; include more surrounding lines so it occurs once"
        )
    with _relative_os_errors(path):
        folder = scope.open_folder(real.parent, path)
        try:
            _atomic_write(
                folder, real.name, (text[:first] + new_text + text[first + len(old_text) :]).encode("utf-8")
            )
        finally:
            os.close(folder)
    return f"replaced 1 occurrence in {path!r}"


def _search_files(scope: _Scope, pattern: str, path: str) -> str:
    try:
        regex = re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
    real = scope.resolve(path, must_exist=True)
    workspace = scope.real_roots()[0]
    with contextlib.closing(_texts(scope, real, path)) as texts:
        return _matches(regex, texts, pattern, path, workspace)


def _matches(
    regex: re.Pattern[str], texts: Iterator[tuple[str, str]], pattern: str, path: str, workspace: str
) -> str:
    matches: list[str] = []
    for index, (file_path, text) in enumerate(texts):
        if index >= _MAX_SEARCH_FILES:
            matches.append(f"... (stopped after {_MAX_SEARCH_FILES} files; search a subfolder)")
            break
        shown = _show(file_path, workspace)
        for number, line in enumerate(text.splitlines(), start=1):
            if regex.search(line):
                matches.append(f"{shown}:{number}: {_clip(line, _MAX_MATCH_LINE_CHARS)}")
                if len(matches) >= _MAX_SEARCH_MATCHES:
                    matches.append(f"... (stopped at {_MAX_SEARCH_MATCHES} matches; narrow the pattern)")
                    return "\n".join(matches)
    if not matches:
        return f"no matches for {pattern!r} in {path!r}"
    return "\n".join(matches)


# --- helpers -------------------------------------------------------------------------------------


def _walk(scope: _Scope, top: Path, *, recursive: bool) -> Generator[tuple[str, bool, int, str], None, None]:
    """Entries under ``top`` in sorted depth-first order, as (real path, is folder, folder fd, name).

    Folders are opened from the root without following symlinks (a folder swapped for a symlink is
    refused, not entered), and an entry's folder descriptor stays open while it is yielded, so files
    can be opened relative to it. Skips protected folders; does not descend into ``.git``.
    """
    roots = scope.real_roots()
    top_fd = scope.open_folder(top, os.fspath(top))
    stack: list[tuple[str, int, Iterator[os.DirEntry[str]]]] = [
        (os.fspath(top), top_fd, _sorted_entries(top_fd))
    ]
    try:
        while stack:
            folder, fd, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                os.close(fd)
                stack.pop()
                continue
            entry_path = os.path.join(folder, entry.name)
            if is_denied(roots, entry_path, DENIED_FOLDERS):
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            yield entry_path, is_dir, fd, entry.name
            if recursive and is_dir and entry.name not in _SKIPPED_FOLDERS:
                try:
                    sub = os.open(entry.name, _OPEN_FOLDER, dir_fd=fd)
                except OSError:  # gone, unreadable, or swapped for a symlink meanwhile
                    continue
                stack.append((entry_path, sub, _sorted_entries(sub)))
    finally:
        for _, fd, _ in stack:
            os.close(fd)


def _sorted_entries(fd: int) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(fd) as it:
            return iter(sorted(it, key=lambda e: e.name))
    except OSError:
        return iter(())


def _texts(scope: _Scope, real: Path, path: str) -> Generator[tuple[str, str], None, None]:
    """(real path, text) of the searchable files at ``real``: the file itself, or those under the folder."""
    if not real.is_dir():
        fd = _try_open(lambda: scope.open_file(real, _OPEN_READ, path))
        text = _text_or_none(fd) if fd is not None else None
        if text is not None:
            yield os.fspath(real), text
        return
    for entry_path, is_dir, folder_fd, name in _walk(scope, real, recursive=True):
        if not is_dir:
            fd = _try_open(lambda: os.open(name, _OPEN_READ, dir_fd=folder_fd))  # noqa: B023 -- called at once
            text = _text_or_none(fd) if fd is not None else None
            if text is not None:
                yield entry_path, text


def _try_open(opener: Callable[[], int]) -> int | None:
    try:
        return opener()
    except (OSError, ScopeError):
        return None


def _text_or_none(fd: int) -> str | None:
    """The UTF-8 text of an open regular file (closed here), or None for anything binary, huge or special."""
    with open(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_SEARCH_FILE_BYTES:
            return None
        data = handle.read(_MAX_SEARCH_FILE_BYTES + 1)
    if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


@contextlib.contextmanager
def _open_regular(scope: _Scope, real: Path, path: str) -> Iterator[Any]:
    """Open a checked path for reading, following no symlink on the way and never blocking on a FIFO."""
    if real.is_dir():
        raise IsADirectoryError(f"{path!r} is a folder; use list_files to see what it contains")
    with _relative_os_errors(path):
        fd = scope.open_file(real, _OPEN_READ, path)
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ScopeError(path, "not a regular file")
        yield handle


def _atomic_write(folder: int, name: str, data: bytes) -> None:
    """Write ``data`` to a fresh file in the open ``folder``, then rename it over ``name`` there."""
    temp = f".{name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(temp, _OPEN_TEMP, 0o666, dir_fd=folder)
    try:
        with open(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            with contextlib.suppress(OSError):
                mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
                if stat.S_ISREG(mode):
                    os.chmod(handle.fileno(), stat.S_IMODE(mode))
            os.fsync(handle.fileno())
        os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=folder)
        raise


@contextlib.contextmanager
def _relative_os_errors(path: str) -> Iterator[None]:
    """Re-raise OS errors naming the model's relative path instead of the absolute one."""
    try:
        yield
    except OSError as exc:
        if exc.errno is None or exc.filename is None:
            raise
        raise type(exc)(exc.errno, exc.strerror, path) from None


def _clip(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[:limit] + " … (line truncated)"
