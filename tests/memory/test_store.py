"""MemoryStore: daily notes, MEMORY.md sections, atomic writes, and confinement to the memory files."""

from __future__ import annotations

import os
import threading
from datetime import date
from pathlib import Path

import pytest

from loopwright.memory import MemoryStore
from loopwright.tools import ScopeError
from tests.memory.helpers import clock, write


@pytest.fixture
def store(root: Path) -> MemoryStore:
    return MemoryStore(root, clock=clock)


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# --- daily notes ---------------------------------------------------------------------------------


def test_append_note_creates_the_dated_file(store: MemoryStore, root: Path) -> None:
    path = store.append_note("Deployed v2 to staging.")
    assert path == root / "memory" / "2024-05-01.md"
    assert path.read_text() == "# 2024-05-01\n\n- 09:30 Deployed v2 to staging.\n"


def test_append_note_appends_and_keeps_what_is_there(store: MemoryStore, root: Path) -> None:
    write(root, {"memory/2024-05-01.md": "# 2024-05-01\n\nwritten by hand, no newline"})
    store.append_note("first")
    store.append_note("second")
    assert (root / "memory/2024-05-01.md").read_text() == (
        "# 2024-05-01\n\nwritten by hand, no newline\n- 09:30 first\n- 09:30 second\n"
    )


def test_append_note_on_another_day(store: MemoryStore, root: Path) -> None:
    path = store.append_note("looking back", when=date(2023, 12, 31))
    assert path.name == "2023-12-31.md"
    assert path.read_text() == "# 2023-12-31\n\n- 09:30 looking back\n"
    assert store.note_name(date(2023, 12, 31)) == "memory/2023-12-31.md"


def test_multi_line_note_stays_one_bullet(store: MemoryStore) -> None:
    path = store.append_note("Release plan:\r\n1. freeze\n\n2. ship\n")
    assert path.read_text().endswith("- 09:30 Release plan:\n  1. freeze\n\n  2. ship\n")


@pytest.mark.parametrize("text", ["", "   \n\n", "bad\x00byte"])
def test_unusable_note_text_is_refused(store: MemoryStore, root: Path, text: str) -> None:
    with pytest.raises(ValueError):
        store.append_note(text)
    assert not (root / "memory" / "2024-05-01.md").exists()


