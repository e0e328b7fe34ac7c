"""Run budgets: :class:`RunLimits` caps what one run may spend.

Every limit is optional. The loop checks them before each model call. When the next call could cross
one, it *winds down*: one last call without tools asks the model for its best final answer, and the
run ends with reason ``limit``. So a run stops gracefully with an answer instead of being cut off, and
goes over a token or cost limit by at most that one call.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RunLimits"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLimits:
    """What one run may use. ``None`` means no limit."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = None
    """Needs a known price for the model (see :class:`~loopwright.models.pricing.PriceTable`)."""
    model_calls: int | None = None
    tool_calls: int | None = None
    wall_time: float | None = None
    """Seconds since the run started."""

    def __post_init__(self) -> None:
        for name in ("input_tokens", "output_tokens", "total_tokens", "model_calls", "tool_calls"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"RunLimits.{name} must be a positive integer, not {value!r}")
        for name in ("cost_usd", "wall_time"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"RunLimits.{name} must be a positive number, not {value!r}")
