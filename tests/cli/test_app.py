"""The application: exports, --version, --help everywhere."""

from __future__ import annotations

import pytest

import loopwright.cli
from loopwright import __version__
from tests.cli.helpers import invoke


def test_exported_members() -> None:
    assert loopwright.cli.__all__ == ["app", "main"]
    assert callable(loopwright.cli.main)


def test_version() -> None:
    result = invoke(["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"loopwright {__version__}\n"


def test_no_arguments_shows_help() -> None:
    result = invoke([])
    assert "Usage" in result.output
    for command in ("init", "run", "chat", "sessions", "demo"):
        assert command in result.output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--help"], "workspace folder"),
        (["init", "--help"], "--force"),
        (["run", "--help"], "--max-tool-iterations"),
        (["run", "--help"], "'-' reads it"),
        (["chat", "--help"], "/new"),
        (["sessions", "--help"], "list"),
        (["sessions", "list", "--help"], "--json"),
        (["sessions", "show", "--help"], "--runs"),
        (["demo", "--help"], "--keep"),
    ],
)
def test_help(args: list[str], expected: str) -> None:
    result = invoke(args)
    assert result.exit_code == 0, result.output
    assert expected in result.stdout


def test_unknown_option_is_a_usage_error() -> None:
    result = invoke(["run", "--no-such-option", "hi"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
