"""How context work grows with the length of a session: 1,000 to 10,000 transcript entries.

Each transcript is written through the real :class:`FileSessionStore` (JSONL on disk) with a
realistic mix: user messages, assistant messages with one or two tool calls, tool results whose
sizes vary from a line to a large file (60% under 500 characters, 30% 1-5k, 10% 10-40k), and a
final answer per turn. Contents are lines of this repository's own sources, so they tokenize like
real tool output. Measured, each at 1k / 2k / 5k / 10k entries:

  load cold         a new store reads and parses the whole transcript
  load warm         the same store loads again (its per-session cache: no file read)
  repair pairing    what a run does once at its start: warm load, then repair_pairing
  estimate cold     HybridEstimate over every message, no anchor (chars/4, and exact o200k_base)
  estimate rerun    the same HybridEstimate on a new run of the session: a fresh list of the same
                    message objects (the store's cache), no anchor yet: lookups, no counting
  estimate step     one more step after an anchor: an assistant message and its tool result
                    (per step, timed over 50 steps)
  prune             prune_tool_results over the whole history (no cache, then with a PruneCache)
  compose step      what a loop step does before calling the model: append the step's messages,
                    prune the history (cached), estimate the view from the anchor (per step)

Time is the best of several repetitions (other work on the machine only ever adds to it); memory is
tracemalloc's peak for one repetition, run separately (tracing slows the code down). The ratio
10k / 1k shows the growth: about 10 is linear, about 1 is flat. Run: ``python bench/context_scale.py`` (``--quick`` for fewer repetitions).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from loopwright.context.accounting import BpeCounter, CharCounter, HybridEstimate, TokenCounter
from loopwright.context.pairing import repair_pairing
from loopwright.context.pruning import PruneCache, prune_tool_results
from loopwright.errors import ConfigError
from loopwright.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage, now_iso
from loopwright.sessions import FileSessionStore, SessionInfo

ROOT = Path(__file__).resolve().parents[1]
SIZES = (1_000, 2_000, 5_000, 10_000)
SYSTEM = "You are a helpful assistant working in a code repository. " * 20
TOOLS = ("read_file", "grep", "run_tests", "list_dir", "write_file")
STEPS_PER_SAMPLE = 50
"""The step operations run this many steps per sample; their figures are per step."""
PER_STEP = ("estimate step chars/4", "estimate step exact", "compose step")


def _corpus() -> list[str]:
    lines: list[str] = []
    for path in sorted((ROOT / "src" / "loopwright").rglob("*.py")):
        lines.extend(line for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return lines


def _text(rng: random.Random, lines: list[str], chars: int) -> str:
    out: list[str] = []
    size = 0
    start = rng.randrange(len(lines))
    while size < chars:
        line = lines[(start + len(out)) % len(lines)]
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)[:chars]


def _result_size(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.6:
        return rng.randint(50, 500)
    if roll < 0.9:
        return rng.randint(1_000, 5_000)
    return rng.randint(10_000, 40_000)


def build_messages(n: int, seed: int = 7) -> list[Message]:
    rng = random.Random(seed)
    lines = _corpus()
    out: list[Message] = []
    turn = 0
    while len(out) < n:
        turn += 1
        out.append(UserMessage(content=_text(rng, lines, rng.randint(50, 300)), timestamp=now_iso()))
        for step in range(rng.randint(1, 4)):
            calls = tuple(
                ToolCall(
                    id=f"call_{turn}_{step}_{k}",
                    name=rng.choice(TOOLS),
                    arguments=f'{{"path": "src/module_{rng.randint(1, 99)}.py", "query": "{_text(rng, lines, 30)!r}"}}',
                )
                for k in range(rng.choice((1, 1, 1, 2)))
            )
            out.append(AssistantMessage(content=_text(rng, lines, rng.randint(0, 200)), tool_calls=calls))
            for c in calls:
                out.append(
                    ToolResultMessage(
                        tool_call_id=c.id,
                        name=c.name,
                        content=_text(rng, lines, _result_size(rng)),
                        is_error=rng.random() < 0.03,
                    )
                )
        out.append(AssistantMessage(content=_text(rng, lines, rng.randint(200, 1_500))))
    return out[:n]


async def _best_ms(fn: Callable[[], Awaitable[Any]], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        await fn()
        times.append((time.perf_counter() - started) * 1000.0)
    return min(times)


async def _peak_kib(fn: Callable[[], Awaitable[Any]]) -> float:
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        await fn()
        return tracemalloc.get_traced_memory()[1] / 1024.0
    finally:
        tracemalloc.stop()


def _step_messages(prefix: str, n: int) -> list[tuple[Message, Message]]:
    """Prebuilt steps (an assistant call and its result), so building them is not timed."""
    pairs: list[tuple[Message, Message]] = []
    for i in range(n):
        call = ToolCall(id=f"{prefix}_{i}", name="grep", arguments='{"query": "HybridEstimate"}')
        pairs.append(
            (
                AssistantMessage(content="Looking for it.", tool_calls=(call,)),
                ToolResultMessage(tool_call_id=call.id, name="grep", content="found it " * 40),
            )
        )
    return pairs


class Case:
    """One transcript size and the operations measured on it."""

    def __init__(self, root: Path, n: int, exact: TokenCounter | None) -> None:
        self.root = root
        self.n = n
        self.session = f"scale-{n}"
        self.exact = exact
        self.store = FileSessionStore(root)
        self.messages: list[Message] = []
        self.prune_cache = PruneCache()

    async def write(self) -> float:
        await self.store.create(SessionInfo(id=self.session))
        messages = build_messages(self.n)
        started = time.perf_counter()
        for i in range(0, len(messages), 50):
            await self.store.append(self.session, messages[i : i + 50])
        await self.store.sync(self.session)
        elapsed = time.perf_counter() - started
        self.messages = (await self.store.load(self.session)).messages
        return elapsed

    def size_mib(self) -> float:
        return self.store.transcript_path(self.session).stat().st_size / 2**20

    async def load_cold(self) -> None:
        await FileSessionStore(self.root).load(self.session)

    async def load_warm(self) -> None:
        await self.store.load(self.session)

    def _estimate_cold(self, counter: TokenCounter) -> Callable[[], Awaitable[int]]:
        async def run() -> int:
            return HybridEstimate(counter).estimate(SYSTEM, self.messages)

        return run

    def _estimate_step(self, counter: TokenCounter) -> Callable[[], Awaitable[int]]:
        hybrid = HybridEstimate(counter)
        messages = list(self.messages)
        hybrid.record_actual(hybrid.estimate(SYSTEM, messages), len(messages) - 1)
        pairs = iter(_step_messages("step", 2_000))

        async def run() -> int:
            total = 0
            for _ in range(STEPS_PER_SAMPLE):
                messages.extend(next(pairs))
                total = hybrid.estimate(SYSTEM, messages)
                hybrid.record_actual(total, len(messages) - 1)
            return total

        return run

    async def prune_plain(self) -> None:
        prune_tool_results(self.messages)

    async def prune_cached(self) -> None:
        prune_tool_results(self.messages, cache=self.prune_cache)

    async def repair(self) -> None:
        repair_pairing((await self.store.load(self.session)).messages)

    def _estimate_rerun(self, counter: TokenCounter) -> Callable[[], Awaitable[int]]:
        hybrid = HybridEstimate(counter)
        hybrid.estimate(SYSTEM, self.messages)

        async def run() -> int:  # a new run: a fresh list of the same messages, no anchor yet
            return hybrid.estimate(SYSTEM, (await self.store.load(self.session)).messages)

        return run

    def compose_step(self, counter: TokenCounter) -> Callable[[], Awaitable[int]]:
        """Loop steps on a growing conversation: the step's new messages, the pruned view, the
        anchored estimate of that view."""
        hybrid = HybridEstimate(counter)
        cache = PruneCache()
        messages = list(self.messages)
        view, _ = prune_tool_results(messages, cache=cache)
        hybrid.record_actual(hybrid.estimate(SYSTEM, view), len(view) - 1)
        pairs = iter(_step_messages("compose", 2_000))

        async def run() -> int:
            total = 0
            for _ in range(STEPS_PER_SAMPLE):
                messages.extend(next(pairs))
                view, _ = prune_tool_results(messages, cache=cache)
                total = hybrid.estimate(SYSTEM, view)
                hybrid.record_actual(total, len(view) - 1)
            return total

        return run

    def operations(self) -> dict[str, Callable[[], Awaitable[Any]]]:
        exact = self.exact
        ops: dict[str, Callable[[], Awaitable[Any]]] = {
            "load cold": self.load_cold,
            "load warm": self.load_warm,
            "repair pairing": self.repair,
            "estimate cold chars/4": self._estimate_cold(CharCounter()),
        }
        if exact is not None:
            ops["estimate cold exact"] = self._estimate_cold(exact)
            ops["estimate rerun exact"] = self._estimate_rerun(exact)
        ops["estimate step chars/4"] = self._estimate_step(CharCounter())
        if exact is not None:
            ops["estimate step exact"] = self._estimate_step(exact)
        ops["prune (no cache)"] = self.prune_plain
        ops["prune (PruneCache)"] = self.prune_cached
        ops["compose step"] = self.compose_step(exact or CharCounter())
        return ops


async def main_async(repeat: int) -> None:
    exact: TokenCounter | None = None
    try:
        bpe = BpeCounter("o200k_base")
        bpe.load()
        exact = bpe
    except ConfigError as exc:  # the extra is missing: measure chars/4 only
        print(f"(exact tokenizer unavailable: {exc})")
    with tempfile.TemporaryDirectory(prefix="loopwright-scale-") as tmp:
        cases = [Case(Path(tmp), n, exact) for n in SIZES]
        print("Transcripts written through FileSessionStore")
        for case in cases:
            seconds = await case.write()
            tool_results = sum(1 for m in case.messages if type(m) is ToolResultMessage)
            view, saved = prune_tool_results(case.messages)
            pruned = sum(1 for a, b in zip(case.messages, view, strict=True) if a is not b)
            print(
                f"  {case.n:>6,} entries  {case.size_mib():6.1f} MiB  {tool_results:>5} tool results, "
                f"{pruned:>4} pruned ({saved / 2**20:.1f} MiB of text)  written in {seconds * 1000:.0f} ms"
            )
        times: dict[str, list[float]] = {}
        peaks: dict[str, list[float]] = {}
        for case in cases:
            await case.prune_cached()  # fill the cache: "prune (PruneCache)" is the steady state
            ops = case.operations()
            for name, fn in ops.items():
                await fn()  # warm-up (and the first fill of every cache)
                per = STEPS_PER_SAMPLE if name in PER_STEP else 1
                times.setdefault(name, []).append(await _best_ms(fn, repeat) / per)
            for name, fn in case.operations().items():
                await fn()
                peaks.setdefault(name, []).append(await _peak_kib(fn))
        header = "".join(f"{n:>10,}" for n in SIZES)
        print(f"\nTime, ms (best of {repeat}; step operations: per step)")
        print(f"{'operation':<24}{header}{'10k/1k':>9}")
        for name, values in times.items():
            cells = "".join(f"{v:>10.3f}" for v in values)
            print(f"{name:<24}{cells}{values[-1] / values[0]:>9.1f}")
        print(f"\nMemory, tracemalloc peak in KiB (step operations: over {STEPS_PER_SAMPLE} steps)")
        print(f"{'operation':<24}{header}{'10k/1k':>9}")
        for name, values in peaks.items():
            cells = "".join(f"{v:>10.0f}" for v in values)
            print(f"{name:<24}{cells}{values[-1] / max(values[0], 1e-9):>9.1f}")
        print(
            "\nTarget: everything linear or better (10k/1k about 10 or less); "
            "'estimate step' and the estimate inside 'compose step' flat."
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (noisier figures)")
    options = parser.parse_args()
    asyncio.run(main_async(repeat=3 if options.quick else 9))


if __name__ == "__main__":
    main()
