"""ReplayServer: a real loopback HTTP/1.1 server for provider tests and benchmarks."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator

import httpx
import pytest

from loopwright.messages import ToolCall
from loopwright.testing import (
    ReplayRequest,
    ReplayResponse,
    ReplayServer,
    openai_chat_completion,
    openai_chat_stream,
    recorded_body,
    recording_responses,
)
from tests.models._shared import RECORDINGS


async def test_queued_responses_in_order_and_requests_recorded() -> None:
    responses = [ReplayResponse.json_body({"n": 1}), ReplayResponse.json_body({"n": 2}, status=201)]
    with ReplayServer(responses) as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        async with httpx.AsyncClient() as client:
            first = await client.post(server.base_url + "/chat/completions", json={"a": 1})
            second = await client.get(server.url + "/health", headers={"X-Test": "yes"})
    assert (first.status_code, first.json()) == (200, {"n": 1})
    assert (second.status_code, second.json()) == (201, {"n": 2})
    assert [(r.method, r.path, r.json) for r in server.requests] == [
        ("POST", "/v1/chat/completions", {"a": 1}),
        ("GET", "/health", None),
    ]
    assert server.requests[1].headers["x-test"] == "yes"
    assert server.connections_opened == 1
    assert server.errors == []


async def test_split_pieces_reach_the_client_separately() -> None:
    body = b"data: one\n\ndata: two\n\n"
    response = ReplayResponse.sse(body, split=[3, 10, 11])
    with ReplayServer([response]) as server:
        async with httpx.AsyncClient() as client, client.stream("POST", server.url + "/s") as reply:
            pieces = [piece async for piece in reply.aiter_raw()]
    assert pieces == [b"dat", b"a: one\n", b"\n", b"data: two\n\n"]
    assert reply.headers["transfer-encoding"] == "chunked"


async def test_content_length_when_not_chunked() -> None:
    with ReplayServer([ReplayResponse.json_body({"ok": True})]) as server:
        async with httpx.AsyncClient() as client:
            reply = await client.get(server.url)
    assert reply.headers["content-length"] == str(len(b'{"ok": true}'))
    assert "transfer-encoding" not in reply.headers


@pytest.mark.parametrize("chunked", [True, False])
async def test_cut_after_drops_the_connection(chunked: bool) -> None:
    response = ReplayResponse.sse(b"x" * 100, cut_after=40, chunked=chunked, split=[25])
    with ReplayServer([response]) as server:
        async with httpx.AsyncClient() as client:
            with pytest.raises(httpx.RemoteProtocolError):
                async with client.stream("GET", server.url) as reply:
                    received = b""
                    async for piece in reply.aiter_raw():
                        received += piece
            assert received == b"x" * 40


async def test_chunked_request_body_is_read() -> None:
    async def parts() -> AsyncIterator[bytes]:
        for part in (b'{"a": ', b"[1, 2]", b"}"):
            yield part

    with ReplayServer([ReplayResponse.json_body({})]) as server:
        async with httpx.AsyncClient() as client:
            await client.post(server.url, content=parts())
    assert server.requests[0].headers["transfer-encoding"] == "chunked"
    assert server.requests[0].json == {"a": [1, 2]}


async def test_responder_answers_dynamically() -> None:
    def answer(request: ReplayRequest) -> ReplayResponse:
        assert request.json is not None
        return ReplayResponse.json_body({"echo": request.json["value"]})

    with ReplayServer(answer) as server:
        async with httpx.AsyncClient() as client:
            replies = [await client.post(server.url, json={"value": n}) for n in range(3)]
    assert [r.json() for r in replies] == [{"echo": 0}, {"echo": 1}, {"echo": 2}]


async def test_empty_queue_and_responder_errors_answer_500() -> None:
    def broken(request: ReplayRequest) -> ReplayResponse:
        raise RuntimeError("no script for this")

    async with httpx.AsyncClient() as client:
        with ReplayServer() as server:
            reply = await client.post(server.base_url + "/chat/completions")
        assert reply.status_code == 500
        assert "no response queued for POST /v1/chat/completions" in reply.json()["error"]["message"]
        assert server.errors == ["no response queued for POST /v1/chat/completions"]
        with ReplayServer(broken) as server:
            reply = await client.get(server.url)
        assert reply.status_code == 500
        assert server.errors == ["responder raised RuntimeError: no script for this"]


async def test_add_queues_more_responses() -> None:
    with ReplayServer() as server:
        server.add(ReplayResponse.json_body(1), ReplayResponse.json_body(2))
        async with httpx.AsyncClient() as client:
            values = [(await client.get(server.url)).json() for _ in range(2)]
    assert values == [1, 2]


def test_close_returns_while_a_client_holds_the_connection_open() -> None:
    server = ReplayServer([ReplayResponse.json_body({})]).start()
    with httpx.Client() as client:
        assert client.get(server.url).status_code == 200
        closed = threading.Event()

        def close() -> None:
            server.close()
            closed.set()

        closer = threading.Thread(target=close)
        closer.start()
        assert closed.wait(timeout=10)
        closer.join()


def test_resplit_is_seeded_and_piece_size_exact() -> None:
    response = ReplayResponse.sse(bytes(range(100)))
    assert response.resplit(7).split == response.resplit(7).split
    assert response.resplit(7).split != response.resplit(8).split
    assert b"".join(response.resplit(7).pieces()) == response.body
    assert [len(p) for p in response.resplit(piece_size=30).pieces()] == [30, 30, 30, 10]


def test_recording_bodies_follow_the_format() -> None:
    path = RECORDINGS / "openai-chat-stream-single-tool-two-turn.json"
    recording = json.loads(path.read_text(encoding="utf-8"))
    responses = recording_responses(path)
    assert len(responses) == 2
    for interaction, response in zip(recording["interactions"], responses, strict=True):
        assert response.body == interaction["response"]["body_text"].encode()
        assert ("Content-Type", "text/event-stream; charset=utf-8") in response.headers
    assert recorded_body({"body_json": {"a": 1}}) == b'{"a": 1}'
    assert recorded_body({"sse_events": ["data: 1", "data: 2"]}) == b"data: 1\n\ndata: 2\n\n"


def test_recording_interactions_without_status_are_skipped() -> None:
    responses = recording_responses(RECORDINGS / "openai-chat-error-429-rate-limit-quoted.json")
    assert [r.status for r in responses] == [429, 429]
    assert ("content-type", "application/json") in responses[0].headers


async def test_from_recording_serves_in_order() -> None:
    with ReplayServer.from_recording(
        RECORDINGS / "openai-chat-nonstream-tool-chain-three-turns.json"
    ) as server:
        async with httpx.AsyncClient() as client:
            bodies = [
                (await client.post(server.base_url + "/chat/completions", json={})).json() for _ in range(3)
            ]
    assert [b["choices"][0]["finish_reason"] for b in bodies] == ["tool_calls", "tool_calls", "stop"]


def test_chat_stream_builder() -> None:
    body = openai_chat_stream(
        text=["Hi", " there"],
        tool_calls=[ToolCall(id="c1", name="f", arguments='{"a": 1}')],
        reasoning="hmm",
        usage=(3, 4),
        args_pieces=2,
    )
    events = body.decode().split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-2]]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert [d.get("content") for d in deltas if d.get("content")] == ["Hi", " there"]
    assert deltas[1] == {"reasoning_content": "hmm"}
    args = [d["tool_calls"][0]["function"]["arguments"] for d in deltas if "tool_calls" in d]
    assert "".join(args) == '{"a": 1}' and len(args) == 3
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1] == {
        **chunks[-1],
        "choices": [],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }


def test_chat_completion_builder() -> None:
    body = openai_chat_completion(text="done", usage=None)
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "done"}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert "usage" not in body
