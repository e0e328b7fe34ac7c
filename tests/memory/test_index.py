"""MemoryIndex: chunking, BM25 ranking, safe queries, incremental refresh, and what is never indexed."""

from __future__ import annotations

import os
import re
import sqlite3
from datetime import date
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright.memory import MemoryHit, MemoryIndex, MemoryStore, fts_query, require_fts5
from tests.memory.helpers import age, age_all, clock, write

NOTES = {
    "MEMORY.md": (
        "# Memory\n\n## Preferences\n\n- Ada likes dark roast coffee, no sugar.\n- Dark mode everywhere.\n\n"
        "## Project\n\nThe service runs on Postgres 16 behind pgbouncer.\n"
    ),
    "memory/2024-04-29.md": (
        "# 2024-04-29\n\n"
        "- 10:02 Migrated the Postgres database to the new cluster; migration took 40 minutes.\n"
        "- 16:45 Reviewed the onboarding docs.\n"
    ),
    "memory/2024-04-30.md": (
        "# 2024-04-30\n\n- 09:15 Deployed v2 to staging.\n- 11:00 Lunch with the design team.\n"
    ),
}


@pytest.fixture
def index(root: Path) -> MemoryIndex:
    write(root, NOTES)
    age_all(root)
    return MemoryIndex(root)


def locations(hits: list[MemoryHit]) -> list[str]:
    return [hit.location for hit in hits]


def test_fts5_is_available() -> None:
    require_fts5()


# --- ranking -------------------------------------------------------------------------------------


def test_the_relevant_note_ranks_first(index: MemoryIndex) -> None:
    hits = index.search("postgres migration")
    assert hits[0] == MemoryHit(
        path="memory/2024-04-29.md",
        lines=(3, 3),
        text="- 10:02 Migrated the Postgres database to the new cluster; migration took 40 minutes.",
        score=hits[0].score,
        date=date(2024, 4, 29),
    )
    assert locations(hits) == ["memory/2024-04-29.md:3", "MEMORY.md:10"]  # both terms, then one
    assert hits[0].score > hits[1].score > 0


def test_hits_format_as_path_lines_date_text(index: MemoryIndex) -> None:
    [hit] = index.search("staging")
    assert str(hit) == "memory/2024-04-30.md:3 (2024-04-30): 09:15 Deployed v2 to staging."
    [coffee] = index.search("coffee")
    assert str(coffee) == "MEMORY.md:5: Ada likes dark roast coffee, no sugar."
    assert coffee.date is None


def test_words_are_stemmed(index: MemoryIndex) -> None:
    assert locations(index.search("deploying")) == ["memory/2024-04-30.md:3"]
    assert locations(index.search("COFFEES")) == ["MEMORY.md:5"]


def test_bm25_prefers_denser_matches(root: Path) -> None:
    write(
        root,
        {
            "memory/2024-01-01.md": "- 09:00 kafka kafka kafka consumer lag\n",
            "memory/2024-01-02.md": "- 09:00 kafka was mentioned once in a long note about many other "
            "things such as lunch, meetings, holidays, budgets and travel plans\n",
            "memory/2024-01-03.md": "- 09:00 nothing relevant here at all\n",
        },
    )
    hits = MemoryIndex(root).search("kafka")
    assert [h.path for h in hits] == ["memory/2024-01-01.md", "memory/2024-01-02.md"]
    assert hits[0].score > hits[1].score


def test_text_weighs_more_than_the_heading(root: Path) -> None:
    write(root, {"MEMORY.md": "## Coffee\n\nA chat about beans.\n\n## Other\n\nWe talked coffee.\n"})
    assert locations(MemoryIndex(root).search("coffee")) == ["MEMORY.md:7", "MEMORY.md:3"]


