"""resolve_in_scope: a generated hostile suite must produce zero escapes."""

import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwright.tools._scope import ScopeError, is_denied, resolve_in_scope

DENY = ("sessions", ".loopwright")
MODES: dict[str, dict[str, bool]] = {
    "read": {},
    "must_exist": {"must_exist": True},
    "write": {"for_write": True},
}


@dataclass(frozen=True)
class Layout:
    workspace: Path
    outside: Path


def build_layout(base: Path) -> Layout:
    """A workspace full of traps, next to an ``outside`` folder holding a secret."""
    ws, outside = base / "ws", base / "outside"
    (ws / "sub" / "deeper").mkdir(parents=True)
    (ws / "sessions").mkdir()
    (ws / ".loopwright").mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (ws / "inside.txt").write_text("inside")
    (ws / "sessions" / "t.jsonl").write_text("{}")
    (ws / ".loopwright" / "state").write_text("{}")
    os.mkfifo(outside / "fifo")
    os.mkfifo(ws / "fifo")
    links = {
        "link_file_out": outside / "secret.txt",
        "link_dir_out": outside,
        "rel_link_out": Path("../outside"),
        "rel_file_out": Path("../outside/secret.txt"),
        "chain_a": Path("chain_b"),
        "chain_b": Path("chain_c"),
        "chain_c": outside / "secret.txt",
        "dangling_out": outside / "missing.txt",
        "dev_null": Path("/dev/null"),
        "etc_link": Path("/etc"),
        "root_link": Path("/"),
        "link_fifo_out": outside / "fifo",
        "link_fifo_in": Path("fifo"),
        "alias_sessions": Path("sessions"),
        "alias_state": Path(".loopwright/state"),
        "loop_a": Path("loop_b"),
        "loop_b": Path("loop_a"),
        "parent_out": outside,
        "ws_root_link": Path("."),
        "good_link": Path("inside.txt"),
    }
    for name, target in links.items():
        (ws / name).symlink_to(target)
    (ws / "sub" / "up").symlink_to(Path(".."))
    (ws / "sub" / "upup").symlink_to(Path("../.."))
    (ws / "sub" / "deeper" / "escape").symlink_to(Path("../../../outside"))
    return Layout(ws, outside)


