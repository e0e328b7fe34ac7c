"""The terminal: the consoles every command writes to, and making untrusted text safe to print.

Text that comes from a model, a tool, a transcript or a file name is *data*: it is printed through
:func:`text` (a Rich ``Text``, so ``[bold]`` is never read as markup) after :func:`clean` removed every
terminal control sequence, so a model can neither style, move the cursor nor retitle the window.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.style import StyleType
from rich.text import Text

__all__ = ["Terminal", "clean", "install_log_handler", "json_text", "text"]

#: Escape sequences (CSI, OSC, DCS/SOS/PM/APC strings, two-byte escapes), then any control character
#: left over: C0 except tab and newline, DEL and C1. A lone or cut ESC always falls to the last class.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[ -/]*[0-~]"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)
#: Characters JSON leaves raw that a terminal may still act on (DEL, C1) or that break some readers.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029]")


def clean(value: str) -> str:
    """``value`` without terminal escape sequences or control characters (tabs and newlines stay)."""
    if value.isprintable():
        return value
    return _CONTROL.sub("", value.replace("\r\n", "\n"))


def text(value: str, style: StyleType = "") -> Text:
    """Untrusted ``value`` as a Rich ``Text``: cleaned, never parsed for markup or emoji codes."""
    return Text(clean(value), style=style)


def json_text(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON that is safe to write to a terminal (control characters escaped)."""
    separators = (",", ": ") if indent else (",", ":")
    dumped = json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, default=str)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)


@dataclass(frozen=True, slots=True)
class Terminal:
    """Standard output and standard error, as Rich consoles; created once per command line."""

    out: Console
    err: Console

    @classmethod
    def create(cls) -> Terminal:
        return cls(out=_console(stderr=False), err=_console(stderr=True))

    def write_line(self, line: str) -> None:
        """Write ``line`` to standard output as it is (for ``--json``), bypassing Rich."""
        self.out.file.write(line + "\n")
        self.out.file.flush()

    def error(self, message: str, hint: str | None = None) -> None:
        """Print an error (already worded for a person) on standard error."""
        line = Text.assemble(("error: ", "bold red"), text(message))
        self.err.print(line, soft_wrap=True)
        if hint:
            self.err.print(text(hint, "dim"), soft_wrap=True)


def _console(*, stderr: bool) -> Console:
    """A console that never highlights or replaces emoji codes, and honours ``NO_COLOR``."""
    no_color = os.environ.get("NO_COLOR", "") != ""
    return Console(stderr=stderr, highlight=False, emoji=False, no_color=no_color)


class _StderrHandler(logging.Handler):
    """Library log records on whatever ``sys.stderr`` is now, one cleaned line each."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(clean(self.format(record)) + "\n")
            sys.stderr.flush()
        except Exception:  # pragma: no cover - a closed stream
            self.handleError(record)


_HANDLER = _StderrHandler()
_HANDLER.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))


def install_log_handler(verbose: bool) -> None:
    """Route the library's log records to stderr when ``verbose``, and drop them otherwise.

    Without ``--verbose`` a failure reaches the user once, as the command's error line (the run
    report carries it too), never as a second log line or a traceback."""
    logger = logging.getLogger("loopwright")
    if _HANDLER not in logger.handlers:
        logger.addHandler(_HANDLER)
    logger.propagate = False
    logger.setLevel(logging.INFO if verbose else logging.CRITICAL + 1)
