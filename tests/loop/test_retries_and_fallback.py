"""Provider faults through real HTTP: retries with backoff and retry-after, replay-safe discards,
fallback along a model chain, and errors that end a run cleanly."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import assert_paired, record_events

from loopwright import Agent, ModelFallback, ModelRetry, StepDiscarded, TextChunk, tool
from loopwright.messages import ToolCall
from loopwright.models import OpenAIModel
from loopwright.testing import ReplayResponse, ReplayServer, openai_chat_stream

FAST_RETRIES = {"retry_backoff": 0.001, "max_retries": 3}


@tool
def lookup(city: str) -> str:
    """Look up a city."""
    return f"{city}: sunny"


def _error(status: int, message: str, *, headers: tuple[tuple[str, str], ...] = ()) -> ReplayResponse:
    body = {
        "error": {"message": message, "type": "server_error" if status >= 500 else "rate_limit", "code": None}
    }
    return ReplayResponse.json_body(body, status=status, headers=headers)


def _model(server: ReplayServer, name: str = "gpt-test") -> OpenAIModel:
    return OpenAIModel(name, base_url=server.base_url, api_key="test")


async def test_rate_limit_with_retry_after_is_retried_and_succeeds(tmp_path: Path) -> None:
    limited = _error(429, "Rate limit reached", headers=(("retry-after-ms", "20"),))
    answer = ReplayResponse.sse(openai_chat_stream(text=["All ", "good."]))
    with ReplayServer([limited, limited, answer]) as server:
        async with Agent(_model(server), workspace=tmp_path, config=FAST_RETRIES) as agent:
            events = record_events(agent)
            report = await agent.run("hi", session_id="s")
    retries = [e for e in events if isinstance(e, ModelRetry)]
    assert [(r.attempt, r.delay, r.status) for r in retries] == [(1, 0.02, 429), (2, 0.02, 429)]
    assert "Rate limit reached" in retries[0].error
    assert (report.reason, report.final_text, report.retries) == ("done", "All good.", 2)
    assert len(server.requests) == 3
    lines = [json.loads(x) for x in (tmp_path / "sessions/s/transcript.jsonl").read_text().splitlines()]
    assert [line["role"] for line in lines] == ["user", "assistant"]  # failed attempts leave no trace


async def test_server_errors_end_the_run_after_three_retries(tmp_path: Path) -> None:
    with ReplayServer([_error(500, "The server had an error")] * 4) as server:
        async with Agent(_model(server), workspace=tmp_path, config=FAST_RETRIES) as agent:
            events = record_events(agent)
            report = await agent.run("hi", session_id="s")
    assert len(server.requests) == 4
    assert [e.attempt for e in events if isinstance(e, ModelRetry)] == [1, 2, 3]
    assert report.reason == "error" and report.retries == 3
    assert report.error is not None
    assert (
        "openai model 'gpt-test'" in report.error
        and "500" in report.error
        and "The server had an error" in report.error
    )
    assert [e.name for e in events][-3:] == ["loop:error", "loop:persist", "loop:end"]


async def test_client_errors_are_not_retried(tmp_path: Path) -> None:
    body = {
        "error": {
            "message": "The model `nope` does not exist",
            "type": "invalid_request_error",
            "code": "model_not_found",
        }
    }
    with ReplayServer([ReplayResponse.json_body(body, status=404)]) as server:
        async with Agent(_model(server, "nope"), config=FAST_RETRIES) as agent:
            report = await agent.run("hi")
    assert len(server.requests) == 1
    assert report.reason == "error" and report.retries == 0
    assert "does not exist" in (report.error or "")


async def test_backoff_doubles_from_retry_backoff(tmp_path: Path) -> None:
    with ReplayServer(
        [_error(503, "overloaded")] * 3 + [ReplayResponse.sse(openai_chat_stream(text="ok"))]
    ) as server:
        async with Agent(_model(server), config={"retry_backoff": 0.002, "max_retries": 3}) as agent:
            events = record_events(agent)
            await agent.run("hi")
    assert [e.delay for e in events if isinstance(e, ModelRetry)] == [0.002, 0.004, 0.008]


async def test_a_stream_cut_mid_tool_call_is_discarded_retried_then_reported(tmp_path: Path) -> None:
    call = ToolCall(id="call_1", name="lookup", arguments='{"city": "Oslo"}')
    body = openai_chat_stream(text=["Let me look. "], tool_calls=[call], args_pieces=4)
    cut = ReplayResponse.sse(body, cut_after=body.index(b"Os") + 2)
    with ReplayServer([cut] * 4) as server:
        async with Agent(_model(server), tools=[lookup], workspace=tmp_path, config=FAST_RETRIES) as agent:
            events = record_events(agent)
            report = await agent.run("weather?", session_id="s")
    assert report.reason == "error" and report.retries == 3
    assert "stream" in (report.error or "").lower()
    # each failed attempt had streamed text: consumers are told to drop it before the retry
    kinds = [e.type for e in events if isinstance(e, (TextChunk, StepDiscarded, ModelRetry))]
    assert kinds == ["text", "discard", "retry"] * 3 + ["text", "discard"]
    entries = await agent.transcript("s")
    assert_paired(entries)  # type: ignore[arg-type]
    assert [(e.role, getattr(e, "tool_calls", ())) for e in entries] == [
        ("user", ()),
        ("assistant", ()),  # the partial text is kept; the half-received call is not
    ]
    assert entries[1].content == "Let me look. "


async def test_a_retry_after_partial_text_streams_the_answer_once(tmp_path: Path) -> None:
    body = openai_chat_stream(text=["Hello ", "world ", "again."])
    cut = ReplayResponse.sse(body, cut_after=body.index(b"world") + 2)
    with ReplayServer([cut, ReplayResponse.sse(body)]) as server:
        async with Agent(_model(server), config=FAST_RETRIES) as agent:
            shown: list[str] = []
            async for event in agent.stream("hi"):
                if isinstance(event, TextChunk):
                    shown.append(event.text)
                elif isinstance(event, StepDiscarded):
                    shown.clear()
            report = event.report  # type: ignore[union-attr]
    assert "".join(shown) == report.final_text == "Hello world again."


async def test_fallback_to_the_next_model_on_persistent_overload(tmp_path: Path) -> None:
    overloaded = _error(529, "Overloaded")
    with (
        ReplayServer([overloaded] * 4) as first,
        ReplayServer(
            [ReplayResponse.sse(openai_chat_stream(text="from the backup", model="backup-model"))]
        ) as second,
    ):
        chain = [_model(first, "primary"), _model(second, "backup")]
        async with Agent(chain, workspace=tmp_path, config=FAST_RETRIES) as agent:
            events = record_events(agent)
            report = await agent.run("hi", session_id="s")
    assert (report.reason, report.final_text) == ("done", "from the backup")
    [fallback] = [e for e in events if isinstance(e, ModelFallback)]
    assert (fallback.failed, fallback.next) == ("openai:primary", "openai:backup")
    assert report.steps[0].model == "backup-model"  # the model that answered, as the provider named it
    assert len(first.requests) == 4 and len(second.requests) == 1


async def test_an_unavailable_model_in_the_chain_is_skipped(monkeypatch: object) -> None:
    from loopwright.testing import TestModel

    agent = Agent(
        ["openai-compatible:no-url-given", TestModel(text="backup answered")]
    )  # first cannot be set up
    report = await agent.run("hi")
    assert report.final_text == "backup answered"
    assert report.steps[0].model == "test"


async def test_a_model_call_that_stalls_keeps_its_partial_text_and_reports_the_timeout(
    tmp_path: Path,
) -> None:
    body = openai_chat_stream(text=["Here is the first part", " and the rest."])
    stalled = ReplayResponse.sse(body, split=[body.index(b" and the rest")], pause=1.0)
    with ReplayServer([stalled]) as server:
        model = OpenAIModel("gpt-test", base_url=server.base_url, api_key="test", timeout=0.3)
        async with Agent(model, workspace=tmp_path, config={"max_retries": 0}) as agent:
            report = await agent.run("hi", session_id="s")
    assert report.reason == "error" and "timed out" in (report.error or "")
    assert report.final_text == "Here is the first part"  # what had streamed is kept
    entries = await Agent(workspace=tmp_path).transcript("s")
    assert (entries[-1].role, entries[-1].content) == ("assistant", "Here is the first part")  # type: ignore[union-attr]
