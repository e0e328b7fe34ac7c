"""The agent loop: INTAKE → CONTEXT → EXECUTE → PERSIST (see :mod:`loopwright.loop.run`)."""

from loopwright.loop._sink import EventSink, Listeners
from loopwright.loop._state import RunRequest, RunSetup, RunState
from loopwright.loop.run import run_loop

__all__ = ["EventSink", "Listeners", "RunRequest", "RunSetup", "RunState", "run_loop"]
