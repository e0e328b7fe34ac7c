"""Guardrails: input checks before each model call, output checks after each step, tripwires."""

from __future__ import annotations

from tests.helpers import assert_paired

from loopwright import Agent, GuardrailContext, GuardrailDecision, ToolCall, guardrail, tool
from loopwright.messages import ToolResultMessage, UserMessage
from loopwright.models.base import ModelResponse
from loopwright.sessions import MemorySessionStore
from loopwright.testing import ScriptedModel

ran: list[str] = []


@tool
def transfer(amount: int) -> str:
    """Move money."""
    ran.append(f"transfer {amount}")
    return "moved"


@guardrail("input")
def no_card_numbers(ctx: GuardrailContext) -> GuardrailDecision:
    last = ctx.messages[-1]
    leaked = isinstance(last, UserMessage) and "4111 1111" in last.content
    return GuardrailDecision(passed=not leaked, tripwire=True, reason="Please don't paste card numbers here.")


@guardrail("output")
def no_big_transfers(ctx: GuardrailContext) -> GuardrailDecision:
    assert ctx.response is not None
    big = any('"amount": 1000000' in c.arguments for c in ctx.response.tool_calls)
    return GuardrailDecision(passed=not big, tripwire=True, reason="That transfer needs a human.")


@guardrail("output", tripwire=False)
def polite(ctx: GuardrailContext) -> bool:
    return ctx.response is None or "please" in ctx.response.content.lower() or bool(ctx.response.tool_calls)


async def test_an_input_tripwire_stops_before_the_model_is_called() -> None:
    model = ScriptedModel(["never"])
    report = await Agent(model, guardrails=[no_card_numbers]).run("my card is 4111 1111 1111 1111")
    assert (report.reason, report.final_text) == ("guardrail", "Please don't paste card numbers here.")
    assert model.requests == []


async def test_an_output_tripwire_stops_the_step_and_its_calls_never_run() -> None:
    ran.clear()
    big = ModelResponse(tool_calls=(ToolCall(id="t", name="transfer", arguments='{"amount": 1000000}'),))
    agent = Agent(
        ScriptedModel([big]), tools=[transfer], guardrails=[no_big_transfers], store=MemorySessionStore()
    )
    report = await agent.run("send it all", session_id="s")
    assert (report.reason, report.final_text) == ("guardrail", "That transfer needs a human.")
    assert ran == []
    entries = await agent.transcript("s")
    assert_paired(entries)  # type: ignore[arg-type]
    [result] = [e for e in entries if isinstance(e, ToolResultMessage)]
    assert result.synthetic and result.content == "not executed: a guardrail stopped the run"


async def test_passing_checks_let_the_run_go_on_and_soft_failures_are_reported() -> None:
    ran.clear()
    small = ModelResponse(tool_calls=(ToolCall(id="t", name="transfer", arguments='{"amount": 5}'),))
    agent = Agent(
        ScriptedModel([small, "Done."]),
        tools=[transfer],
        guardrails=[no_card_numbers, no_big_transfers, polite],
    )
    report = await agent.run("send 5")
    assert report.reason == "done" and ran == ["transfer 5"]
    assert report.guardrail_failures == ["polite: guardrail 'polite' failed"]
