"""The platform and SQL packages re-export their public names and list them in ``__all__``."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("name", ["loopwright.platforms", "loopwright.sql"])
def test_all_lists_exactly_the_public_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = set(module.__all__)
    assert len(exported) == len(module.__all__), "duplicates in __all__"
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names missing {attr!r}"
    public = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and getattr(v, "__module__", "").startswith("loopwright")
        and not isinstance(v, type(module))
    }
    assert public <= exported, f"{name} exposes names missing from __all__: {sorted(public - exported)}"


def test_the_command_line_does_not_load_sqlalchemy_until_asked() -> None:
    import subprocess
    import sys

    code = "import sys, loopwright.cli; print('sqlalchemy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
