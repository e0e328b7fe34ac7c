from pathlib import Path

import pytest

from loopwright.tools.base import ToolContext


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(
        run_id="run-1", session_id="session-1", call_id="call-1", tool_name="t", step=0, workspace=tmp_path
    )
