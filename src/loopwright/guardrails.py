"""Guardrails: checks around every model call that can end a run.

An **input** guardrail runs before each model call (it sees what is about to be sent); an **output**
guardrail runs after each model step (it sees the answer, before any of its tool calls run). A check
that fails with ``tripwire=True`` ends the run at once with reason ``guardrail`` and the check's
``reason`` as the final text; the tool calls of a tripped step are never executed (they get
"not executed" results, so the transcript stays consistent). A failed check without a tripwire is
recorded in the report and the run goes on.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from loopwright.messages import AssistantMessage, Message

__all__ = ["Guardrail", "GuardrailContext", "GuardrailDecision", "guardrail"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailDecision:
    passed: bool
    tripwire: bool = False
    reason: str = ""
    severity: Literal["low", "medium", "high", "critical"] = "medium"


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailContext:
    run_id: str
    session_id: str
    step: int
    system: str
    messages: Sequence[Message]
    """For an input guardrail: what is about to be sent. For an output one: the conversation so far."""
    response: AssistantMessage | None = None
    """For an output guardrail: the step's answer."""


@runtime_checkable
class Guardrail(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> Literal["input", "output"]: ...

    async def check(self, ctx: GuardrailContext) -> GuardrailDecision: ...


CheckFunction = Callable[[GuardrailContext], "GuardrailDecision | bool | Awaitable[GuardrailDecision | bool]"]


@dataclass(frozen=True, slots=True)
class _FunctionGuardrail:
    name: str
    kind: Literal["input", "output"]
    function: CheckFunction
    tripwire: bool

    async def check(self, ctx: GuardrailContext) -> GuardrailDecision:
        result = self.function(ctx)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, GuardrailDecision):
            return result
        if result:
            return GuardrailDecision(passed=True)
        return GuardrailDecision(
            passed=False, tripwire=self.tripwire, reason=f"guardrail {self.name!r} failed"
        )


def guardrail(
    kind: Literal["input", "output"], *, name: str | None = None, tripwire: bool = True
) -> Callable[[CheckFunction], Guardrail]:
    """Make a guardrail of a function returning a :class:`GuardrailDecision` or a bool (``False``:
    failed, a tripwire unless ``tripwire=False``)::

        @guardrail("output")
        def no_secrets(ctx):
            return GuardrailDecision(passed="sk-" not in ctx.response.content, tripwire=True,
                                     reason="I can't share credentials.")
    """

    def make(function: CheckFunction) -> Guardrail:
        label = name or str(getattr(function, "__name__", "guardrail"))
        return _FunctionGuardrail(label, kind, function, tripwire)

    return make
