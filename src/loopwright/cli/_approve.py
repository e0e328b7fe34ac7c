"""Approving tool calls from the terminal: the user is asked inline, under the tool's card."""

from __future__ import annotations

import asyncio

from rich.text import Text

from loopwright.approvals import ApprovalDecision, ApprovalRequest, Approver
from loopwright.cli import _format
from loopwright.cli._term import Terminal, text

__all__ = ["terminal_approver"]

_CHOICES = {"y": "approve", "yes": "approve", "n": "deny", "no": "deny", "s": "skip", "skip": "skip"}
NOT_INTERACTIVE = (
    "nobody could approve it: standard input is not a terminal "
    "(allow the tool in AGENT.md `permissions:` to run it unattended)"
)


def terminal_approver(term: Terminal, *, interactive: bool) -> Approver:
    """An approver that prompts on the terminal, or denies at once when nobody can answer."""

    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        if not interactive:
            term.err.print(text(f"{request.tool}: denied, {NOT_INTERACTIVE}", "yellow"), soft_wrap=True)
            return ApprovalDecision("deny", note=NOT_INTERACTIVE)
        return await asyncio.to_thread(_ask, term, request)

    return approve


def _ask(term: Terminal, request: ApprovalRequest) -> ApprovalDecision:
    term.out.print(
        Text.assemble(
            ("  ? ", "bold yellow"),
            text(request.tool, "bold cyan"),
            " ",
            text(_format.arguments(request.arguments, 400), "dim"),
            (f"  ({request.reason})", "dim"),
        ),
        soft_wrap=True,
    )
    while True:
        term.out.print(text("  allow it? [y]es / [n]o / [s]kip › ", "yellow"), end="")
        try:
            answer = input().strip().lower()
        except EOFError:
            term.out.print()
            return ApprovalDecision("deny", note="no answer (end of input)")
        if answer in _CHOICES:
            return ApprovalDecision(_CHOICES[answer])  # type: ignore[arg-type]
        term.out.print(text("  please answer y, n or s", "dim"))
