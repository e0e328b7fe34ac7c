"""The ``loopwright`` command line: ``init``, ``run``, ``chat``, ``sessions``, ``demo``."""

from loopwright.cli._app import app, main

__all__ = ["app", "main"]
