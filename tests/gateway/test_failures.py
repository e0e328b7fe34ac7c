"""Runs that fail: the result, the stream and the OpenAI answers say so."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from loopwright import Agent
from loopwright.errors import ModelError
from loopwright.gateway import ServerThread
from loopwright.testing import FunctionModel
from tests.gateway.conftest import MakeServer
from tests.gateway.support import rpc, sse_events


def _broken(messages: list[Any], info: Any) -> str:
    raise ModelError("the provider is down", provider="fake", model="broken", status=500)


@pytest.fixture
def broken(make_server: MakeServer) -> ServerThread:
    return make_server(served={"broken": Agent(FunctionModel(_broken, name="broken"), name="broken")})


async def test_a_failed_run_is_an_error_result_and_an_error_event(broken: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=broken.url) as client:
        accepted = await rpc(client, "agent", message="hi")
        result = await rpc(client, "agent.wait", runId=accepted["runId"])
        assert result["status"] == "error"
        assert result["reason"] == "error"
        assert result["error"]["code"] == "model_error"
        assert "the provider is down" in result["error"]["message"]
        events = []
        async with client.stream("GET", "/api/events", params={"runId": accepted["runId"]}) as response:
            async for _, name, data in sse_events(response):
                if name != "end":
                    events.append(data)
    assert events[0]["data"]["phase"] == "start"
    assert events[-1]["data"]["phase"] == "error"
    assert events[-1]["data"]["error"]["code"] == "model_error"


async def test_openai_clients_see_the_failure(broken: ServerThread) -> None:
    async with openai.AsyncOpenAI(base_url=f"{broken.url}/v1", api_key="x", max_retries=0) as oai:
        with pytest.raises(openai.InternalServerError, match="the provider is down"):
            await oai.chat.completions.create(model="broken", messages=[{"role": "user", "content": "hi"}])
        stream = await oai.chat.completions.create(
            model="broken", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        with pytest.raises(openai.APIError, match="the provider is down"):
            async for _ in stream:
                pass


async def test_a_session_stream_resumes_after_the_last_event_id(client: httpx.AsyncClient) -> None:
    first = await rpc(client, "agent", message="one", agent="helper", sessionId="sse-s")
    await rpc(client, "agent.wait", runId=first["runId"])
    last_id = None
    seen = []
    async with client.stream(
        "GET", "/api/events", params={"sessionId": "sse-s", "agent": "helper"}
    ) as response:
        second = await rpc(client, "agent", message="two", agent="helper", sessionId="sse-s")
        async for event_id, _, data in sse_events(response):
            seen.append(data)
            last_id = event_id
            if data["seq"] == 3:
                break  # the connection drops in the middle of the second run
    assert {e["runId"] for e in seen} == {second["runId"]}  # a finished run is not replayed
    await rpc(client, "agent.wait", runId=second["runId"])
    third = await rpc(client, "agent", message="three", agent="helper", sessionId="sse-s")
    await rpc(client, "agent.wait", runId=third["runId"])
    rest = []
    async with client.stream(
        "GET",
        "/api/events",
        params={"sessionId": "sse-s", "agent": "helper"},
        headers={"Last-Event-ID": str(last_id)},
    ) as response:
        async for _, _, data in sse_events(response):
            rest.append(data)
            if (
                data["runId"] == third["runId"]
                and data["data"].get("phase") == "end"
                and data["stream"] == "lifecycle"
            ):
                break
    second_events = [e for e in seen + rest if e["runId"] == second["runId"]]
    assert [e["seq"] for e in second_events] == list(range(1, len(second_events) + 1))
    assert second_events[-1]["data"]["phase"] == "end"
    third_events = [e for e in rest if e["runId"] == third["runId"]]
    assert [e["seq"] for e in third_events] == list(range(1, len(third_events) + 1))
