"""Test isolation: no real provider can be reached, no user config leaks in."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# These machines are shared and noisy: a property test is judged on what it finds, never on time.
settings.register_profile("loopwright", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("loopwright")

REPO = Path(__file__).resolve().parents[1]
RECORDINGS = REPO.parent / "shared" / "fixtures" / "provider-recordings"


@pytest.fixture(autouse=True)
def _isolated_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    for key in list(os.environ):
        if key.startswith(("LOOPWRIGHT_", "OPENAI_", "ANTHROPIC_")):
            monkeypatch.delenv(key)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    # The switch that blocks real model requests: the SDK's default endpoint points at a closed port.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-real")
    monkeypatch.setenv("NO_COLOR", "1")
    # The CLI routes the library's logger to its own handler (and stops propagation): a command run
    # in-process must not hide later tests' log records from caplog.
    logger = logging.getLogger("loopwright")
    saved = (logger.propagate, logger.level, list(logger.handlers))
    yield
    logger.propagate, logger.handlers[:] = saved[0], saved[2]
    logger.setLevel(saved[1])  # (setLevel also clears the loggers' cached levels)