LINKS = [
    "link_file_out",
    "link_dir_out",
    "rel_link_out",
    "rel_file_out",
    "chain_a",
    "chain_b",
    "chain_c",
    "dangling_out",
    "dev_null",
    "etc_link",
    "root_link",
    "link_fifo_out",
    "link_fifo_in",
    "alias_sessions",
    "alias_state",
    "loop_a",
    "parent_out",
    "sub/upup",
    "sub/deeper/escape",
    "sub/up/link_dir_out",
    "ws_root_link/link_file_out",
]
TRAVERSALS = [
    "..",
    "../",
    "../..",
    "../../..",
    "./..",
    "a/../..",
    "sub/../..",
    "sub/./../..",
    "sub/deeper/../../..",
    ".././..",
    "..//..",
    "sub//..//..",
    "new/../../",
    "sub/up/..",
    "sub/up/up/..",
    "inside.txt/../..",
]
TRAVERSAL_TARGETS = ["", "outside", "outside/secret.txt", "ws/../outside/secret.txt", "etc/passwd"]
ABSOLUTE = [
    "/",
    "/etc/passwd",
    "//etc/passwd",
    "/dev/null",
    "/tmp",
    "~",
    "~/",
    "~/x",
    "~root/.ssh",
    "C:\\Windows\\win.ini",
    "C:/Windows/win.ini",
    "c:relative",
    "Z:",
    "\\\\server\\share\\x",
    "\\etc\\passwd",
    "..\\..\\outside",
    "sub\\..\\..\\outside",
]
CONTROL = [
    "a\x00b",
    "\x00",
    "inside.txt\x00.png",
    "a\nb",
    "a\rb",
    "\tx",
    "\x1b[31mred",
    "a\x7fb",
    "\x85",
    "a\u202eb",
]
CONTROL += ["\u2028x", "x\u2066y", "\u200fname"]
UNICODE = [
    "\uff0e\uff0e/\uff0e\uff0e/outside/secret.txt",
    "..\uff0foutside",
    "\uff0e\uff0e\uff0foutside",
    "\u2024\u2024/outside",
    "\u2025/outside",
    "\u22ef/x",
    "%2e%2e/%2e%2e/etc/passwd",
    "..%2f..%2foutside",
    "%252e%252e/outside",
    "....//....//outside",
    "...",
    ".../...",
    "e\u0301.txt",
    "\ud800",
    "\udc80\udc80/x",
    "\ufeff../outside",
    "\u00a0../outside",
    "..\u2215outside",
    "..\u2044outside",
    "\u0000../x",
]
# Non-strict realpath gives up at a loop and normalises the rest lexically; these must not slip through.
AFTER_LOOP = [
    "loop_a/../chain_a",
    "loop_a/../link_file_out",
    "loop_b/./../link_dir_out/secret.txt",
    "loop_a/../rel_link_out/secret.txt",
    "missing/../loop_a/../rel_file_out",
    "sub/../loop_a/../../outside/secret.txt",
    "loop_a/x/../../link_dir_out",
    "loop_a/../alias_sessions/t.jsonl",
]
DENIED = [
    "sessions",
    "sessions/",
    "sessions/t.jsonl",
    "sessions/new.jsonl",
    "./sessions/t.jsonl",
    "sub/../sessions/t.jsonl",
    "sessions/../sessions/t.jsonl",
    "Sessions/t.jsonl",
    "SESSIONS",
    ".loopwright",
    ".loopwright/state",
    "./.loopwright/../.loopwright/state",
    "alias_sessions/t.jsonl",
    "alias_state",
    "sub/up/sessions/t.jsonl",
    "ws_root_link/sessions/t.jsonl",
    "../ws/sessions/t.jsonl",
]


def hostile_paths() -> list[str]:
    paths: list[str] = []
    for link in LINKS:
        paths += [link, f"{link}/", f"./{link}", f"sub/../{link}", f"{link}/secret.txt", f"{link}/x/y.txt"]
    for traversal in TRAVERSALS:
        for target in TRAVERSAL_TARGETS:
            paths.append(f"{traversal.rstrip('/')}/{target}" if target else traversal)
    paths += ABSOLUTE + CONTROL + UNICODE + AFTER_LOOP + DENIED + ["", " ", "x" * 5000, "a/" * 3000]
    return list(dict.fromkeys(paths))


HOSTILE = hostile_paths()


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    return build_layout(tmp_path_factory.mktemp("scope"))


def check_no_escape(layout: Layout, user_path: str, **mode: bool) -> Path | None:
    """Resolve ``user_path``; assert the outcome is a refusal or a usable path inside the workspace."""
    try:
        result = resolve_in_scope([layout.workspace], user_path, deny=DENY, **mode)
    except (ScopeError, OSError):
        return None
    root = os.path.realpath(layout.workspace)
    real = os.path.realpath(result)
    assert real == root or real.startswith(root + os.sep), (user_path, real)
    assert not is_denied([root], real, DENY), (user_path, real)
    if os.path.lexists(real):
        mode_bits = os.stat(real).st_mode
        assert stat.S_ISREG(mode_bits) or stat.S_ISDIR(mode_bits), (user_path, real)
    return result


def test_the_suite_is_big_enough() -> None:
    assert len(HOSTILE) >= 200


@pytest.mark.parametrize("mode", list(MODES))
def test_zero_escapes(layout: Layout, mode: str) -> None:
    for user_path in HOSTILE:
        check_no_escape(layout, user_path, **MODES[mode])


