"""Run limits: before each model call, would the next one cross a :class:`RunLimits` budget?"""

from __future__ import annotations

import time
from dataclasses import dataclass

from loopwright.context.tokens import estimate_tokens
from loopwright.limits import RunLimits
from loopwright.loop._state import RunState

__all__ = ["WIND_DOWN_NOTE", "LimitHit", "check_limits"]

WIND_DOWN_NOTE = (
    "## Final answer now\nThis run has reached its limit ({why}). You cannot call tools any more. "
    "Using only what you already know from this conversation, give your best final answer now; say "
    "briefly what is unfinished, if anything."
)

#: Output tokens assumed for a call before the model has answered once in this run.
_FIRST_OUTPUT_GUESS = 512


@dataclass(frozen=True, slots=True)
class LimitHit:
    limit: str
    value: float
    maximum: float
    over: bool
    """True when the limit is already exceeded: no further call at all."""

    def describe(self) -> str:
        return f"{self.limit.replace('_', ' ')} {self.value:g} of {self.maximum:g}"


def check_limits(run: RunState, limits: RunLimits) -> LimitHit | None:
    """The first limit the next model call could cross, if any."""
    steps = run.report.steps
    usage = run.report.total_usage
    if limits.model_calls is not None:
        calls = len(steps)
        if calls >= limits.model_calls:
            return LimitHit("model_calls", calls, limits.model_calls, over=True)
        if calls + 1 >= limits.model_calls:
            return LimitHit("model_calls", calls + 1, limits.model_calls, over=False)
    if limits.tool_calls is not None:
        tool_calls = run.report.tool_call_count
        if tool_calls >= limits.tool_calls:
            return LimitHit("tool_calls", tool_calls, limits.tool_calls, over=tool_calls > limits.tool_calls)
    next_in, next_out = _next_call_estimate(run)
    for name, used, extra in (
        ("input_tokens", usage.input_tokens, next_in),
        ("output_tokens", usage.output_tokens, next_out),
        ("total_tokens", usage.total_tokens, next_in + next_out),
    ):
        maximum = getattr(limits, name)
        if maximum is not None and used + extra > maximum:
            return LimitHit(name, used, maximum, over=used >= maximum)
    if limits.cost_usd is not None:
        spent = run.report.total_cost_usd or 0.0
        price = run.setup.price_for(run.setup.model.name)
        from loopwright.messages import Usage

        next_cost = price.cost(Usage(input_tokens=next_in, output_tokens=next_out)) if price else 0.0
        if spent + next_cost > limits.cost_usd:
            return LimitHit("cost_usd", round(spent, 6), limits.cost_usd, over=spent >= limits.cost_usd)
    if limits.wall_time is not None:
        elapsed = time.perf_counter() - run.started
        typical = max((s.llm_latency_ms + s.tool_total_ms for s in steps), default=0.0) / 1000.0
        if elapsed + typical > limits.wall_time:
            return LimitHit(
                "wall_time", round(elapsed, 3), limits.wall_time, over=elapsed >= limits.wall_time
            )
    return None


def _next_call_estimate(run: RunState) -> tuple[int, int]:
    """Tokens the next call will likely use: the last call's input plus what was added since, and
    the largest output so far."""
    steps = run.report.steps
    if not steps:
        return estimate_tokens(run.system, run.messages), _FIRST_OUTPUT_GUESS
    last = steps[-1].usage
    added = estimate_tokens("", run.messages[-(1 + len(steps[-1].tool_calls)) :])
    return last.input_tokens + last.output_tokens + added, max(s.usage.output_tokens for s in steps) or 1
