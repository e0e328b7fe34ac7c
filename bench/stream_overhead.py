"""Per-chunk cost of loopwright's stream handling against the bare SDK iterating the same stream.

Each provider's recorded stream (byte for byte, from ../shared/fixtures/provider-recordings) is
served through httpx's in-process transport, so no network noise enters the figures; both sides use
the official SDK client and its HTTP stack:

  bare SDK     the SDK's own streaming call (``chat.completions.create`` / ``messages.create``), every
               chunk iterated, nothing done with it
  loopwright   ``model.stream(request)`` with every event fed to the loop's step accumulator — SSE
               parsing, quirk handling, tool-call argument joining, usage, finish reason

The figure is wall time per chunk from the first chunk to the end of the stream (the request itself
is left out: that cost is measured in loop_overhead.py), the two alternated in rounds; the ratio is
loopwright over bare.
Run: ``python bench/stream_overhead.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

try:  # the provider SDKs are built on httpx2 (openai 3.x, anthropic 2.x)
    import httpx2 as httpx
except ImportError:  # pragma: no cover - older SDKs use httpx
    import httpx  # type: ignore[no-redef]

from loopwright.messages import UserMessage
from loopwright.models._accumulate import StepAccumulator
from loopwright.models.base import Model, ModelRequest

RECORDINGS = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "provider-recordings"

CASES = [
    # (provider, recording, interaction index)
    ("openai", "openai-chat-stream-parallel-role-and-tool-in-first-delta.json", 2),
    ("openai", "openai-chat-stream-agent-loop-parallel-split-args.json", 2),
    ("anthropic", "anthropic-stream-pause-turn-continuation.json", 0),
    ("anthropic", "anthropic-stream-tool-use-split-input-json.json", 0),
]


def _body(recording: dict[str, Any], index: int) -> tuple[bytes, int]:
    response = recording["interactions"][index]["response"]
    events = response["sse_events"]
    return ("\n\n".join(events) + "\n\n").encode(), len(events)


def _transport(body: bytes) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx.MockTransport(handler)


Timed = Callable[[], Awaitable[float]]
GO = [{"role": "user", "content": "go"}]


def _ours(model: Model) -> Timed:
    """loopwright's side: the provider's event stream fed to the loop's step accumulator."""
    request = ModelRequest(system="", messages=[UserMessage(content="go")])

    async def ours() -> float:
        acc = StepAccumulator()
        spent = await _iterate(model.stream(request), acc.add)
        acc.response()
        return spent

    return ours


def _openai_pair(body: bytes) -> tuple[Timed, Timed]:
    import openai

    from loopwright.models.openai import OpenAIModel

    http = httpx.AsyncClient(transport=_transport(body))
    client = openai.AsyncOpenAI(
        api_key="bench", base_url="http://bench.local/v1", max_retries=0, http_client=http
    )

    async def bare() -> float:
        return await _iterate(
            await client.chat.completions.create(model="gpt-4o", messages=GO, stream=True), None
        )

    return bare, _ours(OpenAIModel("gpt-4o", client=client))


def _anthropic_pair(body: bytes) -> tuple[Timed, Timed]:
    import anthropic

    from loopwright.models.anthropic import AnthropicModel

    http = httpx.AsyncClient(transport=_transport(body))
    client = anthropic.AsyncAnthropic(
        api_key="bench", base_url="http://bench.local", max_retries=0, http_client=http
    )

    async def bare() -> float:
        stream = await client.messages.create(model="claude-bench", max_tokens=1024, messages=GO, stream=True)
        return await _iterate(stream, None)

    return bare, _ours(AnthropicModel("claude-bench", client=client))


async def _iterate(stream: AsyncIterator[Any], handle: Callable[[Any], None] | None) -> float:
    """Seconds from the first item to the end of ``stream``."""
    first: float | None = None
    async for item in stream:
        if first is None:
            first = time.perf_counter()
        if handle is not None:
            handle(item)
    return time.perf_counter() - (first or time.perf_counter())


async def _per_chunk(fn: Callable[[], Awaitable[float]], runs: int, chunks: int) -> float:
    spent = 0.0
    for _ in range(runs):
        spent += await fn()
    return spent / runs / max(1, chunks - 1) * 1e6


async def measure(runs: int, rounds: int) -> list[tuple[str, int, float, float]]:
    results = []
    for provider, name, index in CASES:
        recording = json.loads((RECORDINGS / name).read_text())
        body, chunks = _body(recording, index)
        bare, ours = (_openai_pair if provider == "openai" else _anthropic_pair)(body)
        for fn in (bare, ours):
            await _per_chunk(fn, max(3, runs // 10), chunks)
        samples: dict[str, list[float]] = {"bare": [], "ours": []}
        for _ in range(rounds):
            samples["bare"].append(await _per_chunk(bare, runs, chunks))
            samples["ours"].append(await _per_chunk(ours, runs, chunks))
        results.append(
            (
                f"{provider}: {name.removesuffix('.json')}[{index}]",
                chunks,
                statistics.median(samples["bare"]),
                statistics.median(samples["ours"]),
            )
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer runs (noisier figures)")
    options = parser.parse_args()
    runs, rounds = (20, 3) if options.quick else (100, 7)
    print("Per-chunk stream handling: loopwright vs the bare SDK on the same recorded stream")
    print(f"{'stream':<76}{'chunks':>7}{'bare µs':>10}{'ours µs':>10}{'ratio':>8}")
    for label, chunks, bare, ours in asyncio.run(measure(runs, rounds)):
        print(f"{label:<76}{chunks:>7}{bare:>10.1f}{ours:>10.1f}{ours / bare:>8.2f}")


if __name__ == "__main__":
    main()
