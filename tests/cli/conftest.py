"""Fixtures for the command-line tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwright.workspace import init_workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace as ``loopwright init`` makes it (test model, built-in tools, example tool)."""
    return init_workspace(tmp_path / "agent").root
