"""``loopwright chat``: a conversation in one session, with Ctrl-C stopping the answer being written."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

import typer
from rich.text import Text

from loopwright.agent import Agent
from loopwright.cli._approve import terminal_approver
from loopwright.cli._errors import reported
from loopwright.cli._options import ModelOpt, SessionOpt, WorkspaceOpt, load_agent
from loopwright.cli._render import LiveRenderer
from loopwright.cli._run import report_outcome, stream_run
from loopwright.cli._term import Terminal, text
from loopwright.errors import LoopwrightError, NotFoundError
from loopwright.report import RunReport
from loopwright.sessions import new_session_id, validate_session_id

__all__ = ["Chat", "chat"]

_PROMPT = Text("you › ", style="bold green")
_HELP = (
    "/new starts a new session · /session shows its id · /compact summarises older messages · "
    "/exit or Ctrl-D quits · Ctrl-C stops an answer"
)


def chat(
    ctx: typer.Context,
    workspace: WorkspaceOpt = Path("."),
    session: SessionOpt = None,
    model: ModelOpt = None,
) -> None:
    """Talk with the agent of a workspace; the whole conversation is one session.

    Type /new to start a new session and /exit (or press Ctrl-D) to quit. Ctrl-C while the agent
    answers stops that answer and keeps what was done; Ctrl-C at the prompt quits.
    """
    term: Terminal = ctx.obj
    with reported(term):
        agent = load_agent(workspace, model=model)
        session_id = validate_session_id(session) if session else new_session_id()
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())
        Chat(term, agent, session_id).loop()


class Chat:
    """The prompt loop. Every run goes through one event loop, so Ctrl-C cancels just that run."""

    def __init__(self, term: Terminal, agent: Agent, session_id: str) -> None:
        self.term = term
        self.agent = agent
        self.approver = terminal_approver(term, interactive=True)
        self.session_id = session_id
        self._echo = not sys.stdin.isatty()  # show piped input as if it had been typed

    def loop(self) -> None:
        out = self.term.out
        out.print(
            Text.assemble(
                ("loopwright chat", "bold"),
                text(f" · agent {self.agent.name} · model {self.agent.model.name}", "dim"),
            ),
            soft_wrap=True,
        )
        self._print_session()
        out.print(text(_HELP, "dim"))
        with asyncio.Runner() as runner:
            while True:
                out.print()
                line = self._read()
                if line is None:
                    break
                message = line.strip()
                if not message:
                    continue
                if message.startswith("/"):
                    if not self._command(message, runner):
                        break
                    continue
                self.send(runner, line)

    def send(self, runner: asyncio.Runner, message: str) -> RunReport | None:
        """Run ``message`` in the chat's session; Ctrl-C stops the run and returns to the prompt."""
        renderer = LiveRenderer(self.term.out)
        try:
            report = runner.run(stream_run(self.agent, message, self.session_id, renderer, self.approver))
        except KeyboardInterrupt:
            stopped = runner.run(self._report(renderer.run_id)) if renderer.run_id else None
            if stopped is None:
                self.term.out.print("stopped", style="yellow")
            else:
                renderer.print_footer(stopped, session=False)
            return stopped
        except LoopwrightError as exc:  # refused before it ran: empty or oversized message, busy session
            self.term.error(str(exc))
            return None
        renderer.print_footer(report, session=False)
        report_outcome(self.term, report)
        return report

    def _read(self) -> str | None:
        """The next line typed, or None to quit (end of input, Ctrl-C at the prompt)."""
        try:
            line = self.term.out.input(_PROMPT)
        except (EOFError, KeyboardInterrupt):
            self.term.out.print()
            return None
        if self._echo:
            self.term.out.print(text(line), soft_wrap=True)
        return line

    def _command(self, command: str, runner: asyncio.Runner) -> bool:
        """Handle a slash command; False means quit."""
        name = command.split()[0].lower()
        if name in ("/exit", "/quit"):
            return False
        if name == "/new":
            self._end_session(runner)
            self.session_id = new_session_id()
            self._print_session(new=True)
        elif name == "/session":
            self._print_session()
        elif name == "/compact":
            self._compact(runner)
        elif name == "/help":
            self.term.out.print(text(_HELP, "dim"))
        else:
            self.term.out.print(text(f"unknown command {name!r}; {_HELP}", "yellow"), soft_wrap=True)
        return True

    def _end_session(self, runner: asyncio.Runner) -> None:
        """``session_end`` for the session being left (if it ever got a message)."""
        with contextlib.suppress(NotFoundError):  # nothing was said in it: no session to end
            runner.run(self.agent.end_session(self.session_id, reason="new"))

    def _compact(self, runner: asyncio.Runner) -> None:
        try:
            result = runner.run(self.agent.compact(self.session_id))
        except LoopwrightError as exc:
            self.term.error(str(exc))
            return
        self.term.out.print(
            text(
                f"compacted: about {result.tokens_before:,} → {result.tokens_after:,} tokens in context",
                "dim",
            ),
            soft_wrap=True,
        )

    def _print_session(self, *, new: bool = False) -> None:
        label = "new session " if new else "session "
        self.term.out.print(Text.assemble((label, "bold"), text(self.session_id, "bold")), soft_wrap=True)

    async def _report(self, run_id: str) -> RunReport | None:
        """The saved report of run ``run_id`` (None if it was stopped before it was accepted)."""
        reports = await self.agent.reports(self.session_id)
        return next((report for report in reports if report.id == run_id), None)
