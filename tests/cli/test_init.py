"""``loopwright init``."""

from __future__ import annotations

from pathlib import Path

from loopwright.workspace import Workspace
from tests.cli.helpers import invoke


def test_init_creates_a_workspace_and_says_what_next(tmp_path: Path) -> None:
    target = tmp_path / "my agent"
    result = invoke(["init", str(target)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith(f"Created workspace {target}\n")
    for name in ("AGENT.md", "MEMORY.md", "tools/example.py", "sessions/"):
        assert f"  created  {name}" in out
    assert f"loopwright run -w '{target}' \"What files are in this folder?\"" in out
    definition = Workspace(target).load_definition()
    assert definition.name == "my agent" and definition.model == "test"


def test_init_name_and_model(tmp_path: Path) -> None:
    result = invoke(["init", str(tmp_path / "w"), "--name", "helper", "--model", "openai:gpt-4o-mini"])
    assert result.exit_code == 0, result.output
    definition = Workspace(tmp_path / "w").load_definition()
    assert (definition.name, definition.model) == ("helper", "openai:gpt-4o-mini")


def test_init_refuses_to_replace_agent_md_without_force(workspace: Path) -> None:
    (workspace / "MEMORY.md").write_text("my notes\n", encoding="utf-8")
    refused = invoke(["init", str(workspace)])
    assert refused.exit_code == 2
    assert refused.stdout == ""
    [line] = refused.stderr.splitlines()
    assert line.startswith("error: ") and "already exists" in line and "--force" in line
    forced = invoke(["init", str(workspace), "--force"])
    assert forced.exit_code == 0
    assert "  replaced AGENT.md" in forced.stdout and "  kept     MEMORY.md" in forced.stdout
    assert (workspace / "MEMORY.md").read_text() == "my notes\n"


def test_init_on_a_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    result = invoke(["init", str(tmp_path / "file")])
    assert result.exit_code == 2
    assert "it is a file" in result.stderr