def test_concurrent_appends_all_land(store: MemoryStore) -> None:
    barrier = threading.Barrier(16)

    def append(number: int) -> None:
        barrier.wait()
        store.append_note(f"note {number}")

    threads = [threading.Thread(target=append, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    text = store.resolve("memory/2024-05-01.md").read_text()
    assert sorted(line for line in text.splitlines() if line.startswith("- ")) == sorted(
        f"- 09:30 note {n}" for n in range(16)
    )


def test_writes_replace_the_file_and_leave_no_temporary_files(store: MemoryStore, root: Path) -> None:
    first = store.append_note("one")
    inode = first.stat().st_ino
    store.append_note("two")
    assert first.stat().st_ino != inode  # renamed over, never rewritten in place
    store.write_memory("fact")
    assert files_under(root / "memory") == ["2024-05-01.md"]
    assert sorted(p.name for p in root.iterdir()) == [".loopwright", "MEMORY.md", "memory"]


# --- MEMORY.md -----------------------------------------------------------------------------------

DOC = """\
# Memory

Intro.

## Preferences

- Likes dark roast coffee.
- Dark mode everywhere.

```markdown
## Work
not a heading: inside a code block
```

## Work

Ships on Fridays.
"""


def test_read_memory(store: MemoryStore, root: Path) -> None:
    assert store.read_memory() == ""
    write(root, {"MEMORY.md": DOC})
    assert store.read_memory() == DOC


def test_append_to_a_missing_memory_file(store: MemoryStore, root: Path) -> None:
    store.write_memory("The user is Ada.")
    assert (root / "MEMORY.md").read_text() == "# Memory\n\nThe user is Ada.\n"
    store.write_memory("- Likes tea.", section="Preferences")
    assert (root / "MEMORY.md").read_text() == (
        "# Memory\n\nThe user is Ada.\n\n## Preferences\n\n- Likes tea.\n"
    )


def test_append_goes_to_the_end_of_an_existing_section(store: MemoryStore, root: Path) -> None:
    write(root, {"MEMORY.md": DOC})
    store.write_memory("- Prefers metric units.", section="  preferences ")
    text = (root / "MEMORY.md").read_text()
    assert "```\n\n- Prefers metric units.\n\n## Work\n" in text  # the code block is part of the section
    assert text.count("## Preferences") == 1


def test_a_bullet_appended_to_a_list_joins_it(store: MemoryStore, root: Path) -> None:
    write(root, {"MEMORY.md": "# Memory\n\n## Preferences\n\n- Likes tea.\n\n## Work\n\nShips.\n"})
    store.write_memory("- Prefers metric units.", section="Preferences")
    store.write_memory("Prose gets its own paragraph.", section="Preferences")
    assert (root / "MEMORY.md").read_text() == (
        "# Memory\n\n## Preferences\n\n- Likes tea.\n- Prefers metric units.\n\n"
        "Prose gets its own paragraph.\n\n## Work\n\nShips.\n"
    )


def test_replace_section_replaces_only_that_section(store: MemoryStore, root: Path) -> None:
    write(root, {"MEMORY.md": DOC})
    store.write_memory("Ships on Mondays now.", mode="replace_section", section="## Work")
    assert (root / "MEMORY.md").read_text() == DOC.replace("Ships on Fridays.", "Ships on Mondays now.")
    store.write_memory("- Tea, not coffee.", mode="replace_section", section="Preferences")
    text = (root / "MEMORY.md").read_text()
    assert "## Preferences\n\n- Tea, not coffee.\n\n## Work\n\nShips on Mondays now.\n" in text
    assert "coffee." not in text.replace("Tea, not coffee.", "")
    assert "not a heading: inside a code block" not in text  # it belonged to the replaced section


def test_replace_section_creates_a_missing_section(store: MemoryStore, root: Path) -> None:
    write(root, {"MEMORY.md": "# Memory\n"})
    store.write_memory("Oslo", mode="replace_section", section="Location")
    assert (root / "MEMORY.md").read_text() == "# Memory\n\n## Location\n\nOslo\n"


@pytest.mark.parametrize(
    ("mode", "section", "message"),
    [
        ("replace_section", None, "needs the name of the section"),
        ("append", "two\nlines", "one line"),
        ("append", "###", "empty"),
        ("append", "x" * 201, "longer than 200"),
        ("overwrite", None, "unknown mode"),
    ],
)
def test_bad_write_requests_are_refused(
    store: MemoryStore, root: Path, mode: str, section: str | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        store.write_memory("text", mode=mode, section=section)  # type: ignore[arg-type]
    assert not (root / "MEMORY.md").exists()


# --- confinement ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "AGENT.md",
        "../MEMORY.md",
        "memory/../AGENT.md",
        "memory/../../outside/secret.md",
        "/etc/passwd",
        "~/MEMORY.md",
        "memory/sub/2024-05-01.md",
        "memory//2024-05-01.md",
        "memory/.hidden.md",
        "memory/notes.txt",
        "memory/",
        "memory",
        "memory\\2024-05-01.md",
        "./MEMORY.md",
        "MEMORY.md/",
        "memory/x.md\x00",
        "sessions/x/transcript.jsonl",
        "",
    ],
)
def test_only_memory_files_resolve(store: MemoryStore, name: str) -> None:
    with pytest.raises(ScopeError):
        store.resolve(name)


def test_memory_files_resolve_to_their_real_paths(store: MemoryStore, root: Path) -> None:
    real = Path(os.path.realpath(root))
    assert store.resolve("MEMORY.md") == real / "MEMORY.md"
    assert store.resolve("memory/2024-05-01.md") == real / "memory" / "2024-05-01.md"
    assert store.resolve("memory/project-x.notes.md") == real / "memory" / "project-x.notes.md"


def test_a_memory_folder_symlinked_out_is_refused(store: MemoryStore, root: Path, outside: Path) -> None:
    (root / "memory").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ScopeError, match="symlink"):
        store.append_note("escape")
    assert files_under(outside) == ["secret.md"]


def test_a_memory_folder_symlinked_inside_the_workspace_is_refused(store: MemoryStore, root: Path) -> None:
    (root / "docs").mkdir()
    (root / "memory").symlink_to(root / "docs", target_is_directory=True)
    with pytest.raises(ScopeError, match="symlink"):
        store.append_note("sideways")
    assert list((root / "docs").iterdir()) == []


def test_a_broken_memory_folder_symlink_is_refused(store: MemoryStore, root: Path, outside: Path) -> None:
    (root / "memory").symlink_to(outside / "new-folder", target_is_directory=True)
    with pytest.raises(ScopeError):
        store.append_note("escape")
    assert not (outside / "new-folder").exists()


def test_memory_md_symlinked_out_is_neither_read_nor_written(
    store: MemoryStore, root: Path, outside: Path
) -> None:
    (root / "MEMORY.md").symlink_to(outside / "secret.md")
    with pytest.raises(ScopeError):
        store.read_memory()
    with pytest.raises(ScopeError):
        store.write_memory("overwrite?")
    assert (outside / "secret.md").read_text() == "do not touch\n"


def test_memory_md_symlinked_to_agent_md_is_refused(store: MemoryStore, root: Path) -> None:
    write(root, {"AGENT.md": "You are careful.\n"})
    (root / "MEMORY.md").symlink_to(root / "AGENT.md")
    with pytest.raises(ScopeError, match="must not be symlinks"):
        store.write_memory("You are reckless.")
    assert (root / "AGENT.md").read_text() == "You are careful.\n"


def test_a_daily_note_symlinked_out_is_refused(store: MemoryStore, root: Path, outside: Path) -> None:
    (root / "memory").mkdir()
    (root / "memory" / "2024-05-01.md").symlink_to(outside / "secret.md")
    with pytest.raises(ScopeError):
        store.append_note("escape")
    assert (outside / "secret.md").read_text() == "do not touch\n"


def test_memory_as_a_file_is_refused(store: MemoryStore, root: Path) -> None:
    write(root, {"memory": "a file, not a folder"})
    with pytest.raises((ScopeError, NotADirectoryError)):
        store.append_note("x")
    assert (root / "memory").read_text() == "a file, not a folder"
