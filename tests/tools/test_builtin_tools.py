"""Built-in tools end to end in a temporary workspace, through validate() and call() as the loop does."""

import os
import re
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loopwright.tools._function import FunctionTool
from loopwright.tools._scope import ScopeError
from loopwright.tools.base import Tool, ToolContext
from loopwright.tools.builtin import BUILTIN_TOOL_NAMES, builtin_tool, builtin_tools


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "sessions").mkdir()
    (ws / ".loopwright").mkdir()
    (ws / "src" / "app.py").write_text("import os\n\ndef main():\n    return 42\n")
    (ws / "src" / "pkg" / "util.py").write_text("def helper():\n    return 'help'\n")
    (ws / "README.md").write_text("# Demo\nmain entry\n")
    (ws / "sessions" / "s1.jsonl").write_text('{"main": "transcript"}\n')
    (ws / ".loopwright" / "state.json").write_text('{"main": 1}\n')
    (tmp_path / "outside.txt").write_text("main secret\n")
    return ws


async def run(workspace: Path, ctx: ToolContext, name: str, arguments: str) -> Any:
    t = builtin_tool(name, workspace)
    return await t.call(t.validate(arguments), ctx)


# --- registry ------------------------------------------------------------------------------------


def test_names_and_registry(workspace: Path) -> None:
    assert BUILTIN_TOOL_NAMES == (
        "read_file",
        "list_files",
        "write_file",
        "edit_file",
        "search_files",
        "current_time",
        "exec",
        "memory_write",
        "memory_search",
    )
    tools = builtin_tools(workspace)
    assert [t.name for t in tools] == [
        n for n in BUILTIN_TOOL_NAMES if n != "exec"
    ]  # the shell: only by name
    assert all(isinstance(t, Tool) for t in tools)
    assert [t.name for t in builtin_tools(workspace, ["current_time", "read_file"])] == [
        "current_time",
        "read_file",
    ]


def test_unknown_name_lists_the_known_ones(workspace: Path) -> None:
    with pytest.raises(KeyError) as info:
        builtin_tool("rm_rf", workspace)
    assert info.value.args[0] == (
        "unknown built-in tool 'rm_rf'; known tools: "
        "read_file, list_files, write_file, edit_file, search_files, current_time, "
        "exec, memory_write, memory_search"
    )


