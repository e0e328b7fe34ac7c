"""bench/gateway.py runs end to end with tiny numbers (the full run is not part of the suite)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gateway.py"


@pytest.mark.parametrize("storage", [[], ["--workspace"]], ids=["memory", "workspace"])
def test_bench_smoke(storage: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--sessions", "3", "--messages", "2", "--json", *storage],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["ok"] is True
    gateway, library = figures["gateway"], figures["library"]
    assert gateway["runs"] == gateway["expected"] == 6
    assert gateway["problems"] == [] and library["problems"] == []
    assert gateway["events_checked"] >= 6 * 6  # start, tool start/end, text, end per run at least
    assert library["runs"] == 6
    assert gateway["server_rss_mib"] > 0
