"""AnthropicModel failures: dropped streams, in-stream errors, HTTP errors, timeouts, missing keys."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from loopwright.errors import ConfigError, ContextLengthExceededError, ModelError
from loopwright.models.anthropic import AnthropicModel
from loopwright.models.base import ModelEvent, TextDelta, ToolCallStart
from loopwright.models.openai import ProviderHTTPError
from loopwright.testing import ReplayRequest, ReplayResponse, ReplayServer
from tests.models._shared import (
    HELLO,
    RETRYABLE_BY_STATUS,
    AnthropicFactory,
    check_http_error,
    events_then_failure,
    failure,
    refused_failure,
    served_failure,
    stream_failure,
    unused_port,
)
from tests.models.test_anthropic_stream import (
    message_end,
    message_start,
    sse,
    stream_body,
    text_block,
    tool_block,
)


def error_body(message: str, type_: str = "invalid_request_error") -> dict[str, Any]:
    """An Anthropic error envelope."""
    return {"type": "error", "error": {"type": type_, "message": message}, "request_id": "req_1"}


# --- dropped and incomplete streams --------------------------------------------------------------


@pytest.mark.parametrize("chunked", [True, False])
async def test_connection_cut_mid_tool_use(chunked: bool, make_anthropic_model: AnthropicFactory) -> None:
    body = stream_body(
        tool_block(0, "toolu_1", "write_file", '{"text": "', "x" * 300, '"}'), stop_reason="tool_use"
    )
    pieces = ReplayResponse.sse(body).resplit(piece_size=64).split
    response = ReplayResponse(
        status=200,
        headers=(("content-type", "text/event-stream"),),
        body=body,
        split=pieces,
        cut_after=body.index(b"xxxxx"),
        chunked=chunked,
    )
    with ReplayServer([response]) as server:
        seen, error = await events_then_failure(make_anthropic_model(server))
    assert (type(error), error.retryable, error.status) == (ModelError, True, None)
    assert "the stream was interrupted: peer closed connection" in str(error)
    assert ToolCallStart(0, "toolu_1", "write_file") in seen


async def test_stream_that_ends_without_message_stop(make_anthropic_model: AnthropicFactory) -> None:
    body = sse(message_start(), *tool_block(0, "toolu_1", "f", '{"a": 1}'), message_end("tool_use")[0])
    error = await stream_failure(make_anthropic_model, body)
    assert error.retryable is True
    assert "the stream ended before the response was complete (no message_stop)" in str(error)


async def test_empty_stream(make_anthropic_model: AnthropicFactory) -> None:
    with ReplayServer([ReplayResponse.sse(b"")]) as server:
        error = await failure(make_anthropic_model(server))
    assert error.retryable is True and "no message_stop" in str(error)


async def test_complete_with_a_cut_body(make_anthropic_model: AnthropicFactory) -> None:
    body = json.dumps({"type": "message", "content": [{"type": "text", "text": "x" * 500}]}).encode()
    response = ReplayResponse(
        status=200, headers=(("content-type", "application/json"),), body=body, split=[100], cut_after=200
    )
    with ReplayServer([response]) as server:
        error = await failure(make_anthropic_model(server), stream=False)
    assert error.retryable is True
    assert f"the response from {server.url}" in str(error)
    assert "was interrupted: peer closed connection without sending complete message body" in str(error)


# --- errors inside a 200 stream ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_", "retryable"),
    [
        ("overloaded_error", True),
        ("api_error", True),
        ("rate_limit_error", True),
        ("invalid_request_error", False),
    ],
)
@pytest.mark.parametrize("event_lines", [True, False])
async def test_error_event_in_stream(
    type_: str, retryable: bool, event_lines: bool, make_anthropic_model: AnthropicFactory
) -> None:
    payloads = [message_start(), *text_block(0, "partial")[:2], error_body("Something happened", type_)]
    seen: list[ModelEvent] = []
    with ReplayServer([ReplayResponse.sse(sse(*payloads, event_lines=event_lines))]) as server:
        model = make_anthropic_model(server)
        with pytest.raises(ModelError) as caught:
            async for event in model.stream(HELLO):
                seen.append(event)
    error = caught.value
    assert type(error) is ProviderHTTPError
    assert (error.status, error.retryable, error.code, error.error_type) == (None, retryable, type_, type_)
    assert str(error) == f"anthropic model 'claude-test' failed: Something happened ({type_})"
    assert TextDelta("partial") in seen


async def test_prompt_too_long_in_stream(make_anthropic_model: AnthropicFactory) -> None:
    body = sse(error_body("prompt is too long: 210000 tokens > 200000 maximum"))
    error = await stream_failure(make_anthropic_model, body)
    assert type(error) is ContextLengthExceededError
    assert error.retryable is False


async def test_error_event_that_is_not_json(make_anthropic_model: AnthropicFactory) -> None:
    body = b"event: error\ndata: upstream connect error or disconnect/reset before headers\n\n"
    error = await stream_failure(make_anthropic_model, body)
    assert error.retryable is True
    assert "upstream connect error or disconnect/reset before headers" in str(error)


async def test_event_that_is_not_json(make_anthropic_model: AnthropicFactory) -> None:
    body = sse(message_start()) + b"event: content_block_delta\ndata: {oops\n\n"
    error = await stream_failure(make_anthropic_model, body)
    assert "not JSON" in str(error) and "{oops" in str(error)
    assert error.retryable is True


# --- HTTP errors ---------------------------------------------------------------------------------

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
"""The error type Anthropic sends with each status of RETRYABLE_BY_STATUS."""


@pytest.mark.parametrize(("status", "retryable"), list(RETRYABLE_BY_STATUS.items()))
@pytest.mark.parametrize("stream", [True, False])
async def test_http_status_mapping(
    status: int, retryable: bool, stream: bool, make_anthropic_model: AnthropicFactory
) -> None:
    type_ = ERROR_TYPES[status]
    response = ReplayResponse.json_body(error_body(f"provider says {status}", type_), status=status)
    error = await served_failure(make_anthropic_model, response, stream=stream)
    check_http_error(error, status=status, retryable=retryable, code=type_, error_type=type_)
    assert f"provider says {status} ({type_})" in str(error)
    assert isinstance(error, ProviderHTTPError)
    assert isinstance(error.body, dict) and error.body["request_id"] == "req_1"


async def test_error_message_names_provider_model_and_text(make_anthropic_model: AnthropicFactory) -> None:
    body = error_body("model: claude-9", "not_found_error")
    with ReplayServer([ReplayResponse.json_body(body, status=404)]) as server:
        error = await failure(make_anthropic_model(server, "claude-9"))
    assert str(error) == "anthropic model 'claude-9' failed (HTTP 404): model: claude-9 (not_found_error)"


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (429, (("retry-after", "7"),), 7.0),
        (529, (("retry-after", "2"),), 2.0),
        (429, (("retry-after-ms", "1500"), ("retry-after", "2")), 1.5),
        (529, (("x-should-retry", "true"),), None),
    ],
)
async def test_retry_after(
    status: int,
    headers: tuple[tuple[str, str], ...],
    expected: float | None,
    make_anthropic_model: AnthropicFactory,
) -> None:
    kind = "rate_limit_error" if status == 429 else "overloaded_error"
    response = ReplayResponse.json_body(error_body("Slow down", kind), status=status, headers=headers)
    error = await served_failure(make_anthropic_model, response)
    assert isinstance(error, ProviderHTTPError)
    assert (error.retryable, error.retry_after) == (True, expected)
    assert error.headers[headers[0][0]] == headers[0][1]


async def test_retry_after_http_date(make_anthropic_model: AnthropicFactory) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    response = ReplayResponse.json_body(
        error_body("Overloaded", "overloaded_error"), status=529, headers=(("retry-after", when),)
    )
    error = await served_failure(make_anthropic_model, response)
    assert error.retry_after is not None and 20 < error.retry_after <= 30


async def test_retry_after_from_the_exhausted_rate_limit(make_anthropic_model: AnthropicFactory) -> None:
    headers = (
        ("date", "Tue, 26 Mar 2024 19:59:30 GMT"),
        ("anthropic-ratelimit-requests-remaining", "12"),
        ("anthropic-ratelimit-requests-reset", "2024-03-26T20:00:00Z"),
        ("anthropic-ratelimit-input-tokens-remaining", "0"),
        ("anthropic-ratelimit-input-tokens-reset", "2024-03-26T19:59:45Z"),
    )
    response = ReplayResponse.json_body(
        error_body("Too many tokens", "rate_limit_error"), status=429, headers=headers
    )
    error = await served_failure(make_anthropic_model, response)
    assert (error.retryable, error.retry_after) == (True, 15.0)


async def test_should_retry_header_overrides_the_status(make_anthropic_model: AnthropicFactory) -> None:
    response = ReplayResponse.json_body(
        error_body("Internal error", "api_error"), status=500, headers=(("x-should-retry", "false"),)
    )
    error = await served_failure(make_anthropic_model, response)
    assert (error.status, error.retryable) == (500, False)


@pytest.mark.parametrize(
    "message",
    [
        "prompt is too long: 210000 tokens > 200000 maximum",
        "input length and `max_tokens` exceed context limit: 197626 + 8192 > 200000, decrease input length or "
        "`max_tokens` and try again",
    ],
)
async def test_context_length_exceeded(message: str, make_anthropic_model: AnthropicFactory) -> None:
    with ReplayServer([ReplayResponse.json_body(error_body(message), status=400)]) as server:
        error = await failure(make_anthropic_model(server))
    assert type(error) is ContextLengthExceededError
    assert (error.status, error.retryable, error.code) == (400, False, "invalid_request_error")
    assert message in str(error)


async def test_non_json_error_body(make_anthropic_model: AnthropicFactory) -> None:
    html = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    response = ReplayResponse(status=502, headers=(("content-type", "text/html"),), body=html)
    error = await served_failure(make_anthropic_model, response, stream=False)
    assert (error.status, error.retryable) == (502, True)
    assert "502 Bad Gateway" in str(error)


async def test_error_envelope_in_a_200_json_response(make_anthropic_model: AnthropicFactory) -> None:
    with ReplayServer([ReplayResponse.json_body(error_body("Overloaded", "overloaded_error"))]) as server:
        error = await failure(make_anthropic_model(server), stream=False)
    assert isinstance(error, ProviderHTTPError)
    assert (error.status, error.retryable, error.code) == (None, True, "overloaded_error")


@pytest.mark.parametrize(
    "response",
    [
        ReplayResponse(status=200, headers=(("content-type", "text/plain"),), body=b"hello"),
        ReplayResponse(status=200, headers=(("content-type", "application/json"),), body=b"{not json"),
    ],
)
async def test_non_json_200_response(
    response: ReplayResponse, make_anthropic_model: AnthropicFactory
) -> None:
    error = await served_failure(make_anthropic_model, response, stream=False)
    assert "not JSON" in str(error)
    assert error.retryable is True


# --- connection, timeout, configuration ----------------------------------------------------------


async def test_connection_refused() -> None:
    port = unused_port()
    error = await refused_failure(
        AnthropicModel("claude-test", base_url=f"http://127.0.0.1:{port}", api_key="k")
    )
    assert error.retryable is True
    assert f"cannot connect to http://127.0.0.1:{port}" in str(error)


async def test_timeout_is_retryable(make_anthropic_model: AnthropicFactory) -> None:
    release = threading.Event()

    def stall(request: ReplayRequest) -> ReplayResponse:
        release.wait(timeout=10)
        return ReplayResponse.sse(stream_body(text_block(0, "late")))

    with ReplayServer(stall) as server:
        try:
            error = await failure(make_anthropic_model(server, timeout=0.2))
        finally:
            release.set()
    assert error.retryable is True
    assert "timed out after 0.2 s" in str(error)


async def test_stream_that_stalls_midway_times_out(make_anthropic_model: AnthropicFactory) -> None:
    body = stream_body(text_block(0, "first", "second"))
    stalled = ReplayResponse.sse(body, split=[len(body) // 2], pause=2.0)  # the server's thread waits
    with ReplayServer([stalled]) as server:
        error = await failure(make_anthropic_model(server, timeout=0.3))
    assert error.retryable is True
    assert "the stream timed out: no data for 0.3 s" in str(error)


def test_missing_api_key_is_a_config_error() -> None:
    with pytest.raises(
        ConfigError, match=r"anthropic model 'claude-test' has no API key: .*ANTHROPIC_API_KEY"
    ):
        AnthropicModel("claude-test")
