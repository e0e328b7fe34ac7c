"""OpenAIResponsesModel failures: dropped and unfinished streams, in-stream errors, HTTP errors."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

import pytest

from loopwright.errors import ConfigError, ContextLengthExceededError, ModelError
from loopwright.messages import UserMessage
from loopwright.models._accumulate import complete_from_stream
from loopwright.models.base import ModelEvent, ModelRequest, ToolCallStart
from loopwright.models.openai import OpenAIModel, ProviderHTTPError
from loopwright.models.openai_responses import OpenAIResponsesModel
from loopwright.testing._server import ReplayResponse, ReplayServer

ModelFactory = Callable[..., OpenAIModel]

HELLO = ModelRequest(system="", messages=[UserMessage(content="Hello")])
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


def responses_model(
    make_model: ModelFactory, server: ReplayServer, model: str = "gpt-5"
) -> OpenAIResponsesModel:
    """An OpenAIResponsesModel on a test client (closed by the make_model fixture)."""
    return OpenAIResponsesModel(model, client=make_model(server, model).client)


def sse(*payloads: dict[str, Any]) -> bytes:
    return "".join(f"event: {p['type']}\ndata: {json.dumps(p)}\n\n" for p in payloads).encode()


def args(text: str) -> dict[str, Any]:
    return {
        "type": "response.function_call_arguments.delta",
        "item_id": "fc_1",
        "output_index": 0,
        "delta": text,
    }


def error_body(message: str, type_: str = "invalid_request_error", code: Any = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


async def failure(model: OpenAIResponsesModel, *, stream: bool = True) -> ModelError:
    with pytest.raises(ModelError) as caught:
        if stream:
            await complete_from_stream(model.stream(HELLO))
        else:
            await model.complete(HELLO)
    return caught.value


async def stream_failure(make_model: ModelFactory, body: bytes) -> ModelError:
    with ReplayServer([ReplayResponse.sse(body)]) as server:
        return await failure(responses_model(make_model, server))


# --- dropped and unfinished streams --------------------------------------------------------------


@pytest.mark.parametrize("chunked", [True, False])
async def test_connection_cut_mid_arguments(chunked: bool, make_model: ModelFactory) -> None:
    body = sse(CREATED, CALL, *(args('{"text": "' + "x" * 50) for _ in range(8)), COMPLETED)
    response = ReplayResponse(
        status=200,
        headers=(("content-type", "text/event-stream"),),
        body=body,
        split=list(range(64, len(body), 64)),
        cut_after=body.index(b"xxxxx", body.index(b"function_call_arguments")) + 100,
        chunked=chunked,
    )
    seen: list[ModelEvent] = []
    with ReplayServer([response]) as server:
        model = responses_model(make_model, server)
        with pytest.raises(ModelError) as caught:
            async for event in model.stream(HELLO):
                seen.append(event)
    error = caught.value
    assert (error.retryable, error.status) == (True, None)
    assert "the stream was interrupted" in str(error)
    assert ToolCallStart(0, "call_1", "write_file") in seen


async def test_stream_that_ends_without_completed(make_model: ModelFactory) -> None:
    error = await stream_failure(make_model, sse(CREATED, CALL, args("{}")))
    assert error.retryable is True
    assert "ended before the response was complete" in str(error)
    assert str(error).startswith("openai-responses model 'gpt-5' failed: ")


async def test_data_that_is_not_json(make_model: ModelFactory) -> None:
    error = await stream_failure(make_model, sse(CREATED) + b"data: {oops\n\n")
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
async def test_error_event(fields: dict[str, Any], retryable: bool, make_model: ModelFactory) -> None:
    """OpenAI's ``error`` event carries code and message on the event itself."""
    event = {"type": "error", "sequence_number": 2, "param": None, **fields}
    error = await stream_failure(make_model, sse(CREATED, event, COMPLETED))
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
async def test_response_failed(error: Any, retryable: bool, says: str, make_model: ModelFactory) -> None:
    failed = {"type": "response.failed", "response": {"status": "failed", "error": error}}
    result = await stream_failure(make_model, sse(CREATED, CALL, failed))
    assert type(result) is ProviderHTTPError
    assert (result.status, result.retryable) == (None, retryable)
    assert says in str(result)