def must_refuse() -> list[str]:
    paths = [*ABSOLUTE, *CONTROL, *AFTER_LOOP, *DENIED, "", " ", "x" * 5000, "\ud800", "\udc80\udc80/x"]
    for link in LINKS:
        paths.append(link)
        if link != "link_fifo_in":  # a FIFO inside the workspace: "fifo/x" is just missing
            paths.append(f"{link}/secret.txt")
    for traversal in TRAVERSALS:
        if traversal != "sub/up/up/..":  # up -> ws, so ws/up/.. is ws itself: no escape to refuse
            paths += [f"{traversal.rstrip('/')}/outside/secret.txt", f"{traversal.rstrip('/')}/etc/passwd"]
    paths += ["fifo", "../outside/fifo"]
    return list(dict.fromkeys(paths))


@pytest.mark.parametrize("mode", list(MODES))
def test_known_attacks_raise_scope_error(layout: Layout, mode: str) -> None:
    not_refused = []
    for user_path in must_refuse():
        try:
            resolve_in_scope([layout.workspace], user_path, deny=DENY, **MODES[mode])
        except ScopeError:
            continue
        not_refused.append(user_path)
    assert not_refused == []


@pytest.mark.parametrize(
    ("user_path", "expected"),
    [
        (".", "."),
        ("inside.txt", "inside.txt"),
        ("./inside.txt", "inside.txt"),
        ("sub/../inside.txt", "inside.txt"),
        ("sub/up/inside.txt", "inside.txt"),
        ("good_link", "inside.txt"),
        ("ws_root_link/inside.txt", "inside.txt"),
        ("sub/deeper/", "sub/deeper"),
        ("link_dir_out/../ws/inside.txt", "inside.txt"),  # the kernel's answer, and inside
        ("\uff0e\uff0e/x", "\uff0e\uff0e/x"),  # fullwidth dots are just characters
        ("%2e%2e/x", "%2e%2e/x"),
        ("sessionsX/y", "sessionsX/y"),
        ("e\u0301.txt", "\u00e9.txt"),  # normalised to NFC
    ],
)
def test_legitimate_paths_resolve_inside(layout: Layout, user_path: str, expected: str) -> None:
    result = resolve_in_scope([layout.workspace], user_path, deny=DENY)
    assert result == Path(os.path.realpath(layout.workspace / expected))


def test_messages(layout: Layout) -> None:
    cases = {
        "../outside/secret.txt": "path leads outside the workspace: '../outside/secret.txt'",
        "/etc/passwd": "absolute paths are not allowed; use a path relative to the workspace: '/etc/passwd'",
        "sessions/t.jsonl": "path is in a protected folder: 'sessions/t.jsonl'",
        "fifo": "not a regular file or folder (device, FIFO or socket): 'fifo'",
        "loop_a": "symlink loop: 'loop_a'",
        "": "empty path: ''",
        "a\x00b": "path contains a NUL byte: 'a\\x00b'",
        "a\\b": "use forward slashes '/' in paths: 'a\\\\b'",
    }
    for user_path, message in cases.items():
        with pytest.raises(ScopeError) as info:
            resolve_in_scope([layout.workspace], user_path, deny=DENY)
        assert str(info.value) == message
        assert info.value.path == user_path


def test_must_exist_names_the_relative_path(layout: Layout) -> None:
    with pytest.raises(FileNotFoundError) as info:
        resolve_in_scope([layout.workspace], "nope/missing.txt", must_exist=True)
    assert str(info.value) == "[Errno 2] no such file or folder: 'nope/missing.txt'"
    assert str(layout.workspace) not in str(info.value)


def test_missing_path_is_fine_without_must_exist(layout: Layout) -> None:
    result = resolve_in_scope([layout.workspace], "new/dir/file.txt", for_write=True)
    assert result == Path(os.path.realpath(layout.workspace)) / "new" / "dir" / "file.txt"


@pytest.mark.parametrize("user_path", [".", "..", "sub/", "sub/.", "sub/.."])
def test_write_needs_a_file_name(layout: Layout, user_path: str) -> None:
    with pytest.raises(ScopeError, match="needs a file name"):
        resolve_in_scope([layout.workspace], user_path, for_write=True)


