"""The specification's seven invariants, each with tests that fail if the invariant breaks.

1. exactly one active execution per session     4. the lock is always released
2. the transcript is append-only                5. events are always emitted
3. every tool call is logged                    6. scope is always enforced
7. limits are respected (maxToolIterations here; token limits come with compaction)
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.helpers import assert_paired, read_jsonl, record_events

from loopwright import Agent, ModelError, SessionBusyError, ToolCall, tool
from loopwright.context.pairing import IN_DOUBT_RESULT
from loopwright.lanes import LocalSessionLocks
from loopwright.messages import AssistantMessage, ToolResultMessage
from loopwright.testing import AgentInfo, FunctionModel, ScriptedModel, TestModel

SPEC_SUCCESS = ["loop:start", "loop:context", "loop:execute", "loop:persist", "loop:end"]


@tool
def boom() -> str:
    """Always fails."""
    raise RuntimeError("kaboom")


@tool
async def slow() -> str:
    """Takes far too long."""
    await asyncio.sleep(30)
    return "never"


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


def _agent(model: object, tmp_path: Path, locks: LocalSessionLocks, **config: object) -> Agent:
    return Agent(model, tools=[boom, slow, echo], workspace=tmp_path, locks=locks, config=config)  # type: ignore[arg-type]


async def _assert_lock_free(agent: Agent, locks: LocalSessionLocks, session_id: str) -> None:
    assert locks.holder(session_id) is None
    follow_up = Agent(
        ScriptedModel(["next run works"]), workspace=agent.workspace, locks=locks, config={"queue_timeout": 0}
    )
    report = await follow_up.run("again", session_id=session_id)
    assert report.final_text == "next run works"


# --- 1. one execution per session -------------------------------------------------------------


async def test_two_runs_on_one_session_never_overlap(tmp_path: Path) -> None:
    active = 0
    peak = 0

    async def model(messages: list[object], info: object) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return "done"

    agent = Agent(FunctionModel(model), workspace=tmp_path)
    reports = await asyncio.gather(*(agent.run(f"m{i}", session_id="s") for i in range(5)))
    assert peak == 1
    assert all(r.reason == "done" for r in reports)
    users = [
        e["content"] for e in read_jsonl(tmp_path / "sessions/s/transcript.jsonl") if e.get("role") == "user"
    ]
    assert users == [f"m{i}" for i in range(5)]  # arrival order kept


async def test_different_sessions_run_in_parallel(tmp_path: Path) -> None:
    barrier = asyncio.Barrier(2)

    async def model(messages: list[object], info: object) -> str:
        async with asyncio.timeout(2):
            await barrier.wait()
        return "together"

    agent = Agent(FunctionModel(model), workspace=tmp_path)
    a, b = await asyncio.gather(agent.run("x", session_id="a"), agent.run("y", session_id="b"))
    assert (a.reason, b.reason) == ("done", "done")


async def test_busy_session_with_no_wait_is_refused(tmp_path: Path) -> None:
    gate = asyncio.Event()

    entered = asyncio.Event()

    async def model(messages: list[object], info: object) -> str:
        entered.set()
        await gate.wait()
        return "ok"

    locks = LocalSessionLocks()
    agent = Agent(FunctionModel(model), workspace=tmp_path, locks=locks, config={"queue_timeout": 0})
    first = asyncio.create_task(agent.run("one", session_id="s"))
    await entered.wait()
    with pytest.raises(SessionBusyError, match="'s' is busy"):
        await agent.run("two", session_id="s")
    gate.set()
    assert (await first).reason == "done"
    users = [
        e["content"] for e in read_jsonl(tmp_path / "sessions/s/transcript.jsonl") if e.get("role") == "user"
    ]
    assert users == ["one"]  # the refused message was never written


async def test_queue_wait_times_out_with_retry_hint(tmp_path: Path) -> None:
    gate = asyncio.Event()

    entered = asyncio.Event()

    async def model(messages: list[object], info: object) -> str:
        entered.set()
        await gate.wait()
        return "ok"

    locks = LocalSessionLocks()
    agent = Agent(FunctionModel(model), workspace=tmp_path, locks=locks, config={"queue_timeout": 0.05})
    first = asyncio.create_task(agent.run("one", session_id="s"))
    await entered.wait()
    with pytest.raises(SessionBusyError, match="retry later") as info:
        await agent.run("two", session_id="s")
    assert info.value.retry_after == pytest.approx(0.05)
    gate.set()
    await first


async def test_queue_depth_limit_rejects_at_once(tmp_path: Path) -> None:
    gate = asyncio.Event()

    async def model(messages: list[object], info: object) -> str:
        await gate.wait()
        return "ok"

    locks = LocalSessionLocks()
    agent = Agent(FunctionModel(model), workspace=tmp_path, locks=locks, config={"max_queue_depth": 2})
    runs = [asyncio.create_task(agent.run(f"m{i}", session_id="s")) for i in range(3)]
    while locks.waiting("s") < 2:  # noqa: ASYNC110 - the lock table has no event for "n waiters"
        await asyncio.sleep(0)
    with pytest.raises(SessionBusyError, match="2 requests are already waiting"):
        await agent.run("overflow", session_id="s")
    gate.set()
    assert [r.reason for r in await asyncio.gather(*runs)] == ["done"] * 3


# --- 2. append-only ---------------------------------------------------------------------------


async def test_transcript_only_grows_across_runs_and_repairs(tmp_path: Path) -> None:
    path = tmp_path / "sessions" / "s" / "transcript.jsonl"
    agent = Agent(TestModel(), tools=[echo], workspace=tmp_path)
    await agent.run("one", session_id="s")
    before = path.read_bytes()
    # a crashed run left a call without a result
    with path.open("a") as f:
        f.write(
            '{"role":"assistant","content":"","tool_calls":[{"id":"dangling","name":"echo","arguments":"{}"}]}\n'
        )
    crashed = path.read_bytes()
    await agent.run("two", session_id="s")
    after = path.read_bytes()
    assert after.startswith(crashed) and crashed.startswith(before)


# --- 3. every tool call logged, exactly one result each ---------------------------------------


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (
            ToolCall(id="c1", name="nope", arguments="{}"),
            "unknown tool 'nope'; available tools: boom, echo, slow",
        ),
        (ToolCall(id="c1", name="echo", arguments="{not json"), "invalid"),
        (ToolCall(id="c1", name="echo", arguments='{"text": 5}'), "text"),
        (ToolCall(id="c1", name="echo", arguments='{"txt": "x"}'), "text"),
        (ToolCall(id="c1", name="boom", arguments="{}"), "tool 'boom' failed: RuntimeError: kaboom"),
        (
            ToolCall(id="c1", name="slow", arguments="{}"),
            "tool 'slow' timed out after 0.05 s and was cancelled",
        ),
    ],
)
async def test_bad_tool_calls_become_error_results(tmp_path: Path, call: ToolCall, expected: str) -> None:
    locks = LocalSessionLocks()
    model = ScriptedModel([[call], "recovered"])
    agent = _agent(model, tmp_path, locks, tool_timeout=0.05)
    report = await agent.run("go", session_id="s")
    assert report.reason == "done" and report.final_text == "recovered"
    [result] = [m for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert result.is_error and expected in result.content
    assert report.steps[0].tool_calls[0].error == result.content
    logged = read_jsonl(tmp_path / "sessions/s/transcript.jsonl")
    assert [line.get("tool_call_id") for line in logged if line.get("role") == "tool"] == ["c1"]
    await _assert_lock_free(agent, locks, "s")


async def test_results_are_capped_before_they_are_stored(tmp_path: Path) -> None:
    model = ScriptedModel(
        [[ToolCall(id="big", name="echo", arguments='{"text": "' + "y" * 9000 + '"}')], "ok"]
    )
    agent = Agent(model, tools=[echo], workspace=tmp_path)
    await agent.run("go", session_id="s")
    [stored] = [e for e in read_jsonl(tmp_path / "sessions/s/transcript.jsonl") if e.get("role") == "tool"]
    assert stored["content"].startswith("y" * 8000)
    assert stored["content"].endswith("[truncated: 9000 characters, showing the first 8000]")
    assert len(stored["content"]) < 8100


async def test_every_call_has_one_result_when_a_step_is_cancelled(tmp_path: Path) -> None:
    calls = [ToolCall(id="fast", name="echo", arguments='{"text": "hi"}'), ToolCall(id="slow", name="slow")]
    locks = LocalSessionLocks()
    agent = _agent(ScriptedModel([calls]), tmp_path, locks)
    fast_done = asyncio.Event()
    agent.on("tool:end", lambda e: fast_done.set() if e.call_id == "fast" else None)  # type: ignore[union-attr]
    task = asyncio.create_task(agent.run("go", session_id="s"))
    await fast_done.wait()  # the fast call has finished; the slow one is running
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    entries = await agent.transcript("s")
    assert_paired(entries)  # type: ignore[arg-type]
    results = {e.tool_call_id: e for e in entries if isinstance(e, ToolResultMessage)}
    assert results["fast"].content == "hi" and not results["fast"].synthetic
    # it was running when the run was cancelled: whether it took effect is unknown ("in doubt")
    assert results["slow"].synthetic and results["slow"].content == IN_DOUBT_RESULT.format(why="run stopped")
    [saved] = await agent.reports("s")
    assert saved.reason == "stopped" and saved.step_count == 1
    fast, slow = saved.steps[0].tool_calls
    assert (fast.call_id, fast.skipped, fast.error) == ("fast", False, None)
    assert (slow.call_id, slow.skipped, slow.error) == (
        "slow",
        False,
        IN_DOUBT_RESULT.format(why="run stopped"),
    )
    assert saved.usage.requests == 1
    await _assert_lock_free(agent, locks, "s")


# --- 4. lock released on every path ------------------------------------------------------------


async def test_lock_released_when_a_tool_raises(tmp_path: Path) -> None:
    locks = LocalSessionLocks()
    agent = _agent(ScriptedModel([[ToolCall(id="b", name="boom")], "fine"]), tmp_path, locks)
    assert (await agent.run("go", session_id="s")).reason == "done"
    await _assert_lock_free(agent, locks, "s")


async def test_lock_released_and_partial_kept_when_the_model_errors(tmp_path: Path) -> None:
    from loopwright.models.base import TextDelta

    async def stream(messages: list[object], info: object):  # type: ignore[no-untyped-def]
        yield TextDelta("partial ans")
        raise ModelError("connection reset", provider="fake", model="m", status=None, retryable=True)

    locks = LocalSessionLocks()
    agent = _agent(FunctionModel(stream_function=stream), tmp_path, locks)
    report = await agent.run("go", session_id="s")
    assert report.reason == "error"
    assert report.error == "fake model 'm' failed: connection reset"
    assert report.final_text == "partial ans"
    last = read_jsonl(tmp_path / "sessions/s/transcript.jsonl")[-1]
    assert (last["role"], last["content"], last["finish_reason"]) == ("assistant", "partial ans", "error")
    await _assert_lock_free(agent, locks, "s")


async def test_lock_released_on_execution_timeout(tmp_path: Path) -> None:
    locks = LocalSessionLocks()
    agent = _agent(
        ScriptedModel([[ToolCall(id="z", name="slow")]]),
        tmp_path,
        locks,
        execution_timeout=0.1,
        tool_timeout=10,
    )
    report = await agent.run("go", session_id="s")
    assert report.reason == "timeout"
    assert report.error == "run exceeded its execution timeout of 0.1 s"
    entries = await agent.transcript("s")
    assert isinstance(entries[-1], ToolResultMessage)
    assert entries[-1].content == IN_DOUBT_RESULT.format(why="run timed out")  # cut off while running
    await _assert_lock_free(agent, locks, "s")


async def test_lock_released_on_stop(tmp_path: Path) -> None:
    locks = LocalSessionLocks()
    holder: list[Agent] = []

    @tool
    def stopper() -> str:
        """Asks the agent to stop."""
        assert holder[0].stop() == 1
        return "stop requested"

    agent = Agent(
        ScriptedModel([[ToolCall(id="s1", name="stopper")], "never sent"]),
        tools=[stopper],
        workspace=tmp_path,
        locks=locks,
    )
    holder.append(agent)
    report = await agent.run("go", session_id="s")
    assert report.reason == "stopped" and report.step_count == 1
    entries = await agent.transcript("s")
    assert isinstance(entries[-1], ToolResultMessage) and entries[-1].content == "stop requested"
    await _assert_lock_free(agent, locks, "s")


async def test_lock_released_when_the_store_fails(tmp_path: Path) -> None:
    locks = LocalSessionLocks()
    agent = _agent(ScriptedModel(["answer"]), tmp_path, locks)
    await agent.run("first", session_id="s")
    (tmp_path / "sessions/s/runs").rename(tmp_path / "runs-moved")
    (tmp_path / "sessions/s/runs").write_text("a file where a folder should be")
    report = await Agent(ScriptedModel(["again"]), workspace=tmp_path, locks=locks).run(
        "second", session_id="s"
    )
    assert report.reason == "error" and "could not persist the run" in (report.error or "")
    assert locks.holder("s") is None


# --- 5. events on every path ------------------------------------------------------------------


async def test_spec_events_on_success(tmp_path: Path) -> None:
    agent = Agent(TestModel(), tools=[echo], workspace=tmp_path)
    events = record_events(agent)
    report = await agent.run("go")
    names = [e.name for e in events]
    assert [n for n in names if n in SPEC_SUCCESS] == SPEC_SUCCESS
    assert {"tool:start", "tool:end", "stream:delta"} <= set(names)
    assert "loop:error" not in names
    assert events[0].payload() == {"runId": report.id, "sessionId": report.session_id}
    assert events[-1].payload() == {
        "runId": report.id,
        "success": True,
        "duration": round(report.total_ms, 3),
        "reason": "done",
    }
    context = next(e for e in events if e.name == "loop:context")
    assert context.payload()["tokenEstimate"] > 0
    assert next(e for e in events if e.name == "loop:execute").payload() == {"toolCount": 1}


@pytest.mark.parametrize("path", ["model_error", "timeout", "tool_error", "stop_via_cancel"])
async def test_spec_events_on_failure_paths(tmp_path: Path, path: str) -> None:
    locks = LocalSessionLocks()
    if path == "model_error":
        model: object = ScriptedModel([ModelError("bad", provider="p", model="m", status=500)])
    elif path == "timeout":
        model = ScriptedModel([[ToolCall(id="z", name="slow")]])
    elif path == "tool_error":
        model = ScriptedModel([[ToolCall(id="b", name="boom")], "ok"])
    else:
        model = ScriptedModel([[ToolCall(id="z", name="slow")]])
    agent = _agent(model, tmp_path, locks, execution_timeout=0.2 if path == "timeout" else 60)
    events = record_events(agent)
    tool_started = asyncio.Event()
    agent.on("tool:start", lambda e: tool_started.set())
    task = asyncio.create_task(agent.run("go", session_id="s"))
    if path == "stop_via_cancel":
        await tool_started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        await task
    names = [e.name for e in events]
    assert names[0] == "loop:start" and names[-2:] == ["loop:persist", "loop:end"]
    assert ("loop:error" in names) == (path in ("model_error", "timeout"))
    if path == "tool_error":
        assert "tool:end" in names
    assert events[-1].payload()["success"] is (path not in ("model_error", "timeout"))


async def test_a_failing_listener_does_not_break_the_run(tmp_path: Path) -> None:
    agent = Agent(TestModel(), tools=[echo])

    def bad(event: object) -> None:
        raise ValueError("listener bug")

    agent.on("*", bad)
    assert (await agent.run("go")).reason == "done"


# --- 6. scope ---------------------------------------------------------------------------------


async def test_file_tools_cannot_leave_the_workspace(tmp_path: Path) -> None:
    from loopwright.tools.builtin import builtin_tool

    (tmp_path / "secret.txt").write_text("top secret")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "link").symlink_to(tmp_path / "secret.txt")
    calls = [
        ToolCall(id="a", name="read_file", arguments='{"path": "../secret.txt"}'),
        ToolCall(id="b", name="read_file", arguments=f'{{"path": "{tmp_path / "secret.txt"}"}}'),
        ToolCall(id="c", name="read_file", arguments='{"path": "link"}'),
    ]
    model = ScriptedModel([calls, "done"])
    agent = Agent(model, tools=[builtin_tool("read_file", ws)], workspace=ws)
    await agent.run("steal")
    results = [m for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert len(results) == 3
    for r in results:
        assert r.is_error and "top secret" not in r.content and r.content.startswith("scope error: ")


# --- 7. maxToolIterations -------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 3])
async def test_max_tool_iterations_is_respected(tmp_path: Path, limit: int) -> None:
    tools_offered: list[int] = []

    def always_call(messages: list[object], info: AgentInfo) -> list[ToolCall]:
        tools_offered.append(len(info.tools))
        n = len(tools_offered)
        return [ToolCall(id=f"c{n}", name="echo", arguments=f'{{"text": "step {n}"}}')]

    agent = Agent(
        FunctionModel(always_call), tools=[echo], workspace=tmp_path, config={"max_tool_iterations": limit}
    )
    report = await agent.run("loop forever", session_id="s")
    assert report.reason == "max_steps"
    # `limit` tool steps, then one wind-down call offered no tools; its stubborn call is not run
    assert tools_offered == [1] * limit + [0]
    assert report.step_count == limit + 1
    executed = [c for s in report.steps for c in s.tool_calls if not c.skipped]
    assert len(executed) == limit
    assert report.steps[-1].tool_calls[0].error == "not executed: the run reached its limit"
    assert_paired(await agent.transcript("s"))  # type: ignore[arg-type]


async def test_max_tool_iterations_without_wind_down(tmp_path: Path) -> None:
    counter = 0

    def always_call(messages: list[object], info: object) -> list[ToolCall]:
        nonlocal counter
        counter += 1
        return [ToolCall(id=f"c{counter}", name="echo", arguments=f'{{"text": "step {counter}"}}')]

    config = {"max_tool_iterations": 2, "wind_down": False}
    report = await Agent(FunctionModel(always_call), tools=[echo], config=config).run("go")
    assert (report.reason, counter, report.step_count) == ("max_steps", 2, 2)


async def test_wind_down_asks_for_a_final_answer(tmp_path: Path) -> None:
    from loopwright.models.base import ModelResponse

    def model(messages: list[object], info: AgentInfo) -> ModelResponse | list[ToolCall]:
        if not info.tools:
            assert "This run has reached its limit (2 tool steps)" in info.system
            return ModelResponse(content="Best answer with what I have.")
        return [ToolCall(id=f"c{len(messages)}", name="echo", arguments=f'{{"text": "{len(messages)}"}}')]

    report = await Agent(FunctionModel(model), tools=[echo], config={"max_tool_iterations": 2}).run("go")
    assert (report.reason, report.final_text) == ("max_steps", "Best answer with what I have.")


async def test_partial_answer_is_kept_at_max_steps(tmp_path: Path) -> None:
    from loopwright.models.base import ModelResponse

    step = ModelResponse(
        content="working on it", tool_calls=(ToolCall(id="c", name="echo", arguments='{"text":"x"}'),)
    )
    config = {"max_tool_iterations": 1, "wind_down": False}
    report = await Agent(ScriptedModel([step]), tools=[echo], config=config).run("go")
    assert (report.reason, report.final_text) == ("max_steps", "working on it")


async def test_runaway_repeats_are_refused_then_the_run_ends(tmp_path: Path) -> None:
    executed = 0

    @tool
    def poll() -> str:
        """Poll something."""
        nonlocal executed
        executed += 1
        return "same"

    agent = Agent(
        FunctionModel(lambda m, i: [ToolCall(id=f"p{len(m)}", name="poll")]),
        tools=[poll],
        config={"max_tool_iterations": 50},
    )
    report = await agent.run("go")
    assert report.reason == "loop_detected"
    errors = [c.error for s in report.steps for c in s.tool_calls]
    # calls 1-2 run, 3 is refused, 4-5 run, 6 is refused and ends the run
    assert executed == 4 and report.step_count == 6
    assert errors[2] is not None and "same arguments 3 times in a row" in errors[2]
    assert [e is None for e in errors] == [True, True, False, True, True, False]


async def test_assistant_message_with_text_and_calls_is_logged_whole(tmp_path: Path) -> None:
    from loopwright.models.base import ModelResponse

    first = ModelResponse(
        content="Let me check.", tool_calls=(ToolCall(id="e", name="echo", arguments='{"text":"x"}'),)
    )
    agent = Agent(ScriptedModel([first, "done"]), tools=[echo], workspace=tmp_path)
    await agent.run("go", session_id="s")
    entries = await agent.transcript("s")
    assert isinstance(entries[1], AssistantMessage)
    assert entries[1].content == "Let me check." and entries[1].tool_calls[0].id == "e"