async def test_context_window_failure_in_stream(make_model: ModelFactory) -> None:
    message = "Your input exceeds the context window of this model. Please adjust your input and try again."
    failed = {
        "type": "response.failed",
        "response": {"status": "failed", "error": {"code": "context_length_exceeded", "message": message}},
    }
    error = await stream_failure(make_model, sse(CREATED, failed))
    assert type(error) is ContextLengthExceededError
    assert (error.retryable, error.provider) == (False, "openai-responses")
    assert message in str(error)


# --- HTTP errors ---------------------------------------------------------------------------------

STATUS_RETRYABLE = [
    (400, False),
    (401, False),
    (404, False),
    (408, True),
    (409, True),
    (429, True),
    (500, True),
    (503, True),
]


@pytest.mark.parametrize(("status", "retryable"), STATUS_RETRYABLE)
@pytest.mark.parametrize("stream", [True, False])
async def test_http_status_mapping(
    status: int, retryable: bool, stream: bool, make_model: ModelFactory
) -> None:
    response = ReplayResponse.json_body(
        error_body(f"provider says {status}", code=f"code_{status}"), status=status
    )
    with ReplayServer([response]) as server:
        error = await failure(responses_model(make_model, server), stream=stream)
    assert type(error) is ProviderHTTPError
    assert (error.status, error.retryable, error.code, error.error_type) == (
        status,
        retryable,
        f"code_{status}",
        "invalid_request_error",
    )
    assert f"provider says {status}" in str(error)


async def test_error_message_names_provider_model_and_text(make_model: ModelFactory) -> None:
    body = error_body("The model `gpt-9` does not exist", code="model_not_found")
    with ReplayServer([ReplayResponse.json_body(body, status=404)]) as server:
        error = await failure(responses_model(make_model, server, "gpt-9"))
    assert str(error) == (
        "openai-responses model 'gpt-9' failed (HTTP 404): "
        "The model `gpt-9` does not exist (code 'model_not_found')"
    )


async def test_retry_after(make_model: ModelFactory) -> None:
    response = ReplayResponse.json_body(
        error_body("Rate limit reached", "requests", "rate_limit_exceeded"),
        status=429,
        headers=(("retry-after-ms", "1500"),),
    )
    with ReplayServer([response]) as server:
        error = await failure(responses_model(make_model, server))
    assert isinstance(error, ProviderHTTPError)
    assert (error.retry_after, error.headers["retry-after-ms"]) == (1.5, "1500")


async def test_context_length_exceeded_status(make_model: ModelFactory) -> None:
    body = error_body("Your input exceeds the context window of this model.", code="context_length_exceeded")
    with ReplayServer([ReplayResponse.json_body(body, status=400)]) as server:
        error = await failure(responses_model(make_model, server), stream=False)
    assert type(error) is ContextLengthExceededError
    assert (error.status, error.retryable) == (400, False)


async def test_failed_response_in_a_200_json_body(make_model: ModelFactory) -> None:
    body = {"status": "failed", "output": [], "error": {"code": "server_error", "message": "Upstream failed"}}
    with ReplayServer([ReplayResponse.json_body(body)]) as server:
        error = await failure(responses_model(make_model, server), stream=False)
    assert "Upstream failed" in str(error)
    assert (error.retryable, error.code) == (True, "server_error")


async def test_non_json_200_response(make_model: ModelFactory) -> None:
    response = ReplayResponse(status=200, headers=(("content-type", "text/plain"),), body=b"hello")
    with ReplayServer([response]) as server:
        error = await failure(responses_model(make_model, server), stream=False)
    assert "not JSON" in str(error)


async def test_connection_refused() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAIResponsesModel("gpt-5", base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
    try:
        error = await failure(model)
    finally:
        await model.aclose()
    assert error.retryable is True
    assert f"cannot connect to http://127.0.0.1:{port}/v1" in str(error)


@pytest.mark.usefixtures("no_openai_env")
def test_missing_api_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"cannot set up openai-responses model 'gpt-5'.*api_key"):
        OpenAIResponsesModel("gpt-5")
