"""The OpenAI-compatible endpoint, through the official ``openai`` client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import openai
import pytest

from loopwright.gateway import GatewayConfig, ServerThread
from tests.gateway.conftest import MakeServer
from tests.gateway.support import Gate, agents, rpc, tool_started, wait_for_event


@pytest.fixture
async def oai(server: ServerThread) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0) as client:
        yield client


async def test_models_are_the_agents(oai: openai.AsyncOpenAI) -> None:
    models = await oai.models.list()
    assert [m.id for m in models.data] == ["helper", "gated", "careful"]
    assert all(m.owned_by == "loopwright" for m in models.data)


async def test_chat_completion_keeps_a_session_per_user(
    oai: openai.AsyncOpenAI, server: ServerThread
) -> None:
    raw = await oai.chat.completions.with_raw_response.create(
        model="helper", messages=[{"role": "user", "content": "hello"}], user="alice"
    )
    completion = raw.parse()
    assert completion.object == "chat.completion"
    assert completion.model == "helper"
    assert completion.choices[0].message.role == "assistant"
    assert "add → 2" in (completion.choices[0].message.content or "")
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens > 0
    session_id = raw.headers["x-session-id"]
    again = await oai.chat.completions.with_raw_response.create(
        model="helper",
        messages=[
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "whatever"},
            {"role": "user", "content": [{"type": "text", "text": "and again"}]},
        ],
        user="alice",
    )
    assert again.headers["x-session-id"] == session_id
    bob = await oai.chat.completions.with_raw_response.create(
        model="helper", messages=[{"role": "user", "content": "hi"}], user="bob"
    )
    assert bob.headers["x-session-id"] != session_id
    async with httpx.AsyncClient(base_url=server.url) as http:
        session = await rpc(http, "sessions.get", sessionId=session_id, agent="helper")
    users = [e["content"] for e in session["entries"] if e.get("role") == "user"]
    assert users == ["hello", "and again"]


async def test_x_session_id_names_the_session(oai: openai.AsyncOpenAI) -> None:
    raw = await oai.chat.completions.with_raw_response.create(
        model="helper",
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"X-Session-Id": "chat-42"},
    )
    assert raw.headers["x-session-id"] == "chat-42"
    with pytest.raises(openai.BadRequestError, match="invalid session id"):
        await oai.chat.completions.create(
            model="helper",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Session-Id": "../x"},
        )


async def test_streaming_chat_completion(oai: openai.AsyncOpenAI) -> None:
    stream = await oai.chat.completions.create(
        model="helper", messages=[{"role": "user", "content": "stream it"}], stream=True
    )
    pieces: list[str] = []
    finish = None
    async for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        delta = chunk.choices[0].delta
        if delta.content:
            pieces.append(delta.content)
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "stop"
    assert len(pieces) > 1  # streamed in pieces, not in one block
    assert "add → 2" in "".join(pieces)


async def test_errors_come_back_as_openai_errors(oai: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.NotFoundError, match="model 'gpt-4o' not found"):
        await oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError, match="last message must have role 'user'"):
        await oai.chat.completions.create(model="helper", messages=[{"role": "assistant", "content": "hi"}])
    with pytest.raises(openai.BadRequestError, match="non-empty"):
        await oai.chat.completions.create(model="helper", messages=[])


async def test_a_token_is_the_api_key(make_server: MakeServer) -> None:
    server = make_server(GatewayConfig(token="tok-123"))
    async with openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError):
            await bad.models.list()
    async with openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="tok-123", max_retries=0) as good:
        assert len((await good.models.list()).data) == 3


async def test_a_session_that_stays_busy_is_503_with_retry_after(make_server: MakeServer, gate: Gate) -> None:
    server = make_server(served=agents(gate, queue_timeout=0.2))
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        holding = await rpc(http, "agent", message="hold", agent="gated", sessionId="held")
        await wait_for_event(http, holding["runId"], tool_started)
        async with openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0) as oai:
            with pytest.raises(openai.InternalServerError) as refused:
                await oai.chat.completions.create(
                    model="gated",
                    messages=[{"role": "user", "content": "me too"}],
                    extra_headers={"X-Session-Id": "held"},
                )
        assert refused.value.status_code == 503
        assert int(refused.value.response.headers["retry-after"]) >= 1
        gate.open()
        assert (await rpc(http, "agent.wait", runId=holding["runId"]))["status"] == "ok"


async def test_a_reset_user_starts_a_new_session(oai: openai.AsyncOpenAI, server: ServerThread) -> None:
    first = await oai.chat.completions.with_raw_response.create(
        model="helper", messages=[{"role": "user", "content": "old"}], user="carol"
    )
    old_id = first.headers["x-session-id"]
    async with httpx.AsyncClient(base_url=server.url) as http:
        reset = await rpc(http, "sessions.reset", sessionId=old_id, agent="helper")
        after = await oai.chat.completions.with_raw_response.create(
            model="helper", messages=[{"role": "user", "content": "new"}], user="carol"
        )
        assert after.headers["x-session-id"] == reset["sessionId"]
        fresh = await rpc(http, "sessions.get", sessionId=reset["sessionId"], agent="helper")
    assert [e["content"] for e in fresh["entries"] if e.get("role") == "user"] == ["new"]
