from __future__ import annotations

import loopwright.gateway as gateway


def test_gateway_exports_exactly_its_public_names() -> None:
    exported = set(gateway.__all__)
    assert len(exported) == len(gateway.__all__)
    assert all(hasattr(gateway, name) for name in exported)
    public = {
        n
        for n, v in vars(gateway).items()
        if not n.startswith("_")
        and getattr(v, "__module__", "").startswith("loopwright")
        and not isinstance(v, type(gateway))
    }
    assert public <= exported