def test_equal_scores_go_to_the_newer_note(root: Path) -> None:
    note = "- 09:00 standup moved to 10:00\n"
    write(root, {f"memory/2024-03-0{day}.md": note for day in (1, 3, 2)})
    write(root, {"MEMORY.md": note})
    hits = MemoryIndex(root).search("standup moved")
    assert len({h.score for h in hits}) == 1
    assert [h.date for h in hits] == [date(2024, 3, 3), date(2024, 3, 2), date(2024, 3, 1), None]


def test_k_and_source_limit_the_results(index: MemoryIndex) -> None:
    assert len(index.search("the", k=2)) == 2
    assert {h.path for h in index.search("postgres", source="daily")} == {"memory/2024-04-29.md"}
    assert {h.path for h in index.search("postgres", source="memory")} == {"MEMORY.md"}
    with pytest.raises(ValueError, match="k must be between 1 and 100"):
        index.search("x", k=0)


def test_no_words_no_hits(index: MemoryIndex) -> None:
    assert index.search("") == []
    assert index.search("  -- ** :: \"' ") == []
    assert index.search("zeppelin") == []


def test_chunks_are_paragraphs_and_bullets(root: Path) -> None:
    write(
        root,
        {
            "MEMORY.md": (
                "# Memory\n\nFirst paragraph\ncontinues here.\n\n- bullet one\n- bullet two\n"
                "  continued bullet\n\n```\n# not a heading\n\nalpaca in code\n```\n"
            )
        },
    )
    index = MemoryIndex(root)
    assert locations(index.search("first paragraph")) == ["MEMORY.md:3-4"]
    assert locations(index.search("two")) == ["MEMORY.md:7-8"]
    assert locations(index.search("alpaca")) == ["MEMORY.md:10-14"]


# --- hostile queries -----------------------------------------------------------------------------

FTS_SYNTAX = ['"', "'", "-", "*", ":", "^", "(", ")", "+", "{", "}", "[", "]", ",", ".", "NEAR", "NEAR/2"]
WORDS = ["AND", "OR", "NOT", "coffee", "text:", "heading:", "chunks_fts", "\x00", "🙂", "é", "_", "\\"]
fragments = st.one_of(st.sampled_from(FTS_SYNTAX + WORDS), st.text(max_size=6))
queries = st.lists(fragments, max_size=12).flatmap(
    lambda parts: st.sampled_from(["", " ", '"']).map(lambda sep: sep.join(parts))
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=queries)
def test_any_query_text_is_searched_without_error(index: MemoryIndex, query: str) -> None:
    hits = index.search(query, k=3)
    assert len(hits) <= 3
    words = {w.lower() for w in re.findall(r"[^\W_]+", query)}
    if "coffee" in words:
        assert "MEMORY.md:5" in locations(index.search(query, k=10))


def test_fts_query_quotes_words_and_drops_syntax() -> None:
    assert fts_query('coffee AND "dark" -roast* col:x NEAR(a b)') == (
        '"coffee" OR "and" OR "dark" OR "roast" OR "col" OR "x" OR "near" OR "a" OR "b"'
    )
    assert fts_query("a a A") == '"a"'
    assert fts_query("__ -- **") is None
    assert fts_query(" ".join(f"w{i}" for i in range(100))) == " OR ".join(f'"w{i}"' for i in range(64))


# --- incremental refresh -------------------------------------------------------------------------


def test_unchanged_files_are_not_read_again(index: MemoryIndex) -> None:
    first = index.refresh()
    assert sorted(first.read) == sorted(NOTES) and first.unchanged == 0
    again = index.refresh()
    assert (again.read, again.indexed, again.removed, again.unchanged) == ((), (), (), 3)
    index.search("coffee")
    assert index.refresh().read == ()


def test_an_edited_file_is_reindexed_alone(index: MemoryIndex, root: Path) -> None:
    assert locations(index.search("staging")) == ["memory/2024-04-30.md:3"]
    note = root / "memory" / "2024-04-30.md"
    note.write_text("# 2024-04-30\n\n- 09:15 Deployed v2 to production.\n")
    age(note, 1800)
    stats = index.refresh()
    assert (stats.read, stats.indexed, stats.unchanged) == (
        ("memory/2024-04-30.md",),
        ("memory/2024-04-30.md",),
        2,
    )
    assert index.search("staging") == []
    assert locations(index.search("production")) == ["memory/2024-04-30.md:3"]


