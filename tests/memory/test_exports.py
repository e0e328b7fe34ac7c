"""``loopwright.memory`` re-exports its public names explicitly and lists exactly them in ``__all__``."""

from __future__ import annotations

import subprocess
import sys

import loopwright.memory as memory


def test_all_lists_exactly_the_public_names() -> None:
    exported = set(memory.__all__)
    assert len(exported) == len(memory.__all__), "duplicates in __all__"
    assert all(hasattr(memory, name) for name in exported)
    public = {
        name
        for name, value in vars(memory).items()
        if not name.startswith("_")
        and getattr(value, "__module__", "").startswith("loopwright")
        and not isinstance(value, type(memory))
    }
    assert public <= exported, sorted(public - exported)


def test_memory_loads_only_when_used() -> None:
    code = (
        "import sys, loopwright.tools; before = set(sys.modules); "
        "import loopwright.memory; "
        "print('loopwright.memory' in before, 'openai' in set(sys.modules) - before)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]  # and the SDK waits until an embedder is made
