"""Framework overhead per loop step, against hand-written floors measured in the same run.

Part 1 — an instant model (no I/O) asks for 10 tool calls, one per step, then answers: 11 steps per
run. Measured, alternating in rounds so machine noise hits every variant alike:

  floor/dicts      a hand-written loop on plain dicts (json.loads for the arguments)
  floor/pydantic   a hand-written loop with pydantic-validated arguments and OpenAI-format messages
  loopwright/mem   Agent.run with the in-memory session store (every feature on: events, reports,
                   runaway detection, result caps, timeouts, locking)
  loopwright/jsonl Agent.run with the JSONL file store (a new session per run: flush per entry,
                   fsync when the user message is acknowledged and at the end of the run)

Part 2 — a 10-step streamed run against a local OpenAI-compatible server (a separate process on
127.0.0.1): loopwright's OpenAI provider vs a hand-written loop on the raw ``openai`` SDK doing the
same requests, alternated.

Run: ``python bench/loop_overhead.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from loopwright import Agent, tool
from loopwright.messages import Usage
from loopwright.models.base import (
    ModelEvent,
    ModelRequest,
    ModelResponse,
    StreamFinish,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    UsageUpdate,
)
from loopwright.sessions import MemorySessionStore

STEPS = 10  # tool steps per run; plus one final answer
USAGE = Usage(input_tokens=10, output_tokens=5, requests=1)


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def add_plain(a: int, b: int) -> int:
    return a + b


class InstantModel:
    """Answers at once from precomputed turns: ``steps`` tool calls, then a final answer."""

    name = "instant"

    def __init__(self, steps: int = STEPS) -> None:
        self._turns: list[list[ModelEvent]] = [
            [
                ToolCallStart(index=0, id=f"call_{n}", name="add"),
                ToolCallArgsDelta(index=0, delta=f'{{"a": {n}, "b": 2}}'),
                UsageUpdate(USAGE),
                StreamFinish(reason="tool_calls"),
            ]
            for n in range(steps)
        ]
        self._turns.append([TextDelta("The sum is done."), UsageUpdate(USAGE), StreamFinish(reason="stop")])
        self._run: str | None = None
        self._step = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if request.run_id != self._run:
            self._run, self._step = request.run_id, 0
        events = self._turns[self._step]
        self._step += 1
        for event in events:
            yield event

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise NotImplementedError


def _instant_responses() -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": "add", "arguments": f'{{"a": {n}, "b": 2}}'},
                }
            ],
        }
        for n in range(STEPS)
    ]
    turns.append({"role": "assistant", "content": "The sum is done."})
    return turns


RESPONSES = _instant_responses()


async def floor_dicts() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    step = 0
    while True:
        response = RESPONSES[step]
        step += 1
        messages.append(response)
        calls = response.get("tool_calls")
        if not calls:
            return
        for call in calls:
            args = json.loads(call["function"]["arguments"])
            result = await add_plain(**args)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(result)})


class AddArgs(BaseModel):
    a: int
    b: int


async def floor_pydantic() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You add numbers."},
        {"role": "user", "content": "go"},
    ]
    step = 0
    while True:
        response = RESPONSES[step]
        step += 1
        messages.append(response)
        calls = response.get("tool_calls")
        if not calls:
            return
        for call in calls:
            args = AddArgs.model_validate_json(call["function"]["arguments"])
            result = await add_plain(args.a, args.b)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(result)})


async def _time_runs(fn: Callable[[], Awaitable[Any]], runs: int, steps: int = STEPS + 1) -> float:
    """Microseconds per step."""
    start = time.perf_counter()
    for _ in range(runs):
        await fn()
    return (time.perf_counter() - start) / runs / steps * 1e6


async def part_one(runs: int, rounds: int) -> dict[str, float]:
    mem_agent = Agent(
        InstantModel(), tools=[add], store=MemorySessionStore(), config={"max_tool_iterations": 50}
    )
    tmp = tempfile.TemporaryDirectory(prefix="loopwright-bench-")
    file_agent = Agent(InstantModel(), tools=[add], workspace=tmp.name, config={"max_tool_iterations": 50})
    answer_only = Agent(InstantModel(steps=0), workspace=tmp.name)
    file_runs = max(10, runs // 5)
    variants: dict[str, tuple[Callable[[], Awaitable[Any]], int, int]] = {
        "floor/dicts": (floor_dicts, runs * 4, STEPS + 1),
        "floor/pydantic": (floor_pydantic, runs * 4, STEPS + 1),
        "loopwright/mem": (lambda: mem_agent.run("go"), runs, STEPS + 1),
        "loopwright/jsonl": (lambda: file_agent.run("go"), file_runs, STEPS + 1),
        # the JSONL store's fixed cost per run: a run whose model answers at once (one step, no tools)
        "jsonl fixed per run": (lambda: answer_only.run("go"), file_runs, 1),
    }
    for fn, n, steps in variants.values():  # warm up
        await _time_runs(fn, max(5, n // 10), steps)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, (fn, n, steps) in variants.items():
            samples[name].append(await _time_runs(fn, n, steps))
    tmp.cleanup()
    return {name: statistics.median(values) for name, values in samples.items()}


# --- part 2: streamed runs against a local OpenAI-compatible server ---------------------------

SERVER = r"""
import json, sys
from loopwright.testing._server import ReplayResponse, ReplayServer, openai_chat_stream
from loopwright.messages import ToolCall
STEPS = int(sys.argv[1])
def answer(request):
    body = json.loads(request.body)
    done = sum(1 for m in body["messages"] if m["role"] == "tool")
    if done < STEPS:
        call = ToolCall(id=f"call_{done}", name="add", arguments=json.dumps({"a": done, "b": 2}))
        return ReplayResponse.sse(openai_chat_stream(tool_calls=[call], usage=(100 + done, 12)))
    return ReplayResponse.sse(openai_chat_stream(text=["The ", "sum ", "is ", "done", "."], usage=(120, 6)))
