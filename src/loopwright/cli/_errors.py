"""How a command fails: one clear message on stderr and an exit code, never a traceback.

Exit codes: ``0`` success, ``1`` a run that failed (model, timeout, storage, busy session), ``2`` bad
usage, configuration or input (the run never started), ``130`` interrupted with Ctrl-C.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import typer

from loopwright.cli._term import Terminal, text
from loopwright.errors import AgentDefinitionError, ConfigError, InputError, LoopwrightError, NotFoundError

__all__ = ["EXIT_INTERRUPTED", "EXIT_RUN_FAILED", "EXIT_USAGE", "exit_code_for", "reported"]

EXIT_RUN_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130

#: Set to show the traceback of an unexpected error (a bug) instead of one line.
DEBUG_ENV = "LOOPWRIGHT_DEBUG"


def exit_code_for(exc: LoopwrightError) -> int:
    """``2`` for what the user can fix before running (config, input, a missing session), else ``1``."""
    return EXIT_USAGE if isinstance(exc, ConfigError | InputError | NotFoundError) else EXIT_RUN_FAILED


@contextmanager
def reported(term: Terminal) -> Iterator[None]:
    """Turn errors raised inside the block into a message on stderr and a non-zero exit."""
    try:
        yield
    except typer.Exit:
        raise
    except AgentDefinitionError as exc:
        term.error(f"invalid agent definition {exc.path}")
        for problem in exc.problems:
            term.err.print(text(f"  {problem}"), soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from None
    except LoopwrightError as exc:
        term.error(str(exc))
        raise typer.Exit(exit_code_for(exc)) from None
    except KeyboardInterrupt:
        term.err.print("interrupted", style="dim")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except BrokenPipeError:  # the reader went away (`loopwright run --json ... | head`): stop quietly
        _discard_stdout()
        raise typer.Exit(EXIT_RUN_FAILED) from None
    except OSError as exc:  # the file system or a stream, not a bug
        term.error(str(exc))
        raise typer.Exit(EXIT_RUN_FAILED) from None
    except Exception as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        term.error(
            f"unexpected {type(exc).__name__}: {exc}",
            hint=f"this is a bug in loopwright; set {DEBUG_ENV}=1 to see the traceback",
        )
        raise typer.Exit(EXIT_RUN_FAILED) from None


def _discard_stdout() -> None:
    """Point standard output at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass
