"""Showing a run as it happens: live on a terminal (:class:`LiveRenderer`) or as JSON lines
(:class:`JsonRenderer`), and the one-line footer once it ended."""

from __future__ import annotations

from typing import Literal, Protocol

from rich.console import Console
from rich.status import Status
from rich.text import Text

from loopwright.cli import _format
from loopwright.cli._term import Terminal, json_text, text
from loopwright.events import (
    ApprovalRequested,
    ApprovalResolved,
    RunEnded,
    RunEvent,
    RunFailed,
    StepEnded,
    StepStarted,
    TextChunk,
    ThinkingChunk,
    ToolCallEnded,
    ToolCallStarted,
)
from loopwright.report import RunReport

__all__ = ["JsonRenderer", "LiveRenderer", "Renderer", "footer", "reason_style"]

_ERROR_CHARS = 200
_ARGS_CHARS = 120
_MIN_ARGS_CHARS = 24
_Block = Literal["text", "thinking", "tool"]


class Renderer(Protocol):
    def __call__(self, event: RunEvent) -> None: ...

    def close(self) -> None:
        """Called once the run is over, however it ended (stop spinners, finish the line)."""
        ...


class JsonRenderer:
    """Every event as one JSON line ``{"type", "name", "runId", **payload}``; ``loop:end`` adds
    ``report``. Nothing else is written to standard output."""

    def __init__(self, term: Terminal) -> None:
        self._term = term

    def __call__(self, event: RunEvent) -> None:
        record = {"type": event.type, "name": event.name, "runId": event.run_id, **event.payload()}
        if isinstance(event, RunEnded):
            record["report"] = event.report.to_dict()
        self._term.write_line(json_text(record))

    def close(self) -> None:
        pass


class LiveRenderer:
    """Text streamed as it arrives, thinking dimmed, one card per tool call (a line with its name
    and arguments, a spinner while it runs, then its duration and result size or error)."""

    def __init__(self, console: Console, *, spinner: bool | None = None) -> None:
        self._console = console
        self._spinner = console.is_terminal if spinner is None else spinner
        self._status: Status | None = None
        self._running: dict[str, str] = {}  # call id -> tool name
        self._last_started: str | None = None
        self._block: _Block | None = None
        self._line_open = False  # streamed text printed without its final newline
        self._wrote = False
        self.run_id: str | None = None
        """The id of the run shown (known from its first event)."""

    def __call__(self, event: RunEvent) -> None:
        self.run_id = event.run_id
        match event:
            case StepStarted():
                self._spin("waiting for the model")
            case TextChunk(text=chunk):
                self._stream(chunk, "text", "")
            case ThinkingChunk(text=chunk):
                self._stream(chunk, "thinking", "dim italic")
            case ToolCallStarted():
                self._tool_started(event)
            case ToolCallEnded():
                self._tool_ended(event)
            case StepEnded() | RunFailed() | ApprovalRequested():
                self._unspin()
            case ApprovalResolved(decision=decision, by=by):
                mark, style = ("✓", "green") if decision == "approve" else ("✗", "red")
                who = "" if by in ("approver", "api") else f" ({by})"
                self._console.print(Text.assemble("  ", (f"{mark} {decision}", style), (who, "dim")))
                if self._running:
                    self._spin_tools()
            case RunEnded():
                self.close()
            case _:
                pass

    def close(self) -> None:
        self._unspin()
        self._end_line()
        for name in self._running.values():  # calls cut short by a stop or a failure
            line = Text.assemble("  ", ("■ ", "yellow"), text(name, "cyan"), (" did not finish", "dim"))
            self._console.print(line, soft_wrap=True)
        self._running.clear()

    def print_footer(self, report: RunReport, *, session: bool = True) -> None:
        """The one-line summary of ``report``, a blank line apart from what the run printed."""
        if self._wrote:
            self._console.print()
        self._console.print(footer(report, session=session), soft_wrap=True)

    # --- blocks -----------------------------------------------------------------------------------

    def _stream(self, chunk: str, block: _Block, style: str) -> None:
        self._unspin()
        piece = text(chunk, style)
        if not piece.plain:
            return
        self._begin(block)
        self._console.print(piece, end="", soft_wrap=True)
        self._wrote = True
        self._line_open = not piece.plain.endswith("\n")

    def _tool_started(self, event: ToolCallStarted) -> None:
        self._unspin()
        self._begin("tool")
        # On a terminal the card stays on one line; piped output keeps more of the arguments.
        room = self._console.width - len(event.tool_name) - 4 if self._console.is_terminal else _ARGS_CHARS
        line = Text.assemble(
            ("→ ", "cyan"),
            text(event.tool_name, "bold cyan"),
            " ",
            text(_format.arguments(event.arguments, max(_MIN_ARGS_CHARS, room)), "dim"),
        )
        self._console.print(line, soft_wrap=True)
        self._wrote = True
        self._running[event.call_id] = event.tool_name
        self._last_started = event.call_id
        self._spin_tools()

    def _tool_ended(self, event: ToolCallEnded) -> None:
        self._unspin()
        self._running.pop(event.call_id, None)
        # Name the tool again when its result does not follow its own start line.
        named = event.call_id != self._last_started or bool(self._running)
        self._last_started = None
        line = Text("  ")
        line.append("✗ " if event.is_error else "✓ ", "red" if event.is_error else "green")
        if named:
            line.append_text(text(event.tool_name, "cyan"))
            line.append(" ")
        line.append(_format.duration(event.latency_ms), "dim")
        if event.is_error:
            line.append(" · ", "dim")
            line.append_text(text(_format.shorten(event.result, _ERROR_CHARS), "red"))
        else:
            line.append(f" · {_format.size(len(event.result.encode('utf-8')))}", "dim")
        self._console.print(line, soft_wrap=True)
        self._spin_tools()

    def _begin(self, block: _Block) -> None:
        if self._block == block:
            return
        self._end_line()
        if self._block is not None:
            self._console.print()
        self._block = block

    def _end_line(self) -> None:
        if self._line_open:
            self._console.print()
            self._line_open = False

    # --- spinner ----------------------------------------------------------------------------------

    def _spin_tools(self) -> None:
        if self._running:
            names = ", ".join(dict.fromkeys(self._running.values()))
            self._spin(f"running {names}")

    def _spin(self, message: str) -> None:
        if not self._spinner:
            return
        label = text(message, "dim")
        if self._status is None:
            self._end_line()
            self._status = self._console.status(label, spinner="dots")
            self._status.start()
        else:
            self._status.update(label)

    def _unspin(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def reason_style(reason: str) -> str:
    if reason == "done":
        return "green"
    return "red" if reason in ("error", "timeout") else "yellow"


def footer(report: RunReport, *, session: bool = True) -> Text:
    """``session 3f2… · done · 3 steps · 2 tool calls · 1,234 tokens (…) · 45 ms``."""
    line = Text(style="dim")
    if session:
        line.append("session ")
        line.append_text(text(report.session_id))
        line.append(" · ")
    line.append(report.reason, reason_style(report.reason))
    figures = (
        _format.count(report.step_count, "step"),
        _format.count(report.tool_call_count, "tool call"),
        _format.tokens(report.total_usage),
        _format.duration(report.total_ms),
    )
    line.append("".join(f" · {figure}" for figure in figures))
    return line
