"""OpenAIResponsesModel failures: dropped and unfinished streams, in-stream errors, HTTP errors."""

from __future__ import annotations

from typing import Any

import pytest

from loopwright.errors import ConfigError, ContextLengthExceededError
from loopwright.models.base import ToolCallStart
from loopwright.models.openai import ProviderHTTPError
from loopwright.models.openai_responses import OpenAIResponsesModel
from loopwright.testing import ReplayResponse, ReplayServer
from tests.models._shared import (
    RETRYABLE_BY_STATUS,
    ResponsesFactory,
    check_openai_http_status,
    events_then_failure,
    failure,
    openai_error_body,
    refused_failure,
    served_failure,
    stream_failure,
    unused_port,
)
from tests.models.test_openai_responses_stream import sse

CREATED = {"type": "response.created", "response": {"status": "in_progress", "model": "gpt-5"}}
CALL = {
    "type": "response.output_item.added",
    "output_index": 0,
    "item": {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "write_file",
        "arguments": "",
    },
}
COMPLETED = {"type": "response.completed", "response": {"status": "completed", "usage": None}}


def args(text: str) -> dict[str, Any]:
    return {
        "type": "response.function_call_arguments.delta",
        "item_id": "fc_1",
        "output_index": 0,
        "delta": text,
    }


# --- dropped and unfinished streams --------------------------------------------------------------


@pytest.mark.parametrize("chunked", [True, False])
async def test_connection_cut_mid_arguments(chunked: bool, make_responses_model: ResponsesFactory) -> None:
    body = sse(CREATED, CALL, *(args('{"text": "' + "x" * 50) for _ in range(8)), COMPLETED)
    response = ReplayResponse(
        status=200,
        headers=(("content-type", "text/event-stream"),),
        body=body,
        split=list(range(64, len(body), 64)),
        cut_after=body.index(b"xxxxx", body.index(b"function_call_arguments")) + 100,
        chunked=chunked,
    )
    with ReplayServer([response]) as server:
        seen, error = await events_then_failure(make_responses_model(server))
    assert (error.retryable, error.status) == (True, None)
    assert "the stream was interrupted" in str(error)
    assert ToolCallStart(0, "call_1", "write_file") in seen


async def test_stream_that_ends_without_completed(make_responses_model: ResponsesFactory) -> None:
    error = await stream_failure(make_responses_model, sse(CREATED, CALL, args("{}")))
    assert error.retryable is True
    assert "ended before the response was complete" in str(error)
    assert str(error).startswith("openai-responses model 'gpt-5' failed: ")


async def test_data_that_is_not_json(make_responses_model: ResponsesFactory) -> None:
    error = await stream_failure(make_responses_model, sse(CREATED) + b"data: {oops\n\n")
    assert "not JSON" in str(error) and "{oops" in str(error)
    assert error.retryable is True


# --- errors inside a 200 stream ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "retryable"),
    [
        ({"code": "server_error", "message": "The server had an error processing your request."}, True),
        ({"code": "rate_limit_exceeded", "message": "Rate limit reached. Please try again in 20ms."}, True),
        ({"code": "insufficient_quota", "message": "You exceeded your current quota."}, False),
        ({"code": "invalid_prompt", "message": "Invalid prompt: flagged."}, False),
    ],
)
async def test_error_event(
    fields: dict[str, Any], retryable: bool, make_responses_model: ResponsesFactory
) -> None:
    """OpenAI's ``error`` event carries code and message on the event itself."""
    event = {"type": "error", "sequence_number": 2, "param": None, **fields}
    error = await stream_failure(make_responses_model, sse(CREATED, event, COMPLETED))
    assert type(error) is ProviderHTTPError
    assert (error.status, error.retryable, error.code) == (None, retryable, fields["code"])
    assert fields["message"] in str(error)


