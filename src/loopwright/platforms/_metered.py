"""Metering the model calls of a platform run: reserve budget before each, charge and log after.

Two attachment points, each doing what it sees best:

- the agent's ``before_model_call`` hook (:func:`reserve_before_call`) reserves the call's upper
  bound (estimated input + maximum output) and, when the budget is spent, raises
  :class:`~loopwright.hooks.StopRun` with the budget message: the model is never called and the run
  ends with reason ``limit`` and that message as its answer;
- :class:`MeteredModel`, wrapped around each model of the agent, charges what every call really
  used — compaction summaries, retries and fallbacks included, which no hook announces — releases
  the reservation (also when the call fails or is cancelled) and writes the token log row.

The run being served is found through a context variable, set by
:class:`~loopwright.platforms.PlatformService` around ``agent.run``: one agent serves many users.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from loopwright.hooks import ModelCallHook, StopRun
from loopwright.messages import Usage
from loopwright.models._accumulate import complete_from_stream
from loopwright.models.base import Model, ModelEvent, ModelRequest, ModelResponse, UsageUpdate
from loopwright.models.pricing import PriceTable
from loopwright.platforms.budgets import Budgets
from loopwright.sql.models import TokenLog

__all__ = ["CURRENT_METER", "DEFAULT_OUTPUT_RESERVE", "MeteredModel", "RunMeter", "reserve_before_call"]

log = logging.getLogger("loopwright.platforms")

DEFAULT_OUTPUT_RESERVE = 1024
"""Output tokens reserved for a call whose persona sets no maximum."""


@dataclass(slots=True, kw_only=True)
class RunMeter:
    """The budget and the token log of one platform run."""

    budgets: Budgets
    prices: PriceTable
    user_id: str
    conversation_id: str | None
    output_reserve: int = DEFAULT_OUTPUT_RESERVE
    pending: int = 0
    """Tokens reserved for the next model call (by the hook), not yet settled."""
    refused: bool = False
    """A model call was refused for lack of budget."""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    calls: int = 0

    async def charge(self, model: str, run_id: str | None, reserved: int, usage: Usage | None) -> None:
        """Charge the call's tokens, release its reservation and log it, in one transaction."""
        used = usage or Usage()
        price = self.prices.price_for(model)
        cost = None if price is None else price.cost(used)
        async with self.budgets.database.transaction() as s:
            await self.budgets.settle(self.user_id, reserved, used.total_tokens, session=s)
            if usage is not None:
                s.add(
                    TokenLog(
                        user_id=self.user_id,
                        conversation_id=self.conversation_id,
                        run_id=run_id,
                        model=model,
                        input_tokens=used.input_tokens,
                        output_tokens=used.output_tokens,
                        cost_usd=cost,
                    )
                )
        if usage is not None:
            self.calls += 1
            self.usage = self.usage + used
            self.cost_usd = None if cost is None or self.cost_usd is None else self.cost_usd + cost

    async def release(self) -> None:
        """Give back a reservation no call used (the run ended between the hook and the call)."""
        reserved, self.pending = self.pending, 0
        if reserved:
            await self.budgets.settle(self.user_id, reserved, 0)


CURRENT_METER: ContextVar[RunMeter | None] = ContextVar("loopwright_platform_meter", default=None)


async def reserve_before_call(event: ModelCallHook) -> None:
    """``before_model_call`` handler: reserve the call's tokens, or stop the run (budget spent)."""
    meter = CURRENT_METER.get()
    if meter is None:
        return
    tokens = event.estimated_input_tokens + (event.max_output_tokens or meter.output_reserve)
    if not await meter.budgets.reserve(meter.user_id, tokens):
        meter.refused = True
        status = await meter.budgets.status(meter.user_id)
        raise StopRun(status.message(), reason="limit")
    meter.pending += tokens


class MeteredModel:
    """A model whose calls are charged to the current platform run (outside one: passes through)."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        meter = CURRENT_METER.get()
        if meter is None:
            async for event in self.inner.stream(request):
                yield event
            return
        reserved, meter.pending = meter.pending, 0
        usage: Usage | None = None
        try:
            async for event in self.inner.stream(request):
                if type(event) is UsageUpdate:
                    usage = event.usage
                yield event
        finally:
            try:
                await meter.charge(self.name, request.run_id, reserved, usage)
            except Exception:  # the answer is on its way; say so loudly, never lose the run for it
                log.exception("could not charge a model call of user %s", meter.user_id)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await complete_from_stream(self.stream(request))

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()

    def __repr__(self) -> str:
        return f"MeteredModel({self.inner!r})"
