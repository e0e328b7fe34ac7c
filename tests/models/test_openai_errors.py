"""OpenAIModel failures: dropped streams, in-stream errors, HTTP errors, timeouts, missing keys."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from loopwright.errors import ConfigError, ContextLengthExceededError
from loopwright.messages import ToolCall
from loopwright.models._accumulate import complete_from_stream
from loopwright.models.base import ToolCallStart
from loopwright.models.openai import OpenAIModel, ProviderHTTPError
from loopwright.testing import ReplayRequest, ReplayResponse, ReplayServer, openai_chat_stream
from tests.models._shared import (
    HELLO,
    RETRYABLE_BY_STATUS,
    ModelFactory,
    check_openai_http_status,
    events_then_failure,
    failure,
    openai_error_body,
    refused_failure,
    served_failure,
    stream_failure,
    unused_port,
)

CALL = ToolCall(
    id="call_1", name="write_file", arguments='{"path": "notes.txt", "text": "' + "x" * 200 + '"}'
)


# --- dropped and incomplete streams --------------------------------------------------------------


@pytest.mark.parametrize("chunked", [True, False])
async def test_connection_cut_mid_tool_call(chunked: bool, make_model: ModelFactory) -> None:
    body = openai_chat_stream(tool_calls=[CALL], args_pieces=8)
    cut = body.index(b"xxxxx")
    response = ReplayResponse.sse(body, chunked=chunked).resplit(piece_size=64)
    response = ReplayResponse(
        status=200, headers=response.headers, body=body, split=response.split, cut_after=cut, chunked=chunked
    )
    with ReplayServer([response]) as server:
        seen, error = await events_then_failure(make_model(server))
    assert error.retryable is True
    assert error.status is None
    assert "the stream was interrupted" in str(error)
    assert ToolCallStart(0, "call_1", "write_file") in seen


async def test_stream_that_stops_without_finish_or_done(make_model: ModelFactory) -> None:
    events = openai_chat_stream(tool_calls=[CALL]).split(b"\n\n")
    truncated = b"\n\n".join(events[:4]) + b"\n\n"
    error = await stream_failure(make_model, truncated)
    assert error.retryable is True
    assert "ended before the response was complete" in str(error)


async def test_done_without_finish_reason_is_complete(make_model: ModelFactory) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}
    body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
    with ReplayServer([ReplayResponse.sse(body)]) as server:
        response = await complete_from_stream(make_model(server).stream(HELLO))
    assert (response.content, response.finish_reason, response.raw_finish_reason) == ("Hi", "stop", None)


# --- errors inside a 200 stream ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "retryable", "status"),
    [
        (openai_error_body("The server had an error", "server_error"), True, None),
        (
            openai_error_body("You exceeded your current quota", "insufficient_quota", "insufficient_quota"),
            False,
            None,
        ),
        ({"error": {"code": 502, "message": "Upstream provider unavailable"}}, True, 502),
        (
            {"object": "error", "message": "Bad sampling parameter", "type": "BadRequestError", "code": 400},
            False,
            400,
        ),
    ],
)
async def test_error_chunk_in_stream(
    payload: dict[str, Any], retryable: bool, status: int | None, make_model: ModelFactory
) -> None:
    first = {"choices": [{"index": 0, "delta": {"content": "partial"}, "finish_reason": None}]}
    body = f"data: {json.dumps(first)}\n\ndata: {json.dumps(payload)}\n\ndata: [DONE]\n\n".encode()
    error = await stream_failure(make_model, body)
    assert type(error) is ProviderHTTPError
    assert error.retryable is retryable
    assert error.status == status
    message = payload["error"]["message"] if "error" in payload else payload["message"]
    assert message in str(error)


async def test_context_length_error_in_stream(make_model: ModelFactory) -> None:
    payload = openai_error_body(
        "This model's maximum context length is 8192 tokens", code="context_length_exceeded"
    )
    body = f"data: {json.dumps(payload)}\n\n".encode()
    error = await stream_failure(make_model, body)
    assert type(error) is ContextLengthExceededError
    assert error.retryable is False


async def test_sse_error_event(make_model: ModelFactory) -> None:
    body = b'event: error\ndata: {"message": "model overloaded", "type": "overloaded_error"}\n\n'
    error = await stream_failure(make_model, body)
    assert "model overloaded" in str(error)
    assert error.retryable is True


async def test_chunk_that_is_not_json(make_model: ModelFactory) -> None:
    with ReplayServer([ReplayResponse.sse(b"data: {oops\n\n")]) as server:
        error = await failure(make_model(server))
    assert "not JSON" in str(error) and "{oops" in str(error)
    assert error.retryable is True


# --- HTTP errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "retryable"), list(RETRYABLE_BY_STATUS.items()))
@pytest.mark.parametrize("stream", [True, False])
async def test_http_status_mapping(
    status: int, retryable: bool, stream: bool, make_model: ModelFactory
) -> None:
    await check_openai_http_status(make_model, status, retryable, stream=stream)


async def test_error_message_names_provider_model_and_text(make_model: ModelFactory) -> None:
    body = openai_error_body("The model `gpt-9` does not exist", code="model_not_found")
    with ReplayServer([ReplayResponse.json_body(body, status=404)]) as server:
        error = await failure(make_model(server, "gpt-9"))
    assert str(error) == (
        "openai model 'gpt-9' failed (HTTP 404): The model `gpt-9` does not exist (code 'model_not_found')"
    )


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ((("retry-after", "2"),), 2.0),
        ((("retry-after-ms", "1500"), ("retry-after", "2")), 1.5),
        ((("x-ratelimit-reset-requests", "120ms"),), None),
    ],
)
async def test_retry_after(
    headers: tuple[tuple[str, str], ...], expected: float | None, make_model: ModelFactory
) -> None:
    response = ReplayResponse.json_body(
        openai_error_body("Rate limit reached", "requests"), status=429, headers=headers
    )
    error = await served_failure(make_model, response)
    assert isinstance(error, ProviderHTTPError)
    assert error.retry_after == expected
    assert error.headers[headers[0][0]] == headers[0][1]


async def test_retry_after_http_date(make_model: ModelFactory) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    response = ReplayResponse.json_body(
        openai_error_body("Slow down"), status=503, headers=(("retry-after", when),)
    )
    error = await served_failure(make_model, response)
    assert isinstance(error, ProviderHTTPError)
    assert error.retry_after is not None and 20 < error.retry_after <= 30


async def test_retry_hint_in_message(make_model: ModelFactory) -> None:
    body = openai_error_body(
        "Rate limit reached for gpt-4o. Please try again in 1m30.5s.", "tokens", "rate_limit_exceeded"
    )
    error = await served_failure(make_model, ReplayResponse.json_body(body, status=429))
    assert isinstance(error, ProviderHTTPError)
    assert error.retry_after == 90.5


@pytest.mark.parametrize(
    "body",
    [
        openai_error_body("maximum context length is 128000 tokens", code="context_length_exceeded"),
        openai_error_body("prompt is too long: 210000 tokens > 200000 maximum"),
    ],
)
async def test_context_length_exceeded(body: dict[str, Any], make_model: ModelFactory) -> None:
    error = await served_failure(make_model, ReplayResponse.json_body(body, status=400))
    assert type(error) is ContextLengthExceededError
    assert (error.status, error.retryable) == (400, False)
    assert body["error"]["message"] in str(error)


async def test_non_json_openai_error_body(make_model: ModelFactory) -> None:
    html = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    response = ReplayResponse(status=502, headers=(("content-type", "text/html"),), body=html)
    error = await served_failure(make_model, response, stream=False)
    assert (error.status, error.retryable) == (502, True)
    assert "502 Bad Gateway" in str(error)


async def test_error_object_in_a_200_json_response(make_model: ModelFactory) -> None:
    body = openai_error_body("Upstream failed", "server_error")
    error = await served_failure(make_model, ReplayResponse.json_body(body), stream=False)
    assert "Upstream failed" in str(error)
    assert error.retryable is True


async def test_non_json_200_response(make_model: ModelFactory) -> None:
    response = ReplayResponse(status=200, headers=(("content-type", "text/plain"),), body=b"hello")
    error = await served_failure(make_model, response, stream=False)
    assert "not JSON" in str(error)


# --- connection, timeout, configuration ----------------------------------------------------------


async def test_connection_refused() -> None:
    port = unused_port()
    error = await refused_failure(OpenAIModel("gpt-4o", base_url=f"http://127.0.0.1:{port}/v1", api_key="k"))
    assert error.retryable is True
    assert f"cannot connect to http://127.0.0.1:{port}/v1" in str(error)


async def test_timeout_is_retryable(make_model: ModelFactory) -> None:
    release = threading.Event()

    def stall(request: ReplayRequest) -> ReplayResponse:
        release.wait(timeout=10)
        return ReplayResponse.sse(openai_chat_stream(text="late"))

    with ReplayServer(stall) as server:
        try:
            error = await failure(make_model(server, timeout=0.2))
        finally:
            release.set()
    assert error.retryable is True
    assert "timed out" in str(error)


async def test_stream_that_stalls_midway_times_out(make_model: ModelFactory) -> None:
    body = openai_chat_stream(text=["first", "second"])
    stalled = ReplayResponse.sse(
        body, split=[len(body) // 2], pause=3.0
    )  # the server's thread waits, not the test
    with ReplayServer([stalled]) as server:
        error = await failure(make_model(server, timeout=0.3))
    assert error.retryable is True
    assert "the stream timed out: no data for 0.3 s" in str(error)


@pytest.mark.usefixtures("no_openai_env")
def test_missing_api_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"api_key"):
        OpenAIModel("gpt-4o")
