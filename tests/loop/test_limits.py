"""Run budgets: limits are checked before each model call and the run winds down with an answer."""

from __future__ import annotations

import pytest
from tests.helpers import assert_paired, record_events

from loopwright import Agent, ConfigError, LimitReached, RunLimits, ToolCall, tool
from loopwright.models.base import ModelResponse
from loopwright.testing import AgentInfo, FunctionModel, TestModel


@tool
def work(n: int) -> str:
    """Do a unit of work."""
    return f"unit {n} done"


def busy_model(messages: list[object], info: AgentInfo) -> ModelResponse | list[ToolCall]:
    """Calls a tool whenever it may; answers when offered no tools."""
    if not info.tools:
        return ModelResponse(content="Final: I did what the budget allowed.")
    n = len(messages)
    return [ToolCall(id=f"w{n}", name="work", arguments=f'{{"n": {n}}}')]


async def test_model_call_limit_winds_down_with_a_final_answer() -> None:
    agent = Agent(FunctionModel(busy_model), tools=[work], limits=RunLimits(model_calls=3))
    events = record_events(agent)
    report = await agent.run("go")
    assert report.reason == "limit" and report.limit == "model calls 3 of 3"
    assert report.final_text == "Final: I did what the budget allowed."
    assert report.step_count == 3 and report.tool_call_count == 2
    [hit] = [e for e in events if isinstance(e, LimitReached)]
    assert hit.payload() == {"limit": "model_calls", "value": 3, "max": 3}


async def test_tool_call_limit() -> None:
    report = await Agent(FunctionModel(busy_model), tools=[work]).run("go", limits=RunLimits(tool_calls=2))
    assert report.reason == "limit" and report.tool_call_count == 2
    assert report.final_text.startswith("Final:")


async def test_token_limit_stops_before_the_call_that_would_cross_it() -> None:
    agent = Agent(FunctionModel(busy_model), tools=[work], limits=RunLimits(total_tokens=400))
    report = await agent.run("go")
    assert report.reason == "limit" and report.limit is not None and report.limit.startswith("total tokens")
    # over by at most the wind-down call
    last = report.steps[-1].usage.total_tokens
    assert report.usage.total_tokens - last <= 400
    assert report.final_text.startswith("Final:")


async def test_already_over_a_limit_means_no_further_call(tmp_path: object) -> None:
    calls = 0

    def greedy(messages: list[object], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        calls += 1
        return ModelResponse(content="x" * 4000)  # ~1000 output tokens in one call

    report = await Agent(FunctionModel(greedy)).run("go", limits=RunLimits(output_tokens=10))
    # the first call is the wind-down (its estimate already crosses the limit), and it answers
    assert calls == 1 and report.reason == "limit"


async def test_a_model_that_calls_tools_during_wind_down_gets_results_not_execution() -> None:
    stubborn = FunctionModel(lambda m, i: [ToolCall(id=f"s{len(m)}", name="work", arguments='{"n": 1}')])
    agent = Agent(stubborn, tools=[work], limits=RunLimits(model_calls=2))
    report = await agent.run("go", session_id="s")
    assert report.reason == "limit"
    assert [c.skipped for s in report.steps for c in s.tool_calls] == [False, True]
    assert_paired(await agent.transcript("s"))  # type: ignore[arg-type]


async def test_wall_time_limit() -> None:
    import asyncio

    @tool
    async def slow_work() -> str:
        """Takes a while."""
        await asyncio.sleep(0.05)
        return "done"

    model = FunctionModel(
        lambda m, i: (
            ModelResponse(content="Final.") if not i.tools else [ToolCall(id=f"t{len(m)}", name="slow_work")]
        )
    )
    report = await Agent(model, tools=[slow_work], limits=RunLimits(wall_time=0.12)).run("go")
    assert report.reason == "limit" and report.final_text == "Final."
    assert 1 <= report.tool_call_count <= 3


async def test_cost_is_recorded_and_limited() -> None:
    report = await Agent(TestModel(), tools=[work]).run("go", limits=RunLimits(cost_usd=1.0))
    assert report.steps[0].cost_usd == 0.0 and report.total_cost_usd == 0.0  # the test model is free
    assert report.reason == "done"
    priced = {"models": {"function:busy": {"input": 1_000_000.0, "output": 1_000_000.0}}}
    model = FunctionModel(busy_model, name="function:busy")
    report = await Agent(model, tools=[work], prices=priced).run("go", limits=RunLimits(cost_usd=300.0))
    assert report.reason == "limit" and report.limit is not None and report.limit.startswith("cost usd")
    assert report.total_cost_usd is not None and report.total_cost_usd > 0


async def test_unknown_price_is_unknown_not_zero_and_refuses_a_cost_limit() -> None:
    model = FunctionModel(lambda m, i: "hi", name="someprovider:mystery")
    report = await Agent(model).run("go")
    assert report.steps[0].cost_usd is None and report.total_cost_usd is None
    with pytest.raises(ConfigError, match="cost limit needs the price of model 'someprovider:mystery'"):
        Agent(model, limits=RunLimits(cost_usd=1.0))


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="model_calls must be a positive integer"):
        RunLimits(model_calls=0)
    with pytest.raises(ValueError, match="cost_usd must be a positive number"):
        RunLimits(cost_usd=-1)


async def test_session_totals_add_up_runs() -> None:
    from loopwright.sessions import MemorySessionStore

    store = MemorySessionStore()
    agent = Agent(TestModel(), tools=[work], store=store)
    first = await agent.run("one", session_id="s")
    second = await agent.run("two", session_id="s")
    info = await store.get("s")
    assert info is not None and info.cost_usd == 0.0
    assert info.usage.total_tokens == first.usage.total_tokens + second.usage.total_tokens
    unknown = Agent(FunctionModel(lambda m, i: "hi", name="x:unpriced"), store=store)
    await unknown.run("three", session_id="s")
    info = await store.get("s")
    assert info is not None and info.cost_usd is None  # unknown, not zero
