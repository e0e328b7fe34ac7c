"""loopwright.scaleout exports exactly what its ``__all__`` lists, and every name resolves."""

from __future__ import annotations

import loopwright.scaleout as scaleout
from loopwright.lanes.postgres import PostgresSessionLocks


def test_every_listed_name_exists() -> None:
    for name in scaleout.__all__:
        assert getattr(scaleout, name) is not None, name
    assert scaleout.PostgresSessionLocks is PostgresSessionLocks


def test_public_names_are_all_listed() -> None:
    public = {n for n in vars(scaleout) if not n.startswith("_") and n not in {"TYPE_CHECKING", "Any"}}
    assert public <= set(scaleout.__all__)
