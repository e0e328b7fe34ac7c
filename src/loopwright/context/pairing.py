"""Every tool call has exactly one result, whatever the transcript holds.

:func:`repair_pairing` puts each tool result right after the assistant message that made the call,
drops results whose call is unknown, and writes a synthetic error result for every call that has
none (a run that was stopped, timed out or crashed mid-step). The next request to a provider is
therefore always valid, and a session can never be poisoned by broken call/result pairing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from loopwright.messages import AssistantMessage, Message, ToolResultMessage, now_iso

__all__ = ["IN_DOUBT_RESULT", "NOT_EXECUTED", "repair_pairing"]

NOT_EXECUTED = "not executed: the run ended before this tool call finished ({why})"
IN_DOUBT_RESULT = (
    "in doubt: this call started but the run ended before it finished ({why}), so whether it took "
    "effect is unknown; it was not run again. Check its effect before you retry it."
)


@dataclass(slots=True)
class _Block:
    call: AssistantMessage
    results: dict[str, ToolResultMessage] = field(default_factory=dict)
    after: list[Message] = field(default_factory=list)


def repair_pairing(
    messages: list[Message],
    *,
    why: str = "run interrupted",
    started: frozenset[tuple[str | None, str]] | set[tuple[str | None, str]] = frozenset(),
    leave_open: frozenset[str] | set[str] = frozenset(),
) -> tuple[list[Message], list[ToolResultMessage], int]:
    """Return ``(repaired, synthetic, dropped)``: the repaired message list, the synthetic results
    it had to invent (to be appended to the transcript) and how many orphan results were dropped.

    ``started`` names calls the journal saw start, as ``(run id, call id)`` (call ids repeat across
    runs with some models): their synthetic result says the call is in doubt rather than not executed. ``leave_open`` names calls a resumed run is about to answer itself."""
    out: list[Message | _Block] = []
    open_blocks: dict[str, _Block] = {}  # call id -> latest block that has this call unanswered
    dropped = 0
    for m in messages:
        if type(m) is ToolResultMessage:
            block = open_blocks.pop(m.tool_call_id, None)
            if block is None:
                dropped += 1
                continue
            block.results[m.tool_call_id] = m
            continue
        if type(m) is AssistantMessage and m.tool_calls:
            block = _Block(m)
            for c in m.tool_calls:
                open_blocks[c.id] = block
            out.append(block)
            continue
        if open_blocks and out:
            # A message that arrived while calls were still open goes after their results.
            last = _last_block(out)
            if last is not None and any(c.id not in last.results for c in last.call.tool_calls):
                last.after.append(m)
                continue
        out.append(m)
    if not any(type(item) is _Block for item in out) and not dropped:
        return messages, [], 0  # fast path: nothing with tool calls to check
    repaired: list[Message] = []
    synthetic: list[ToolResultMessage] = []
    for item in out:
        if type(item) is not _Block:
            repaired.append(item)  # type: ignore[arg-type]
            continue
        repaired.append(item.call)
        for c in item.call.tool_calls:
            result = item.results.get(c.id)
            if result is None and c.id in leave_open:
                continue
            if result is None:
                text = IN_DOUBT_RESULT if (item.call.run_id, c.id) in started else NOT_EXECUTED
                result = ToolResultMessage(
                    tool_call_id=c.id,
                    name=c.name,
                    content=text.format(why=why),
                    is_error=True,
                    synthetic=True,
                    run_id=item.call.run_id,
                    timestamp=now_iso(),
                )
                synthetic.append(result)
            repaired.append(result)
        repaired.extend(item.after)
    return repaired, synthetic, dropped


def _last_block(out: list[Message | _Block]) -> _Block | None:
    for item in reversed(out):
        if type(item) is _Block:
            return item
    return None
