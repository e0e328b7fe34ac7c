"""Confine the paths a model names to the folders it may use.

:func:`resolve_in_scope` takes a path as the model wrote it, relative to the workspace (the first root),
and returns its real path, or raises :class:`ScopeError` whose message is fed back to the model. The
check is on the *fully resolved* path: every symlink along the way is followed with
:func:`os.path.realpath`, and the result must lie inside the real path of one of the roots, so neither
``../`` nor a symlink (to a file, to a folder, in a chain, as a parent folder) can lead outside.

Race safety (TOCTOU): the check and the later open are two steps, so a process that can change the
workspace between them could swap a checked file or folder for a symlink. The file tools close that
window: they open the returned real path with :func:`open_beneath` / :func:`open_folder_beneath`, which
walk from the root one component at a time with ``O_NOFOLLOW`` (a symlink swapped in anywhere on the
way fails with a scope error), and ``O_NONBLOCK`` (a swapped-in FIFO cannot hang the worker), then check
with ``fstat`` that they opened a regular file; writes go to a fresh temporary file created with
``O_EXCL | O_NOFOLLOW`` inside the already-opened parent folder and renamed over the target there,
which replaces a symlink rather than following it. Hard links cannot be told apart from ordinary files;
the tools never create them, but a hard link placed in the workspace by someone else reads as
workspace content.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import re
import stat
import unicodedata
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ScopeError", "is_denied", "open_beneath", "open_folder_beneath", "resolve_in_scope"]

_MAX_PATH_CHARS = 4096
# C0/C1 controls, line/paragraph separators and the bidirectional overrides that disguise names.
_FORBIDDEN_CHARS_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_DRIVE_RE = re.compile(r"[A-Za-z]:")


class ScopeError(Exception):
    """A path the model named is outside the allowed folders, denied, or not a usable file.

    The loop shows the message to the model (as ``scope error: <message>``); ``path`` is what the
    model asked for and ``reason`` says why it was refused.
    """

    def __init__(self, path: object, reason: str) -> None:
        self.path = path
        self.reason = reason
        shown = repr(path)
        if len(shown) > 200:
            shown = shown[:197] + "..."
        super().__init__(f"{reason}: {shown}")


def resolve_in_scope(
    roots: Sequence[Path],
    user_path: str,
    *,
    must_exist: bool = False,
    for_write: bool = False,
    deny: Sequence[str] = (),
) -> Path:
    """Return the real path of ``user_path`` (relative to ``roots[0]``) if it stays inside ``roots``.

    Raises :class:`ScopeError` for an empty path, NUL bytes or other control characters, absolute paths
    (``/x``, ``~``, ``C:\\``, ``\\\\server``) and backslashes, a resolved path outside every root, a path
    at or under a ``deny`` prefix (relative to any root that contains it, compared case-insensitively),
    a symlink loop, and anything that exists but is neither a regular file nor a folder (devices, FIFOs,
    sockets). With ``must_exist`` a missing path raises :class:`FileNotFoundError` naming ``user_path``.
    ``for_write`` additionally refuses paths that cannot name a file (``.``, ``..``, a trailing ``/``).
    The path is normalised to NFC first; look-alike characters (fullwidth dots and slashes) are
    ordinary filename characters and cannot traverse.
    """
    if not roots:
        raise ValueError("resolve_in_scope needs at least one root")
    relative = _check_syntax(user_path)
    if for_write and (relative.endswith("/") or posixpath.basename(relative) in ("", ".", "..")):
        raise ScopeError(user_path, "a file to write needs a file name")
    real_roots = [os.path.realpath(root) for root in roots]
    if _under_prefix(posixpath.normpath(relative), deny):
        raise ScopeError(user_path, "path is in a protected folder")
    try:
        real = os.path.realpath(os.path.join(real_roots[0], relative))
        # On a symlink loop, non-strict realpath gives up and normalises the rest of the path
        # *lexically*: "loop/../link_out" comes back as "<root>/link_out", a symlink it never
        # followed. A truly resolved path is a fixed point, so anything else is refused.
        stable = os.path.realpath(real) == real
    except (OSError, ValueError) as exc:
        raise ScopeError(user_path, f"cannot resolve path ({exc})") from None
    if not stable:
        raise ScopeError(user_path, "symlink loop")
    containing = [root for root in real_roots if _inside(real, root)]
    if not containing:
        where = "the workspace" if len(roots) == 1 else "the workspace and the other allowed folders"
        raise ScopeError(user_path, f"path leads outside {where}")
    if is_denied(containing, real, deny):
        raise ScopeError(user_path, "path is in a protected folder")
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        if must_exist:
            raise FileNotFoundError(errno.ENOENT, "no such file or folder", user_path) from None
        return Path(real)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ScopeError(user_path, "symlink loop") from None
        if must_exist or exc.errno != errno.ENOTDIR:
            raise type(exc)(exc.errno, exc.strerror, user_path) from None
        return Path(real)  # a parent is a file: the write itself will fail with a clear error
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ScopeError(user_path, "not a regular file or folder (device, FIFO or socket)")
    return Path(real)


def is_denied(roots: Sequence[Path | str], real_path: Path | str, deny: Sequence[str]) -> bool:
    """Whether ``real_path`` is at or under a ``deny`` prefix of any root (real paths) containing it."""
    if not deny:
        return False
    path = os.fspath(real_path)
    for root in roots:
        root_text = os.fspath(root)
        if _inside(path, root_text):
            relative = os.path.relpath(path, root_text).replace(os.sep, "/")
            if _under_prefix(relative, deny):
                return True
    return False


def _check_syntax(user_path: object) -> str:
    if not isinstance(user_path, str):
        raise ScopeError(user_path, "path must be a string")
    if not user_path.strip():
        raise ScopeError(user_path, "empty path")
    if len(user_path) > _MAX_PATH_CHARS:
        raise ScopeError(user_path[:50], f"path is longer than {_MAX_PATH_CHARS} characters")
    if _SURROGATE_RE.search(user_path):
        raise ScopeError(user_path, "path is not valid Unicode")
    path = unicodedata.normalize("NFC", user_path)
    if "\x00" in path:
        raise ScopeError(user_path, "path contains a NUL byte")
    if _FORBIDDEN_CHARS_RE.search(path):
        raise ScopeError(user_path, "path contains control characters")
    if path.startswith(("/", "~")) or _DRIVE_RE.match(path) or os.path.isabs(path):
        raise ScopeError(user_path, "absolute paths are not allowed; use a path relative to the workspace")
    if "\\" in path:
        raise ScopeError(user_path, "use forward slashes '/' in paths")
    return path


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _under_prefix(relative: str, deny: Sequence[str]) -> bool:
    parts = [p for p in relative.casefold().split("/") if p not in ("", ".")]
    for prefix in deny:
        prefix_parts = [p for p in prefix.casefold().split("/") if p not in ("", ".")]
        if prefix_parts and parts[: len(prefix_parts)] == prefix_parts:
            return True
    return False


_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_SWAPPED = "path changed while in use (a folder or file was swapped for a symlink)"


def open_folder_beneath(root: str, real: str, user_path: object, *, make_dirs: bool = False) -> int:
    """A file descriptor of the folder ``real`` (a path :func:`resolve_in_scope` returned, inside the
    real root folder ``root``), reached from ``root`` one component at a time without following any
    symlink: a folder swapped for a symlink after the scope check fails with :class:`ScopeError`
    instead of leading outside. ``make_dirs`` creates missing folders on the way (beneath, too)."""
    relative = os.path.relpath(real, root)
    parts = [] if relative == os.curdir else relative.split(os.sep)
    if parts[:1] == [os.pardir]:
        raise ScopeError(user_path, "path leads outside the workspace")
    fd = os.open(root, _FOLDER_FLAGS)
    try:
        for part in parts:
            try:
                next_fd = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not make_dirs:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                next_fd = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
    except OSError as exc:
        os.close(fd)
        if exc.errno == errno.ELOOP:
            raise ScopeError(user_path, _SWAPPED) from None
        raise
    return fd


def open_beneath(root: str, real: str, flags: int, user_path: object, mode: int = 0o666) -> int:
    """Open the file ``real`` (inside the real root folder ``root``) like :func:`open_folder_beneath`
    reaches folders: no symlink is followed anywhere on the way, the last component included."""
    parent, name = os.path.split(real)
    folder = open_folder_beneath(root, parent, user_path)
    try:
        return os.open(
            name, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), mode, dir_fd=folder
        )
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ScopeError(user_path, _SWAPPED) from None
        raise
    finally:
        os.close(folder)
