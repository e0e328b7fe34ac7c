"""Fixtures for memory tests: a workspace folder and a folder outside it."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the workspace, with a file that must never change."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.md").write_text("do not touch\n", encoding="utf-8")
    return folder
