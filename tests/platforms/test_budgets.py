"""Monthly budgets: checked before a run, charged per model call, reset each month, and never
overspent by more than one call's worth however many runs of a user go at once."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import update

from loopwright import tool
from loopwright.messages import Usage
from loopwright.models.base import ModelResponse
from loopwright.platforms import PlatformResponse, PlatformService, resolve_user, set_budget
from loopwright.platforms.budgets import Budgets, period_end
from loopwright.sql import Database
from loopwright.sql.models import User
from loopwright.testing import FunctionModel, ScriptedModel
from tests.platforms.helpers import Clock, at, logged_tokens, message, used_tokens


@tool(level="guest")
def lookup(word: str) -> str:
    """Look a word up."""
    return f"{word}: a thing"


def fixed(content: str, tokens_in: int, tokens_out: int) -> ModelResponse:
    return ModelResponse(
        content=content,
        usage=Usage(input_tokens=tokens_in, output_tokens=tokens_out, requests=1),
        model="fixed",
    )


async def test_a_spent_budget_gets_a_clear_reply_and_no_model_call(database: Database) -> None:
    model = ScriptedModel([])  # any model call would fail the test
    service = PlatformService(database, model=model, guest_budget=5000)
    user = await resolve_user(database, "discord", "u1")
    budgets = Budgets(database)
    await budgets.settle(user.id, 0, 5000)
    reply = await service.handle(message("are you there?"))
    assert reply.budget_exceeded and reply.reason == "budget"
    assert "monthly token budget is used up (5,000 of 5,000 tokens)" in reply.content
    assert model.requests == []
    assert await logged_tokens(database, user.id) == (0, 0)
    assert reply.conversation_id is None  # nothing was started


async def test_every_model_call_is_charged_input_plus_output(database: Database) -> None:
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=(ScriptedModel.call("lookup", word="kite"),),
                usage=Usage(input_tokens=120, output_tokens=30, requests=1),
                finish_reason="tool_calls",
            ),
            fixed("A kite flies.", 170, 12),
        ]
    )
    service = PlatformService(database, model=model, tools=[lookup])
    reply = await service.handle(message("what is a kite?"))
    assert reply.content == "A kite flies." and reply.reason == "done"
    assert reply.usage.total_tokens == 120 + 30 + 170 + 12
    assert await used_tokens(database, reply.user_id) == (332, 0)  # charged, nothing left reserved
    assert await logged_tokens(database, reply.user_id) == (2, 332)


async def test_an_unlimited_budget_never_refuses(database: Database) -> None:
    user = await resolve_user(database, "discord", "u1")
    await set_budget(database, user.id, None)
    await Budgets(database).settle(user.id, 0, 10_000_000)
    model = ScriptedModel(["still here"])
    reply = await PlatformService(database, model=model).handle(message())
    assert reply.content == "still here" and not reply.budget_exceeded


async def test_the_budget_runs_out_between_two_calls_of_a_run(database: Database) -> None:
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=(ScriptedModel.call("lookup", word="x"),),
                usage=Usage(input_tokens=150, output_tokens=60, requests=1),
                finish_reason="tool_calls",
            ),
            "never sent",
        ]
    )
    service = PlatformService(database, model=model, tools=[lookup], guest_budget=200)
    reply = await service.handle(message("look up x"))
    assert reply.reason == "budget"
    assert reply.content == (
        "Your monthly token budget is used up (210 of 200 tokens). "
        "It renews on "
        + f"{(await Budgets(database).status(reply.user_id)).reset_at:%Y-%m-%d}"
        + " (UTC); an administrator can raise it."
    )
    assert len(model.requests) == 1  # the second call was never made
    assert await used_tokens(database, reply.user_id) == (210, 0)  # over by less than one call


async def test_the_budget_resets_when_the_month_ends(database: Database) -> None:
    clock = Clock(at("2026-11-30T23:00:00"))
    model = ScriptedModel(["new month, new budget"])
    service = PlatformService(database, model=model, guest_budget=100, clock=clock)
    user = await resolve_user(database, "discord", "u1", guest_budget=100, clock=clock)
    assert user.budget_reset_at == at("2026-12-01T00:00:00")
    await Budgets(database, clock=clock).settle(user.id, 0, 100)
    assert await Budgets(database, clock=clock).reserve(user.id, 40) is False  # nothing left to hold
    async with database.transaction() as s:  # a reservation a crashed process never released
        await s.execute(update(User).where(User.id == user.id).values(tokens_reserved=40))
    refused = await service.handle(message("hi"))
    assert refused.budget_exceeded and "renews on 2026-12-01" in refused.content
    clock.now = at("2026-12-01T00:00:01")
    reply = await service.handle(message("hi again"))
    assert reply.content == "new month, new budget"
    status = await Budgets(database, clock=clock).status(user.id)
    assert status.reset_at == at("2027-01-01T00:00:00")
    assert status.used == reply.usage.total_tokens > 0
    assert status.reserved == 0  # the stale reservation went with the old period


def test_a_period_ends_at_the_start_of_the_next_month() -> None:
    assert period_end(at("2026-01-31T12:00:00")) == at("2026-02-01T00:00:00")
    assert period_end(at("2026-12-15T00:00:00")) == at("2027-01-01T00:00:00")


async def test_concurrent_runs_of_one_user_overspend_by_at_most_one_call(database: Database) -> None:
    """Eight runs of one user start together, each in its own channel. Every admitted model call
    waits until all eight runs have either reached the model or been refused, so all their budget
    checks overlap. Without reservations all eight would be admitted (2,000 tokens on a budget of
    1,000); with them, spending stays within one call (250 tokens) of the budget."""
    runs, budget, per_call = 8, 1000, 250
    admitted = 0
    refused = 0
    changed = asyncio.Condition()
    gate = asyncio.Event()

    async def slow_model(messages: list[Any], info: Any) -> ModelResponse:
        nonlocal admitted
        async with changed:
            admitted += 1
            changed.notify_all()
        await gate.wait()
        return fixed("done", 200, 50)

    service = PlatformService(
        database, model=FunctionModel(slow_model, name="fixed"), guest_budget=budget, output_reserve=300
    )
    user = await resolve_user(database, "discord", "u1", guest_budget=budget)

    async def one(i: int) -> PlatformResponse:
        nonlocal refused
        reply = await service.handle(message(f"question {i}", platform_channel_id=f"c{i}"))
        if reply.budget_exceeded:
            async with changed:
                refused += 1
                changed.notify_all()
        return reply

    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(one(i)) for i in range(runs)]
        async with changed:
            await changed.wait_for(lambda: admitted + refused == runs)
        gate.set()
    replies = [t.result() for t in tasks]
    done = [r for r in replies if r.reason == "done"]
    assert len(done) == admitted and refused == runs - admitted
    assert 1 <= admitted < runs
    used, reserved = await used_tokens(database, user.id)
    assert used == admitted * per_call and reserved == 0
    assert used <= budget + per_call  # never more than one call over
    assert await logged_tokens(database, user.id) == (admitted, used)
    assert all("monthly token budget is used up" in r.content for r in replies if r.budget_exceeded)
