"""``loopwright sessions export/import --db``: sessions move between the file and SQL backends."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwright import Agent, tool
from loopwright.sessions import FileSessionStore
from loopwright.testing import ScriptedModel
from tests.cli.helpers import invoke
from tests.sql.dbfixtures import BACKENDS, database_url_for_cli


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from database_url_for_cli(request.param, tmp_path)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_a_session_goes_to_sql_and_back_unchanged(url: str, tmp_path: Path) -> None:
    source = tmp_path / "source"
    (source / "sessions").mkdir(parents=True)
    model = ScriptedModel([[ScriptedModel.call("add", a=20, b=22)], "42"])
    asyncio.run(
        Agent(model, tools=[add], store=FileSessionStore(source / "sessions")).run("20+22?", session_id="s1")
    )

    exported = invoke(["sessions", "export", "s1", "-w", str(source), "-o", str(tmp_path / "s1.json")])
    assert exported.exit_code == 0, exported.stderr
    imported = invoke(["sessions", "import", str(tmp_path / "s1.json"), "--db", url])
    assert imported.exit_code == 0 and "imported s1" in imported.stdout, imported.stderr

    listed = json.loads(invoke(["sessions", "list", "--db", url, "--json"]).stdout)
    assert [s["id"] for s in listed] == ["s1"]
    shown = invoke(["sessions", "show", "s1", "--db", url])
    assert shown.exit_code == 0 and "add" in shown.stdout and "42" in shown.stdout

    from_sql = invoke(["sessions", "export", "s1", "--db", url])
    assert json.loads(from_sql.stdout) == json.loads((tmp_path / "s1.json").read_text(encoding="utf-8"))

    target = tmp_path / "target"
    (target / "sessions").mkdir(parents=True)
    (tmp_path / "back.json").write_text(from_sql.stdout, encoding="utf-8")
    assert invoke(["sessions", "import", str(tmp_path / "back.json"), "-w", str(target)]).exit_code == 0
    before = (source / "sessions/s1/transcript.jsonl").read_text(encoding="utf-8")
    after = (target / "sessions/s1/transcript.jsonl").read_text(encoding="utf-8")
    assert [json.loads(line) for line in after.splitlines()] == [
        json.loads(line) for line in before.splitlines()
    ]

    again = invoke(["sessions", "import", str(tmp_path / "s1.json"), "--db", url])
    assert again.exit_code == 2 and "session 's1' already exists" in again.stderr