def test_extra_roots_are_reachable_by_relative_path(layout: Layout) -> None:
    roots = [layout.workspace, layout.outside]
    assert resolve_in_scope(roots, "../outside/secret.txt") == Path(
        os.path.realpath(layout.outside / "secret.txt")
    )
    assert resolve_in_scope(roots, "link_file_out") == Path(os.path.realpath(layout.outside / "secret.txt"))
    with pytest.raises(ScopeError, match="outside the workspace"):
        resolve_in_scope(roots, "../../")


def test_denied_prefix_applies_through_a_root_that_contains_the_workspace(layout: Layout) -> None:
    roots = [layout.workspace, layout.workspace.parent]
    with pytest.raises(ScopeError, match="protected folder"):
        resolve_in_scope(roots, "../ws/sessions/t.jsonl", deny=DENY)


def test_device_inside_a_root_is_refused(layout: Layout) -> None:
    roots = [layout.workspace, Path("/dev")]
    relative = os.path.relpath("/dev/null", os.path.realpath(layout.workspace))
    with pytest.raises(ScopeError, match="not a regular file or folder"):
        resolve_in_scope(roots, relative)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="lw"))  # unix socket paths must be short
    try:
        yield path
    finally:
        shutil.rmtree(path)


def test_socket_is_refused(short_dir: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(short_dir / "s"))
        with pytest.raises(ScopeError, match="FIFO or socket"):
            resolve_in_scope([short_dir], "s")


def test_symlinked_workspace_root_is_followed_once(tmp_path: Path) -> None:
    layout = build_layout(tmp_path)
    (tmp_path / "ws_alias").symlink_to(layout.workspace)
    assert resolve_in_scope([tmp_path / "ws_alias"], "inside.txt") == Path(
        os.path.realpath(layout.workspace / "inside.txt")
    )
    with pytest.raises(ScopeError):
        resolve_in_scope([tmp_path / "ws_alias"], "../outside/secret.txt")


def test_no_roots_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="at least one root"):
        resolve_in_scope([], "x")


def test_non_string_path_is_refused(layout: Layout) -> None:
    with pytest.raises(ScopeError, match="must be a string"):
        resolve_in_scope([layout.workspace], b"inside.txt")  # type: ignore[arg-type]


TOKENS = [
    "..",
    "..",
    "loop_b",
    "missing",
    "chain_b",
    ".",
    "",
    "sub",
    "deeper",
    "up",
    "upup",
    "escape",
    "link_dir_out",
    "rel_link_out",
    "chain_a",
    "sessions",
    ".loopwright",
    "alias_sessions",
    "ws",
    "outside",
    "secret.txt",
    "inside.txt",
    "fifo",
    "loop_a",
    "~",
    "\uff0e\uff0e",
    "%2e%2e",
    "\\..",
    "\x00",
    "C:",
    "new",
]


@settings(max_examples=500, deadline=None, database=None)
@given(
    st.lists(st.sampled_from(TOKENS), min_size=1, max_size=8),
    st.booleans(),
    st.sampled_from(list(MODES)),
)
def test_random_token_paths_never_escape(parts: list[str], leading_slash: bool, mode: str) -> None:
    # The layout is built once per process: hypothesis does not mix with function-scoped fixtures.
    path = ("/" if leading_slash else "") + "/".join(parts)
    check_no_escape(_shared_layout(), path, **MODES[mode])


_LAYOUT: list[Layout] = []


def _shared_layout() -> Layout:
    if not _LAYOUT:
        _LAYOUT.append(build_layout(Path(tempfile.mkdtemp(prefix="lw-scope-"))))
    return _LAYOUT[0]


@pytest.fixture(scope="module", autouse=True)
def _remove_shared_layout() -> Iterator[None]:
    yield
    for layout in _LAYOUT:
        shutil.rmtree(layout.workspace.parent)
    _LAYOUT.clear()
