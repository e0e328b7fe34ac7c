"""Token logs and cost per call, per user and per conversation; the conversation's message log."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from loopwright import tool
from loopwright.errors import InputError
from loopwright.messages import Usage
from loopwright.models.base import ModelResponse
from loopwright.platforms import PlatformService, usage_report
from loopwright.sql import Database
from loopwright.sql.models import MessageRow, TokenLog
from loopwright.testing import ScriptedModel
from tests.platforms.helpers import message

PRICES = {"models": {"priced": {"input": 1.0, "output": 2.0}}}  # USD per million tokens


def answer(text: str, tokens_in: int, tokens_out: int) -> ModelResponse:
    return ModelResponse(
        content=text, usage=Usage(input_tokens=tokens_in, output_tokens=tokens_out, requests=1)
    )


@tool(level="guest")
def echo(text: str) -> str:
    """Echo text."""
    return text


async def test_each_call_is_logged_with_its_cost_and_summed_by_user_model_and_conversation(
    database: Database,
) -> None:
    priced = ScriptedModel([answer("a", 1000, 500), answer("b", 3000, 0)], name="priced")
    unpriced = ScriptedModel([answer("c", 10, 5)], name="mystery")
    ann = await PlatformService(database, model=priced, prices=PRICES).handle(message(platform_user_id="ann"))
    await PlatformService(database, model=priced, prices=PRICES).handle(
        message(platform_user_id="ann", platform_channel_id="c2")
    )
    bob = await PlatformService(database, model=unpriced, prices=PRICES).handle(
        message(platform_user_id="bob")
    )
    assert ann.cost_usd == pytest.approx((1000 * 1.0 + 500 * 2.0) / 1e6)
    assert bob.cost_usd is None

    async with database.transaction() as s:
        logs = (await s.scalars(select(TokenLog).order_by(TokenLog.id))).all()
    assert [(x.model, x.input_tokens, x.output_tokens) for x in logs] == [
        ("priced", 1000, 500),
        ("priced", 3000, 0),
        ("mystery", 10, 5),
    ]
    assert logs[0].cost_usd == pytest.approx(0.002) and logs[2].cost_usd is None
    assert logs[0].run_id == ann.run_id and logs[0].conversation_id == ann.conversation_id

    by_user = await usage_report(database, by="user")
    assert [(r.key, r.calls, r.total_tokens) for r in by_user] == [
        (ann.user_id, 2, 4500),
        (bob.user_id, 1, 15),
    ]
    assert by_user[0].label == "ann" and by_user[0].cost_usd == pytest.approx(0.005)
    assert by_user[1].cost_usd is None  # unknown, not zero
    by_model = await usage_report(database, by="model")
    assert [(r.key, r.input_tokens, r.output_tokens) for r in by_model] == [
        ("priced", 4000, 500),
        ("mystery", 10, 5),
    ]
    by_conversation = await usage_report(database, by="conversation", user_id=ann.user_id)
    assert sorted(r.total_tokens for r in by_conversation) == [1500, 3000]


async def test_usage_by_month(database: Database) -> None:
    await PlatformService(database, model=ScriptedModel([answer("x", 7, 3)])).handle(message())
    async with database.transaction() as s:
        month = (await s.scalars(select(TokenLog.created_at))).one().strftime("%Y-%m")
    rows = await usage_report(database, by="month")
    assert [(r.key, r.calls, r.total_tokens) for r in rows] == [(month, 1, 10)]
    assert await usage_report(database, by="month", month="1999-01") == []
    assert [r.total_tokens for r in await usage_report(database, by="user", month=month)] == [10]
    with pytest.raises(InputError, match="invalid month '2026-13'"):
        await usage_report(database, month="2026-13")
    with pytest.raises(InputError, match="cannot group usage by 'color'"):
        await usage_report(database, by="color")


async def test_the_conversation_log_has_user_assistant_tool_call_and_tool_result_messages(
    database: Database,
) -> None:
    model = ScriptedModel([[ScriptedModel.call("echo", "call_x", text="ping")], answer("pong", 40, 2)])
    reply = await PlatformService(database, model=model, tools=[echo]).handle(message("say ping"))
    async with database.transaction() as s:
        rows = (await s.scalars(select(MessageRow).order_by(MessageRow.id))).all()
    assert [r.role for r in rows] == ["user", "tool_call", "tool_result", "assistant"]
    assert rows[0].content == "say ping" and rows[0].user_id == reply.user_id
    assert json.loads(rows[1].content) == {
        "name": "echo",
        "arguments": '{"text": "ping"}',
        "tool_use_id": "call_x",
    }
    assert json.loads(rows[2].content) == {
        "name": "echo",
        "result": "ping",
        "error": None,
        "tool_use_id": "call_x",
    }
    assert (rows[3].content, rows[3].token_count, rows[3].model_used) == ("pong", 2, "scripted")
    assert {r.conversation_id for r in rows} == {reply.conversation_id}
    assert {r.run_id for r in rows} == {reply.run_id}
