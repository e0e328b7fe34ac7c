"""Every Python example in the docs runs, so the docs never rot.

Each ```python block of a page runs in order in one namespace, in a temporary folder, offline.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
PAGES = sorted(p for p in DOCS.glob("*.md") if BLOCK.search(p.read_text(encoding="utf-8")))


def test_there_are_examples_to_run() -> None:
    assert len(PAGES) >= 3


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__main__"}
    out = io.StringIO()
    for number, block in enumerate(BLOCK.findall(page.read_text(encoding="utf-8")), start=1):
        code = compile(block, f"{page.name}#example{number}", "exec")
        with contextlib.redirect_stdout(out):
            exec(code, namespace)
    assert os.getcwd() == str(tmp_path)