def test_definitions_are_described_for_the_model(workspace: Path) -> None:
    read_file = builtin_tool("read_file", workspace)
    assert read_file.description == "Read a UTF-8 text file from the workspace, as numbered lines."
    assert read_file.parameters == {
        "type": "object",
        "properties": {
            "path": {
                "description": 'File path relative to the workspace, e.g. "src/app.py".',
                "type": "string",
            },
            "offset": {
                "description": "Number of lines to skip from the start of the file.",
                "minimum": 0,
                "type": "integer",
                "default": 0,
            },
            "limit": {
                "description": "Maximum number of lines to return.",
                "maximum": 10000,
                "minimum": 1,
                "type": "integer",
                "default": 2000,
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    for t in builtin_tools(workspace):
        assert t.description
        assert all(p.get("description") for p in t.parameters["properties"].values())


def test_idempotence_flags(workspace: Path) -> None:
    flags = {}
    for t in builtin_tools(workspace):
        assert isinstance(t, FunctionTool)
        flags[t.name] = t.idempotent
    assert flags == {
        "read_file": True,
        "list_files": True,
        "write_file": True,
        "edit_file": False,
        "search_files": True,
        "current_time": True,
        "memory_write": False,
        "memory_search": True,
    }


# --- read_file -----------------------------------------------------------------------------------


async def test_read_file_numbers_lines(workspace: Path, ctx: ToolContext) -> None:
    assert await run(workspace, ctx, "read_file", '{"path": "src/app.py"}') == (
        "     1\timport os\n     2\t\n     3\tdef main():\n     4\t    return 42"
    )


async def test_read_file_window_says_how_many_lines_there_are(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    assert await run(workspace, ctx, "read_file", '{"path": "long.txt", "offset": 10, "limit": 2}') == (
        "    11\tline 11\n    12\tline 12\n(lines 11-12 of 100; call again with offset=12 for more)"
    )
    assert await run(workspace, ctx, "read_file", '{"path": "long.txt", "offset": 99}') == (
        "   100\tline 100\n(lines 100-100 of 100)"
    )
    with pytest.raises(ValueError, match=re.escape("'long.txt' has 100 lines; offset 100 is past the end")):
        await run(workspace, ctx, "read_file", '{"path": "long.txt", "offset": 100}')


async def test_read_file_handles_crlf_empty_and_long_lines(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    (workspace / "empty.txt").write_bytes(b"")
    (workspace / "wide.txt").write_text("x" * 5000)
    assert await run(workspace, ctx, "read_file", '{"path": "crlf.txt"}') == "     1\ta\n     2\tb"
    assert await run(workspace, ctx, "read_file", '{"path": "empty.txt"}') == "('empty.txt' is empty)"
    wide = await run(workspace, ctx, "read_file", '{"path": "wide.txt"}')
    assert wide == "     1\t" + "x" * 2000 + " … (line truncated)"


async def test_read_file_refuses_binary_and_non_utf8(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (workspace / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    with pytest.raises(ValueError, match=re.escape("'image.png' is a binary file")):
        await run(workspace, ctx, "read_file", '{"path": "image.png"}')
    with pytest.raises(ValueError, match=re.escape("'latin1.txt' is not a UTF-8 text file")):
        await run(workspace, ctx, "read_file", '{"path": "latin1.txt"}')


async def test_read_file_errors(workspace: Path, ctx: ToolContext) -> None:
    with pytest.raises(FileNotFoundError) as missing:
        await run(workspace, ctx, "read_file", '{"path": "nope.txt"}')
    assert str(missing.value) == "[Errno 2] no such file or folder: 'nope.txt'"
    with pytest.raises(IsADirectoryError, match=re.escape("'src' is a folder; use list_files")):
        await run(workspace, ctx, "read_file", '{"path": "src"}')
    with pytest.raises(ScopeError, match="outside the workspace"):
        await run(workspace, ctx, "read_file", '{"path": "../outside.txt"}')
    with pytest.raises(ScopeError, match="protected folder"):
        await run(workspace, ctx, "read_file", '{"path": "sessions/s1.jsonl"}')


async def test_read_file_refuses_a_fifo_without_hanging(workspace: Path, ctx: ToolContext) -> None:
    os.mkfifo(workspace / "pipe")
    with pytest.raises(ScopeError, match="FIFO"):
        await run(workspace, ctx, "read_file", '{"path": "pipe"}')


# --- list_files ----------------------------------------------------------------------------------


async def test_list_files(workspace: Path, ctx: ToolContext) -> None:
    assert await run(workspace, ctx, "list_files", "") == "README.md\nsrc/"
    assert await run(workspace, ctx, "list_files", '{"path": "src"}') == "src/app.py\nsrc/pkg/"
    assert await run(workspace, ctx, "list_files", '{"recursive": true}') == (
        "README.md\nsrc/\nsrc/app.py\nsrc/pkg/\nsrc/pkg/util.py"
    )


async def test_list_files_does_not_follow_symlinks_out(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "out").symlink_to(workspace.parent)
    listing = await run(workspace, ctx, "list_files", '{"recursive": true}')
    assert "out" in listing.splitlines()
    assert "outside.txt" not in listing
    with pytest.raises(ScopeError):
        await run(workspace, ctx, "list_files", '{"path": "out"}')


async def test_list_files_caps_entries(workspace: Path, ctx: ToolContext) -> None:
    many = workspace / "many"
    many.mkdir()
    for i in range(510):
        (many / f"f{i:04}").write_bytes(b"")
    flat = (await run(workspace, ctx, "list_files", '{"path": "many"}')).splitlines()
    assert len(flat) == 501
    assert flat[0] == "many/f0000"
    assert flat[-1] == "... (10 more entries not shown; list a subfolder to see them)"
    deep = (await run(workspace, ctx, "list_files", '{"recursive": true}')).splitlines()
    assert len(deep) == 501
    assert deep[-1] == "... (more entries not shown; list a subfolder to see them)"


async def test_list_files_errors_and_empty(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "empty").mkdir()
    assert await run(workspace, ctx, "list_files", '{"path": "empty"}') == "('empty' is empty)"
    with pytest.raises(NotADirectoryError, match=re.escape("'README.md' is a file")):
        await run(workspace, ctx, "list_files", '{"path": "README.md"}')
    with pytest.raises(ScopeError, match="protected folder"):
        await run(workspace, ctx, "list_files", '{"path": "sessions"}')


# --- write_file ----------------------------------------------------------------------------------


async def test_write_file_creates_parents_and_returns_bytes(workspace: Path, ctx: ToolContext) -> None:
    written = await run(workspace, ctx, "write_file", '{"path": "new/deep/note.md", "content": "héllo\\n"}')
    assert written == len("héllo\n".encode())
    assert (workspace / "new" / "deep" / "note.md").read_text() == "héllo\n"
    assert await run(workspace, ctx, "read_file", '{"path": "new/deep/note.md"}') == "     1\théllo"


async def test_write_file_replaces_atomically_and_keeps_the_mode(workspace: Path, ctx: ToolContext) -> None:
    target = workspace / "script.sh"
    target.write_text("old")
    target.chmod(0o751)
    await run(workspace, ctx, "write_file", '{"path": "script.sh", "content": "new"}')
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert [name for name in os.listdir(workspace) if name.endswith(".tmp")] == []


async def test_write_file_through_symlink_inside_writes_the_target(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "alias.md").symlink_to("README.md")
    await run(workspace, ctx, "write_file", '{"path": "alias.md", "content": "via alias"}')
    assert (workspace / "README.md").read_text() == "via alias"
    assert (workspace / "alias.md").is_symlink()


async def test_write_file_refusals(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "out_dir").symlink_to(workspace.parent)
    (workspace / "out_file").symlink_to(workspace.parent / "outside.txt")
    for path in [
        "../x.txt",
        "out_dir/x.txt",
        "out_file",
        "sessions/s1.jsonl",
        ".loopwright/state.json",
        "/tmp/x",
    ]:
        with pytest.raises(ScopeError):
            await run(workspace, ctx, "write_file", f'{{"path": "{path}", "content": "pwned"}}')
    assert (workspace.parent / "outside.txt").read_text() == "main secret\n"
    assert not (workspace.parent / "x.txt").exists()
    assert (workspace / "sessions" / "s1.jsonl").read_text() == '{"main": "transcript"}\n'
    with pytest.raises(IsADirectoryError, match=re.escape("'src' is a folder")):
        await run(workspace, ctx, "write_file", '{"path": "src", "content": ""}')
    with pytest.raises(NotADirectoryError, match="one of its parent folders is a file"):
        await run(workspace, ctx, "write_file", '{"path": "README.md/x.txt", "content": ""}')


# --- edit_file -----------------------------------------------------------------------------------


async def test_edit_file_replaces_exactly_once(workspace: Path, ctx: ToolContext) -> None:
    result = await run(
        workspace,
        ctx,
        "edit_file",
        '{"path": "src/app.py", "old_text": "return 42", "new_text": "return 43"}',
    )
    assert result == "replaced 1 occurrence in 'src/app.py'"
    assert (workspace / "src" / "app.py").read_text() == "import os\n\ndef main():\n    return 43\n"


async def test_edit_file_keeps_crlf(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "win.txt").write_bytes(b"one\r\ntwo\r\n")
    await run(workspace, ctx, "edit_file", '{"path": "win.txt", "old_text": "two", "new_text": "2"}')
    assert (workspace / "win.txt").read_bytes() == b"one\r\n2\r\n"


async def test_edit_file_errors(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "dup.txt").write_text("x = 1\nx = 1\n")
    (workspace / "overlap.txt").write_text("aaa")
    with pytest.raises(ValueError, match=re.escape("old_text was not found in 'src/app.py'")):
        await run(
            workspace, ctx, "edit_file", '{"path": "src/app.py", "old_text": "nothing", "new_text": ""}'
        )
    with pytest.raises(ValueError, match=re.escape("old_text occurs 2 times in 'dup.txt'")):
        await run(workspace, ctx, "edit_file", '{"path": "dup.txt", "old_text": "x = 1", "new_text": "y"}')
    with pytest.raises(ValueError, match=re.escape("occurs 2 times in 'overlap.txt'")):
        await run(workspace, ctx, "edit_file", '{"path": "overlap.txt", "old_text": "aa", "new_text": "b"}')
    with pytest.raises(ValueError, match="old_text is empty"):
        await run(workspace, ctx, "edit_file", '{"path": "dup.txt", "old_text": "", "new_text": "y"}')
    with pytest.raises(FileNotFoundError, match=re.escape("'missing.txt'")):
        await run(workspace, ctx, "edit_file", '{"path": "missing.txt", "old_text": "a", "new_text": "b"}')
    with pytest.raises(ScopeError, match="protected folder"):
        await run(
            workspace, ctx, "edit_file", '{"path": "sessions/s1.jsonl", "old_text": "main", "new_text": "x"}'
        )
    assert (workspace / "dup.txt").read_text() == "x = 1\nx = 1\n"


# --- search_files --------------------------------------------------------------------------------


async def test_search_files(workspace: Path, ctx: ToolContext) -> None:
    assert await run(workspace, ctx, "search_files", '{"pattern": "main"}') == (
        "README.md:2: main entry\nsrc/app.py:3: def main():"
    )
    assert await run(workspace, ctx, "search_files", '{"pattern": "^def \\\\w+", "path": "src/pkg"}') == (
        "src/pkg/util.py:1: def helper():"
    )
    assert await run(workspace, ctx, "search_files", '{"pattern": "help", "path": "src/pkg/util.py"}') == (
        "src/pkg/util.py:1: def helper():\nsrc/pkg/util.py:2:     return 'help'"
    )
    assert await run(workspace, ctx, "search_files", '{"pattern": "zzz"}') == "no matches for 'zzz' in '.'"


async def test_search_skips_binary_symlinks_fifos_and_protected(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "blob.bin").write_bytes(b"main\x00\x01")
    (workspace / "bad.txt").write_bytes(b"main \xff\n")
    (workspace / "link_out.txt").symlink_to(workspace.parent / "outside.txt")
    (workspace / "link_dir").symlink_to(workspace.parent)
    os.mkfifo(workspace / "pipe")
    result = await run(workspace, ctx, "search_files", '{"pattern": "main|secret"}')
    assert result == "README.md:2: main entry\nsrc/app.py:3: def main():"


async def test_search_caps_matches(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "big.txt").write_text("hit\n" * 300)
    lines = (await run(workspace, ctx, "search_files", '{"pattern": "hit", "path": "big.txt"}')).splitlines()
    assert len(lines) == 201
    assert lines[199] == "big.txt:200: hit"
    assert lines[-1] == "... (stopped at 200 matches; narrow the pattern)"


async def test_search_invalid_regex(workspace: Path, ctx: ToolContext) -> None:
    with pytest.raises(ValueError, match=re.escape("invalid regular expression '(unclosed':")):
        await run(workspace, ctx, "search_files", '{"pattern": "(unclosed"}')


# --- current_time --------------------------------------------------------------------------------


async def test_current_time_is_iso_utc(workspace: Path, ctx: ToolContext) -> None:
    text = await run(workspace, ctx, "current_time", "")
    parsed = datetime.fromisoformat(text)
    assert parsed.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - parsed) < timedelta(minutes=1)


# --- extra roots ---------------------------------------------------------------------------------


async def test_extra_roots_are_reachable_by_relative_path(
    workspace: Path, ctx: ToolContext, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "doc.md").write_text("shared doc\n")
    read_file = builtin_tool("read_file", workspace, extra_roots=[shared])
    assert (
        await read_file.call(read_file.validate('{"path": "../shared/doc.md"}'), ctx) == "     1\tshared doc"
    )
    with pytest.raises(ScopeError):
        await read_file.call(read_file.validate('{"path": "../outside.txt"}'), ctx)


async def test_symlink_loop_cannot_hide_a_link_out(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "loop_a").symlink_to("loop_b")
    (workspace / "loop_b").symlink_to("loop_a")
    (workspace / "out").symlink_to(workspace.parent / "outside.txt")
    for name, arguments in [
        ("read_file", '{"path": "loop_a/../out"}'),
        ("write_file", '{"path": "loop_a/../out", "content": "pwned"}'),
        ("edit_file", '{"path": "loop_b/../out", "old_text": "main", "new_text": "x"}'),
        ("search_files", '{"pattern": "secret", "path": "loop_a/../out"}'),
    ]:
        with pytest.raises(ScopeError, match="symlink loop"):
            await run(workspace, ctx, name, arguments)
    assert (workspace.parent / "outside.txt").read_text() == "main secret\n"


def test_builtin_tools_declare_their_groups_and_levels(workspace: Path) -> None:
    from loopwright.tools.base import tool_traits

    expected = {
        "read_file": (("fs",), "guest", None),
        "list_files": (("fs",), "guest", None),
        "search_files": (("fs",), "guest", None),
        "current_time": ((), "guest", None),
        "write_file": (("fs",), "user", None),
        "edit_file": (("fs",), "user", None),
        "memory_write": (("memory",), "user", None),
        "memory_search": (("memory",), "user", None),
        "exec": (("exec",), "admin", "ask"),
    }
    got = {}
    for name in BUILTIN_TOOL_NAMES:
        traits = tool_traits(builtin_tool(name, workspace))
        got[name] = (traits.groups, traits.level, traits.permission)
    assert got == expected
