"""Hostile paths against the file tools, through the real loop: zero escapes.

A workspace full of traps (symlinks out as files, folders, chains, in the middle of a path, dangling,
loops; FIFOs and sockets; links to devices and /proc) sits beside an ``outside`` folder holding a
canary secret. Hundreds of generated path-escape attempts go to read_file, write_file, edit_file,
list_files and search_files as tool calls of a real :class:`~loopwright.Agent` run. Each must come
back as a ``scope error`` result; the canary must never appear in any result; and the outside tree
must be byte-for-byte what it was. Look-alike characters (fullwidth dots and slashes, NFD, percent
escapes), which are ordinary filename characters, are checked for containment: whatever they do
happens inside the workspace. A last group races a symlink swap against the tools.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
import shutil
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers import assert_paired

from loopwright import Agent, ToolCall
from loopwright.messages import Message, ToolResultMessage
from loopwright.testing import FunctionModel
from loopwright.testing._models import AgentInfo
from loopwright.tools import ScopeError, ToolContext
from loopwright.tools.builtin import builtin_tool

CANARY = f"CANARY-{secrets.token_hex(8)}"
FILE_TOOLS = ("read_file", "write_file", "edit_file", "list_files", "search_files")
BATCH = 60


@dataclass(frozen=True)
class Layout:
    base: Path
    ws: Path
    outside: Path


def build_layout(base: Path) -> Layout:
    ws, outside = base / "ws", base / "outside"
    (ws / "sub" / "deep").mkdir(parents=True)
    (ws / "sessions").mkdir()
    (ws / ".loopwright").mkdir()
    (outside / "dir").mkdir(parents=True)
    (outside / "canary.txt").write_text(f"{CANARY}\nx\n")
    (outside / "dir" / "canary2.txt").write_text(f"second {CANARY}\n")
    (base / "sibling.txt").write_text(f"sibling {CANARY}\n")
    (ws / "inside.txt").write_text("inside x\n")
    (ws / "sub" / "file.txt").write_text("sub file x\n")
    (ws / "sessions" / "s.jsonl").write_text("{}\n")
    (ws / ".loopwright" / "state").write_text("{}\n")
    os.mkfifo(ws / "fifo")
    os.mkfifo(outside / "fifo")
    links = {
        "link_file_out": outside / "canary.txt",
        "rel_file_out": Path("../outside/canary.txt"),
        "link_dir_out": outside,
        "rel_dir_out": Path("../outside"),
        "chain1": Path("chain2"),
        "chain2": Path("chain3"),
        "chain3": Path("rel_dir_out"),
        "dangling_out": outside / "created-by-attack.txt",
        "dangling_dir_out": outside / "newdir",
        "loop1": Path("loop2"),
        "loop2": Path("loop1"),
        "dev_zero": Path("/dev/zero"),
        "dev_random": Path("/dev/random"),
        "dev_null": Path("/dev/null"),
        "proc_self": Path("/proc/self"),
        "proc_environ": Path("/proc/self/environ"),
        "etc": Path("/etc"),
        "root": Path("/"),
        "fifo_link": Path("fifo"),
        "fifo_out": outside / "fifo",
        "to_sessions": Path("sessions"),
        "to_state": Path(".loopwright/state"),
        "ws_self": Path("."),
        "sibling": Path("../sibling.txt"),
    }
    for name, target in links.items():
        (ws / name).symlink_to(target)
    (ws / "sub" / "mid").symlink_to(Path("../../outside"))  # a symlink in the middle of a path
    (ws / "sub" / "up").symlink_to(Path(".."))
    (ws / "sub" / "deep" / "out").symlink_to(Path("../../../outside/dir"))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(ws / "sock"))
    sock.close()  # the socket file stays
    return Layout(base, ws, outside)


def snapshot(root: Path) -> dict[str, Any]:
    """Everything under ``root``: file bytes, link targets, folder and special-file markers."""
    found: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            key = os.path.relpath(path, root)
            if os.path.islink(path):
                found[key] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                found[key] = ("dir", os.stat(path).st_mode)
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    found[key] = ("file", f.read(), os.stat(path).st_mode)
            else:
                found[key] = ("special", os.stat(path).st_mode)
    return found


def outside_state(layout: Layout) -> dict[str, Any]:
    """The whole base folder except the workspace (the outside tree, the sibling file)."""
    state = snapshot(layout.base)
    return {k: v for k, v in state.items() if k != "ws" and not k.startswith("ws" + os.sep)}


# --- the attempts ----------------------------------------------------------------------------------

TRAVERSAL_PREFIXES = [
    "..",
    "../",
    "./..",
    "./../",
    "..//",
    "sub/../..",
    "sub/./../..",
    "sub/deep/../../..",
    "sub//..//..//",
    "new/../..",
    "sub/up/..",
    "sub/up/sub/up/..",
    "inside.txt/../..",
    "../ws/..",
    ".././.",
    "../../../../../../../../..",
]
TRAVERSAL_TARGETS = ["outside/canary.txt", "outside/dir/canary2.txt", "sibling.txt", "outside", ""]
ABSOLUTE = [
    "/etc/passwd",
    "//etc/passwd",
    "/./etc/./passwd",
    "/dev/zero",
    "/dev/random",
    "/proc/self/environ",
    "/proc/self/cwd/../outside/canary.txt",
    "/tmp",
    "/",
    "~",
    "~/",
    "~/.bashrc",
    "~root/.ssh/id_rsa",
    "C:\\Windows\\win.ini",
    "C:/Windows/win.ini",
    "c:relative",
    "\\\\server\\share\\x",
    "\\etc\\passwd",
    "..\\outside\\canary.txt",
    "sub\\..\\..\\outside\\canary.txt",
]
SYMLINKS = [
    "link_file_out",
    "rel_file_out",
    "link_dir_out",
    "link_dir_out/",
    "link_dir_out/canary.txt",
    "rel_dir_out/canary.txt",
    "rel_dir_out/dir/canary2.txt",
    "chain1",
    "chain1/canary.txt",
    "chain2/dir",
    "chain3/dir/canary2.txt",
    "dangling_out",
    "dangling_dir_out/x.txt",
    "loop1",
    "loop1/x",
    "loop2/../link_file_out",
    "sub/mid",
    "sub/mid/canary.txt",
    "sub/mid/dir/canary2.txt",
    "sub/deep/out",
    "sub/deep/out/canary2.txt",
    "sub/up/link_file_out",
    "sub/up/sub/mid/canary.txt",
    "ws_self/link_file_out",
    "ws_self/../outside/canary.txt",
    "etc",
    "etc/passwd",
    "root/etc/passwd",
    "root",
    "sibling",
    "link_dir_out/../outside/canary.txt",
]
SPECIAL = [
    "fifo",
    "fifo_link",
    "fifo_out",
    "sock",
    "dev_zero",
    "dev_random",
    "dev_null",
    "proc_self",
    "proc_self/environ",
    "proc_self/cwd",
    "proc_environ",
]
PROTECTED = [
    "sessions",
    "sessions/s.jsonl",
    "SESSIONS/s.jsonl",
    "./sessions/s.jsonl",
    "sub/../sessions/s.jsonl",
    "to_sessions/s.jsonl",
    ".loopwright/state",
    ".LoopWright/state",
    "to_state",
]
CONTROL = [
    "inside.txt\x00../../outside/canary.txt",
    "\x00",
    "../outside/canary.txt\x00",
    "a\nb",
    "\u202e../outside/canary.txt",
    "\u200f../outside/canary.txt",
    "\u202a..\u202c/outside/canary.txt",
    "\u2066../outside\u2069/canary.txt",
    "inside\u2028.txt",
    "\x1b[31m../outside",
    "\ud800../outside",
    "",
    "   ",
    "x" * 5000,
    "../" * 2000 + "outside/canary.txt",
    "a/" * 2100,
]


def escape_paths() -> dict[str, list[str]]:
    traversal = [f"{p.rstrip('/')}/{t}" if t else p for p in TRAVERSAL_PREFIXES for t in TRAVERSAL_TARGETS]
    return {
        "traversal": traversal,
        "absolute": ABSOLUTE,
        "symlink": SYMLINKS,
        "special": SPECIAL,
        "protected": PROTECTED,
        "control": CONTROL,
    }


LOOKALIKES = [
    "\uff0e\uff0e/outside/canary.txt",  # fullwidth full stops
    "\uff0e\uff0e\uff0foutside\uff0fcanary.txt",  # and fullwidth solidus
    "..\u2215outside\u2215canary.txt",  # division slash
    "\u2024\u2024/outside/canary.txt",  # one dot leader
    "\u2025/outside/canary.txt",  # two dot leader
    ".\u0338./outside",
    "%2e%2e/outside/canary.txt",
    "..%2foutside%2fcanary.txt",
    "%2e%2e%2f%2e%2e%2f",
    "file:///etc/passwd",
    "...",
    "..../outside",
    ". ./outside",
    ".. /outside/canary.txt",
    "e\u0301/../../outside/canary.txt",  # NFD: normalised, still a plain folder name + traversal
    "\u00e9/../../outside/canary.txt",
    "x" * 300,  # a name over NAME_MAX
]


def arguments_for(tool: str, path: str) -> dict[str, Any]:
    if tool == "read_file":
        return {"path": path}
    if tool == "write_file":
        return {"path": path, "content": "PWNED by a hostile path"}
    if tool == "edit_file":
        return {"path": path, "old_text": "x", "new_text": "PWNED"}
    if tool == "list_files":
        return {"path": path, "recursive": True}
    return {"pattern": "CANARY|x", "path": path}


@dataclass
class Attempt:
    category: str
    tool: str
    path: str
    call_id: str


def plan(paths: dict[str, list[str]]) -> list[Attempt]:
    counter = itertools.count()
    return [
        Attempt(category, tool, path, f"h{next(counter)}")
        for category, group in paths.items()
        for path in group
        for tool in FILE_TOOLS
    ]


def batch_model(attempts: list[Attempt]) -> FunctionModel:
    """A model that sends the attempts as tool calls, ``BATCH`` per step, then answers."""
    batches = [attempts[i : i + BATCH] for i in range(0, len(attempts), BATCH)]
    steps = iter(batches)

    def respond(messages: list[Message], info: AgentInfo) -> str | list[ToolCall]:
        batch = next(steps, None)
        if batch is None:
            return "done"
        return [
            ToolCall(id=a.call_id, name=a.tool, arguments=json.dumps(arguments_for(a.tool, a.path)))
            for a in batch
        ]

    return FunctionModel(respond)


async def run_attempts(layout: Layout, attempts: list[Attempt]) -> dict[str, ToolResultMessage]:
    tools = [builtin_tool(name, layout.ws) for name in FILE_TOOLS]
    agent = Agent(
        batch_model(attempts),
        tools=tools,
        config={"max_tool_iterations": len(attempts) // BATCH + 5, "repeat_limit": 1000},
    )
    report = await agent.run("try to escape", session_id="hostile")
    assert report.reason == "done", report.error
    loaded = await agent.store.load("hostile")
    assert_paired(loaded.messages)
    results = {m.tool_call_id: m for m in loaded.messages if isinstance(m, ToolResultMessage)}
    assert len(results) == len(attempts)  # every call got exactly one result
    return results


def refusal(attempt: Attempt) -> str | tuple[str, ...]:
    """How the model must be told no: a scope error (a lone surrogate cannot even be valid JSON)."""
    if any("\ud800" <= ch <= "\udfff" for ch in attempt.path):
        return ("scope error: ", f"invalid arguments for tool {attempt.tool!r}: arguments are not valid JSON")
    return "scope error: "


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[Layout]:
    yield build_layout(tmp_path)


async def test_at_least_200_escape_attempts_all_refused_with_scope_errors(layout: Layout) -> None:
    attempts = plan(escape_paths())
    assert len(attempts) >= 200, len(attempts)
    before = outside_state(layout)
    results = await run_attempts(layout, attempts)
    failures = []
    for attempt in attempts:
        result = results[attempt.call_id]
        if CANARY in result.content:
            failures.append(f"LEAK {attempt}: {result.content[:200]!r}")
        elif not (result.is_error and result.content.startswith(refusal(attempt))):
            failures.append(f"not a scope error {attempt}: {result.content[:200]!r}")
    assert not failures, "\n".join(failures[:20]) + f"\n({len(failures)} of {len(attempts)})"
    assert outside_state(layout) == before  # nothing outside was written, changed or removed
    categories = {a.category for a in attempts}
    assert categories == {"traversal", "absolute", "symlink", "special", "protected", "control"}
    print(f"{len(attempts)} escape attempts, 0 escapes")


async def test_lookalike_characters_stay_inside_the_workspace(layout: Layout) -> None:
    attempts = plan({"lookalike": LOOKALIKES})
    before = outside_state(layout)
    results = await run_attempts(layout, attempts)
    for attempt in attempts:
        content = results[attempt.call_id].content
        assert CANARY not in content, attempt
    assert outside_state(layout) == before
    # whatever was created went into the workspace, under the literal look-alike name
    assert (layout.ws / "\uff0e\uff0e" / "outside" / "canary.txt").read_text() == "PWNED by a hostile path"


async def test_whole_workspace_listing_and_search_never_follow_links_out(layout: Layout) -> None:
    ctx = ToolContext(run_id="r", session_id="s", call_id="c", tool_name="t", step=0, workspace=layout.ws)
    listing = builtin_tool("list_files", layout.ws)
    search = builtin_tool("search_files", layout.ws)
    listed = await listing.call(listing.validate('{"path": ".", "recursive": true}'), ctx)
    found = await search.call(search.validate('{"pattern": "CANARY|x"}'), ctx)
    assert CANARY not in listed + found
    assert "canary.txt" not in listed  # the link is listed by name, never entered
    assert "link_dir_out" in listed and "inside.txt:1: inside x" in found


_SEGMENTS = [
    "..",
    ".",
    "",
    "sub",
    "deep",
    "mid",
    "up",
    "out",
    "link_dir_out",
    "rel_dir_out",
    "chain1",
    "loop1",
    "ws_self",
    "root",
    "etc",
    "outside",
    "canary.txt",
    "dir",
    "canary2.txt",
    "fifo",
    "sock",
    "proc_self",
    "environ",
    "sessions",
    "\uff0e\uff0e",
    "\u202e",
    "\x00",
    "~",
    "/",
]


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    segments=st.lists(st.sampled_from(_SEGMENTS), min_size=1, max_size=8),
    tool_name=st.sampled_from(FILE_TOOLS),
)
async def test_generated_paths_never_escape(layout: Layout, segments: list[str], tool_name: str) -> None:
    path = "/".join(segments)
    before = outside_state(layout)
    t = builtin_tool(tool_name, layout.ws)
    ctx = ToolContext(
        run_id="r", session_id="s", call_id="c", tool_name=tool_name, step=0, workspace=layout.ws
    )
    try:
        result = await t.call(t.validate(json.dumps(arguments_for(tool_name, path))), ctx)
    except (ScopeError, OSError, ValueError):
        result = None
    assert result is None or CANARY not in str(result), path
    assert outside_state(layout) == before, path


# --- a symlink swapped between the check and the use -----------------------------------------------


@pytest.mark.parametrize("tool_name", ["read_file", "edit_file", "write_file", "search_files"])
async def test_a_file_swapped_for_a_symlink_while_tools_run_never_leaks(
    layout: Layout, tool_name: str
) -> None:
    """A thread keeps replacing ``race.txt`` by a symlink to the canary and back while the tool runs."""
    race = layout.ws / "race.txt"
    race.write_text("harmless x\n")
    stop = threading.Event()

    def swapper() -> None:
        temp_link, temp_file = layout.ws / ".race-link", layout.ws / ".race-file"
        while not stop.is_set():
            temp_link.unlink(missing_ok=True)
            temp_link.symlink_to(layout.outside / "canary.txt")
            os.replace(temp_link, race)
            temp_file.write_text("harmless x\n")
            os.replace(temp_file, race)

    before = outside_state(layout)
    t = builtin_tool(tool_name, layout.ws)
    ctx = ToolContext(
        run_id="r", session_id="s", call_id="c", tool_name=tool_name, step=0, workspace=layout.ws
    )
    arguments = t.validate(json.dumps(arguments_for(tool_name, "race.txt")))
    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    outcomes: set[str] = set()
    try:
        for _ in range(300):
            try:
                result = await t.call(arguments, ctx)
                outcomes.add("ok")
                assert CANARY not in str(result)
            except (ScopeError, OSError, ValueError) as exc:
                outcomes.add(type(exc).__name__)
                assert CANARY not in str(exc)
    finally:
        stop.set()
        thread.join()
    assert outside_state(layout) == before
    assert outcomes  # the tool ran; each call either worked on the workspace file or was refused


@pytest.mark.parametrize("tool_name", ["read_file", "edit_file", "write_file", "search_files", "list_files"])
async def test_a_folder_swapped_for_a_symlink_while_tools_run_never_leaks(
    layout: Layout, tool_name: str
) -> None:
    """A thread keeps replacing the folder ``swap/`` by a symlink to the outside folder and back."""
    folder = layout.ws / "swap"
    folder.mkdir()
    (folder / "canary.txt").write_text("harmless x\n")
    stop = threading.Event()

    def swapper() -> None:
        parked = layout.ws / ".parked"
        link = layout.ws / ".swap-link"
        while not stop.is_set():
            with contextlib.suppress(OSError):
                os.rename(folder, parked)
                link.unlink(missing_ok=True)
                link.symlink_to(layout.outside)
                os.replace(link, folder)
            with contextlib.suppress(OSError):  # back to the real folder (a write may have made a new one)
                if folder.is_symlink():
                    os.unlink(folder)
                elif folder.is_dir() and parked.exists():
                    shutil.rmtree(folder)
                if parked.exists():
                    os.rename(parked, folder)

    before = outside_state(layout)
    t = builtin_tool(tool_name, layout.ws)
    ctx = ToolContext(
        run_id="r", session_id="s", call_id="c", tool_name=tool_name, step=0, workspace=layout.ws
    )
    path = "swap" if tool_name == "list_files" else "swap/canary.txt"
    arguments = t.validate(json.dumps(arguments_for(tool_name, path)))
    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    try:
        for _ in range(300):
            try:
                result = await t.call(arguments, ctx)
                assert CANARY not in str(result)
                assert "dir/" not in str(result)  # the outside folder's listing
            except (ScopeError, OSError, ValueError) as exc:
                assert CANARY not in str(exc)
    finally:
        stop.set()
        thread.join()
    assert outside_state(layout) == before
