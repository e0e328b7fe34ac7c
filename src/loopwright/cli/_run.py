"""``loopwright run``: one message through the agent, shown as it happens."""

from __future__ import annotations

import asyncio
import sys
from contextlib import aclosing
from pathlib import Path
from typing import Annotated

import typer

from loopwright.agent import Agent
from loopwright.approvals import Approver
from loopwright.cli._approve import terminal_approver
from loopwright.cli._errors import EXIT_INTERRUPTED, EXIT_RUN_FAILED, reported
from loopwright.cli._options import JsonOpt, ModelOpt, SessionOpt, WorkspaceOpt, load_agent
from loopwright.cli._render import JsonRenderer, LiveRenderer, Renderer
from loopwright.cli._term import Terminal, text
from loopwright.errors import RunError
from loopwright.events import RunEnded
from loopwright.report import RunReport
from loopwright.sessions import new_session_id

__all__ = ["FAILED_REASONS", "report_outcome", "run", "stream_run"]

#: Stop reasons that make ``run`` exit with status 1.
FAILED_REASONS = frozenset({"error", "timeout"})


async def stream_run(
    agent: Agent,
    message: str,
    session_id: str | None,
    render: Renderer,
    approver: Approver | None = None,
) -> RunReport:
    """Run ``message``, handing every event to ``render``; return the report.

    Cancelling this coroutine stops the run: the library keeps the partial answer, closes open tool
    calls with synthetic results and saves a ``stopped`` report before the cancellation goes on."""
    report: RunReport | None = None
    try:
        async with aclosing(agent.stream(message, session_id=session_id, approver=approver)) as events:
            async for event in events:
                render(event)
                if isinstance(event, RunEnded):
                    report = event.report
    finally:
        render.close()
    if report is None:  # pragma: no cover - the stream always ends with RunEnded or raises
        raise RunError("the run ended without a report")
    return report


def report_outcome(term: Terminal, report: RunReport) -> bool:
    """Print why a run that did not finish cleanly ended, on stderr; True if it failed."""
    if report.error is None:
        return False
    if report.reason in FAILED_REASONS:
        term.error(f"run failed: {report.error}")
        return True
    term.err.print(text(f"note: {report.error}", "yellow"), soft_wrap=True)
    return False


def run(
    ctx: typer.Context,
    message: Annotated[
        str,
        typer.Argument(
            metavar="MESSAGE",
            help="The message to send; '-' reads it from standard input.",
            show_default=False,
        ),
    ],
    workspace: WorkspaceOpt = Path("."),
    session: SessionOpt = None,
    model: ModelOpt = None,
    json_output: JsonOpt = False,
    max_tool_iterations: Annotated[
        int | None, typer.Option(help="Most model steps in this run (overrides AGENT.md).", metavar="N")
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(help="Seconds the whole run may take (overrides AGENT.md).", metavar="SECONDS"),
    ] = None,
) -> None:
    """Send MESSAGE to the agent in a workspace and stream its answer.

    Tool calls are shown as they run; a footer sums up the run. Without --session a new session is
    started; its id is in the footer, pass it to --session to continue the conversation.
    """
    term: Terminal = ctx.obj
    with reported(term):
        text_in = sys.stdin.read().rstrip("\n") if message == "-" else message
        overrides = {"max_tool_iterations": max_tool_iterations, "execution_timeout": timeout}
        agent = load_agent(workspace, model=model, config=overrides)
        session_id = session or new_session_id()
        live = None if json_output else LiveRenderer(term.out)
        try:
            approver = terminal_approver(term, interactive=message != "-" and sys.stdin.isatty())
            report = asyncio.run(stream_run(agent, text_in, session_id, live or JsonRenderer(term), approver))
        except KeyboardInterrupt:
            term.err.print(text(f"stopped; the session {session_id} keeps what was done", "yellow"))
            raise typer.Exit(EXIT_INTERRUPTED) from None
        if live is not None:
            live.print_footer(report)
        if report_outcome(term, report):
            raise typer.Exit(EXIT_RUN_FAILED)