with ReplayServer(answer) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()
"""

TOOLS_WIRE = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": False,
            },
        },
    }
]


async def raw_sdk_run(client: Any) -> str:
    """What a careful user writes by hand on the openai SDK: stream, accumulate calls, run tools."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You add numbers."},
        {"role": "user", "content": "go"},
    ]
    while True:
        stream = await client.chat.completions.create(
            model="bench-model",
            messages=messages,
            tools=TOOLS_WIRE,
            stream=True,
            stream_options={"include_usage": True},
        )
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        async for chunk in stream:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                text.append(delta.content)
            for tc in delta.tool_calls or ():
                entry = calls.setdefault(tc.index, {"id": tc.id, "name": "", "arguments": ""})
                if tc.id:
                    entry["id"] = tc.id
                if tc.function and tc.function.name:
                    entry["name"] = tc.function.name
                if tc.function and tc.function.arguments:
                    entry["arguments"] += tc.function.arguments
        if not calls:
            return "".join(text)
        messages.append(
            {
                "role": "assistant",
                "content": "".join(text) or None,
                "tool_calls": [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"]},
                    }
                    for c in calls.values()
                ],
            }
        )
        for c in calls.values():
            args = AddArgs.model_validate_json(c["arguments"])
            result = await add_plain(args.a, args.b)
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": str(result)})


async def part_two(base_url: str, runs: int, rounds: int) -> dict[str, float]:
    import openai

    from loopwright.models.openai import OpenAIModel

    client = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
    model = OpenAIModel("bench-model", base_url=base_url, api_key="bench")
    agent = Agent(
        model,
        system="You add numbers.",
        tools=[add],
        store=MemorySessionStore(),
        config={"max_tool_iterations": 50},
    )

    async def ours() -> None:
        report = await agent.run("go")
        assert report.reason == "done" and report.step_count == STEPS + 1, report.error

    async def theirs() -> None:
        assert await raw_sdk_run(client) == "The sum is done."

    for fn in (ours, theirs):
        for _ in range(3):
            await fn()
    samples: dict[str, list[float]] = {"raw openai SDK": [], "loopwright": []}
    for _ in range(rounds):
        for name, fn in (("raw openai SDK", theirs), ("loopwright", ours)):
            start = time.perf_counter()
            for _ in range(runs):
                await fn()
            samples[name].append((time.perf_counter() - start) / runs * 1000.0)
    await client.close()
    return {name: statistics.median(values) for name, values in samples.items()}


def with_server(fn: Callable[[str], dict[str, float]]) -> dict[str, float]:
    """Run ``fn(base_url)`` against the OpenAI-compatible server, started in its own process."""
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(STEPS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        return fn(server.stdout.readline().strip())
    finally:
        if server.stdin:
            server.stdin.close()
        server.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer runs (noisier figures)")
    options = parser.parse_args()
    runs, rounds, stream_runs, stream_rounds = (60, 3, 3, 3) if options.quick else (300, 7, 10, 7)

    print(f"Part 1: framework overhead per step ({STEPS} tool steps + final answer, instant model)")
    results = asyncio.run(part_one(runs, rounds))
    fixed = results.pop("jsonl fixed per run")
    floor = results["floor/pydantic"]
    print(f"{'variant':<20}{'µs/step':>10}{'× pydantic floor':>20}")
    for name, value in results.items():
        print(f"{name:<20}{value:>10.1f}{value / floor:>20.2f}")
    print(
        f"loopwright/jsonl: of which {fixed / 1000:.2f} ms per run is fixed (a new session folder, metadata, "
        "the report, 2 fsyncs)"
    )
    print("target: loopwright/mem at most 50 µs/step")

    print(f"\nPart 2: {STEPS}-step streamed run against a local OpenAI-compatible server")
    streamed = with_server(lambda url: asyncio.run(part_two(url, stream_runs, stream_rounds)))
    base = streamed["raw openai SDK"]
    print(f"{'variant':<20}{'ms/run':>10}{'× raw SDK':>20}")
    for name, value in streamed.items():
        print(f"{name:<20}{value:>10.2f}{value / base:>20.2f}")
    print("target: loopwright at most 1.10 × the raw SDK loop")


if __name__ == "__main__":
    main()