@pytest.mark.parametrize(
    ("error", "retryable", "says"),
    [
        ({"code": "server_error", "message": "Something went wrong."}, True, "Something went wrong."),
        ({"code": "rate_limit_exceeded", "message": "Slow down."}, True, "Slow down."),
        ({"code": "invalid_image", "message": "Bad image."}, False, "Bad image."),
        (None, True, "the response failed without a reason"),
    ],
)
async def test_response_failed(
    error: Any, retryable: bool, says: str, make_responses_model: ResponsesFactory
) -> None:
    failed = {"type": "response.failed", "response": {"status": "failed", "error": error}}
    result = await stream_failure(make_responses_model, sse(CREATED, CALL, failed))
    assert type(result) is ProviderHTTPError
    assert (result.status, result.retryable) == (None, retryable)
    assert says in str(result)


async def test_context_window_failure_in_stream(make_responses_model: ResponsesFactory) -> None:
    message = "Your input exceeds the context window of this model. Please adjust your input and try again."
    failed = {
        "type": "response.failed",
        "response": {"status": "failed", "error": {"code": "context_length_exceeded", "message": message}},
    }
    error = await stream_failure(make_responses_model, sse(CREATED, failed))
    assert type(error) is ContextLengthExceededError
    assert (error.retryable, error.provider) == (False, "openai-responses")
    assert message in str(error)


# --- HTTP errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "retryable"), list(RETRYABLE_BY_STATUS.items()))
@pytest.mark.parametrize("stream", [True, False])
async def test_http_status_mapping(
    status: int, retryable: bool, stream: bool, make_responses_model: ResponsesFactory
) -> None:
    await check_openai_http_status(make_responses_model, status, retryable, stream=stream)


async def test_error_message_names_provider_model_and_text(make_responses_model: ResponsesFactory) -> None:
    body = openai_error_body("The model `gpt-9` does not exist", code="model_not_found")
    with ReplayServer([ReplayResponse.json_body(body, status=404)]) as server:
        error = await failure(make_responses_model(server, "gpt-9"))
    assert str(error) == (
        "openai-responses model 'gpt-9' failed (HTTP 404): "
        "The model `gpt-9` does not exist (code 'model_not_found')"
    )


async def test_retry_after(make_responses_model: ResponsesFactory) -> None:
    response = ReplayResponse.json_body(
        openai_error_body("Rate limit reached", "requests", "rate_limit_exceeded"),
        status=429,
        headers=(("retry-after-ms", "1500"),),
    )
    error = await served_failure(make_responses_model, response)
    assert isinstance(error, ProviderHTTPError)
    assert (error.retry_after, error.headers["retry-after-ms"]) == (1.5, "1500")


async def test_context_length_exceeded_status(make_responses_model: ResponsesFactory) -> None:
    body = openai_error_body(
        "Your input exceeds the context window of this model.", code="context_length_exceeded"
    )
    error = await served_failure(
        make_responses_model, ReplayResponse.json_body(body, status=400), stream=False
    )
    assert type(error) is ContextLengthExceededError
    assert (error.status, error.retryable) == (400, False)


async def test_failed_response_in_a_200_json_body(make_responses_model: ResponsesFactory) -> None:
    body = {"status": "failed", "output": [], "error": {"code": "server_error", "message": "Upstream failed"}}
    error = await served_failure(make_responses_model, ReplayResponse.json_body(body), stream=False)
    assert "Upstream failed" in str(error)
    assert (error.retryable, error.code) == (True, "server_error")


async def test_non_json_200_response(make_responses_model: ResponsesFactory) -> None:
    response = ReplayResponse(status=200, headers=(("content-type", "text/plain"),), body=b"hello")
    error = await served_failure(make_responses_model, response, stream=False)
    assert "not JSON" in str(error)


async def test_connection_refused() -> None:
    port = unused_port()
    error = await refused_failure(
        OpenAIResponsesModel("gpt-5", base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
    )
    assert error.retryable is True
    assert f"cannot connect to http://127.0.0.1:{port}/v1" in str(error)


@pytest.mark.usefixtures("no_openai_env")
def test_missing_api_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"cannot set up openai-responses model 'gpt-5'.*api_key"):
        OpenAIResponsesModel("gpt-5")
