"""Each package re-exports its public names explicitly and lists them in ``__all__``."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = [
    "loopwright",
    "loopwright.context",
    "loopwright.gateway",
    "loopwright.hooks",
    "loopwright.lanes",
    "loopwright.loop",
    "loopwright.models",
    "loopwright.platforms",
    "loopwright.sessions",
    "loopwright.testing",
    "loopwright.tools",
]


@pytest.mark.parametrize("name", PACKAGES)
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