def test_a_deleted_file_leaves_the_index(index: MemoryIndex, root: Path) -> None:
    assert index.search("onboarding")
    (root / "memory" / "2024-04-29.md").unlink()
    stats = index.refresh()
    assert (stats.read, stats.removed, stats.unchanged) == ((), ("memory/2024-04-29.md",), 2)
    assert index.search("onboarding") == []
    (root / "MEMORY.md").unlink()
    assert index.search("coffee") == []


def test_a_new_file_is_found(index: MemoryIndex) -> None:
    index.refresh()
    MemoryStore(index.root, clock=clock).append_note("Booked the offsite venue.")
    assert locations(index.search("offsite venue")) == ["memory/2024-05-01.md:3"]


def test_a_same_size_rewrite_in_the_same_clock_tick_is_still_seen(root: Path) -> None:
    note = write(root, {"memory/2024-05-01.md": "- 09:00 colour is blue\n"}) / "memory" / "2024-05-01.md"
    index = MemoryIndex(root)
    assert index.search("blue")
    before = os.stat(note)
    note.write_text("- 09:00 colour is pink\n")  # same size; then force the very same mtime
    os.utime(note, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(note).st_size == before.st_size
    assert index.search("blue") == []
    assert locations(index.search("pink")) == ["memory/2024-05-01.md:1"]


def test_a_recent_unchanged_file_is_checked_but_not_reindexed(root: Path) -> None:
    write(root, {"MEMORY.md": "fresh fact\n"})
    index = MemoryIndex(root)
    assert index.refresh().indexed == ("MEMORY.md",)
    stats = index.refresh()  # written moments ago: its mtime cannot be trusted yet
    assert (stats.read, stats.indexed) == (("MEMORY.md",), ())
    age(root / "MEMORY.md")
    assert index.refresh().read == ("MEMORY.md",)  # the mtime changed: read once more
    assert index.refresh().read == ()  # now old enough to trust


def test_the_index_lives_in_the_state_folder_and_is_rebuilt_if_unreadable(
    index: MemoryIndex, root: Path
) -> None:
    assert index.search("coffee")
    assert index.db_path == root / ".loopwright" / "memory.db"
    assert index.db_path.is_file()
    index.db_path.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(f"{index.db_path}{suffix}").unlink(missing_ok=True)
    assert locations(index.search("coffee")) == ["MEMORY.md:5"]
    with sqlite3.connect(index.db_path) as conn:
        assert conn.execute("SELECT count(*) FROM files").fetchone() == (3,)
    conn.close()


# --- what is never indexed -----------------------------------------------------------------------


def test_files_outside_the_memory_files_are_not_indexed(root: Path, outside: Path) -> None:
    write(
        root,
        {
            "AGENT.md": "zebra in agent\n",
            "notes.md": "zebra in notes\n",
            "memory/sub/2024-01-01.md": "zebra in a subfolder\n",
            "memory/2024-01-01.txt": "zebra in a text file\n",
            "memory/.hidden.md": "zebra hidden\n",
        },
    )
    (outside / "2024-01-01.md").write_text("zebra outside\n")
    (root / "memory" / "2024-01-02.md").symlink_to(outside / "2024-01-01.md")
    (root / "MEMORY.md").symlink_to(root / "AGENT.md")
    index = MemoryIndex(root)
    assert index.search("zebra") == []
    assert index.refresh().unchanged == 0


def test_a_symlinked_memory_folder_is_not_indexed(root: Path, outside: Path) -> None:
    (outside / "2024-01-01.md").write_text("zebra outside\n")
    (root / "memory").symlink_to(outside, target_is_directory=True)
    assert MemoryIndex(root).search("zebra") == []
