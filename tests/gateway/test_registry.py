"""The run registry's promises, checked on generated histories: resuming from any seq, at any moment,
gives every later event exactly once."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from loopwright.gateway._runs import RunRecord, RunRegistry


def _drain(queue: asyncio.Queue[dict[str, object] | None]) -> list[dict[str, object] | None]:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


@given(
    before=st.integers(min_value=0, max_value=30),
    after=st.integers(min_value=0, max_value=30),
    cut=st.integers(min_value=0, max_value=40),
)
def test_resuming_from_any_seq_gives_each_later_event_once(before: int, after: int, cut: int) -> None:
    async def scenario() -> None:
        registry = RunRegistry()
        record = RunRecord(run_id="r", agent="a", session_id="s", accepted_at="t")
        registry.add(record)
        registry.start(record)
        for i in range(before):
            registry.publish(record, "assistant", {"kind": "text", "delta": str(i)})
        seen_seq = min(cut, len(record.events))
        sub = registry.subscribe_run("r", after_seq=seen_seq)
        for i in range(after):
            registry.publish(record, "assistant", {"kind": "text", "delta": str(before + i)})
        registry.finish(record, status="ok", reason="done", text="")
        got = _drain(sub.queue)
        assert got[-1] is None
        seqs = [e["seq"] for e in got[:-1] if e is not None]
        assert seqs == list(range(seen_seq + 1, len(record.events) + 1))
        assert record.events[-1]["data"]["phase"] == "end"

    asyncio.run(scenario())


def test_retention_and_idempotency_keys_expire() -> None:
    async def scenario() -> None:
        now = [0.0]
        registry = RunRegistry(retention=10, idempotency_ttl=5, clock=lambda: now[0])
        first = RunRecord(run_id="r1", agent="a", session_id="s", accepted_at="t")
        registry.add(first, idempotency_key="k")
        assert registry.by_key("a", "k") is first
        assert registry.by_key("b", "k") is None  # keys are per agent
        registry.finish(first, status="ok", reason="done")
        now[0] = 6
        assert registry.by_key("a", "k") is None
        now[0] = 9
        registry.add(RunRecord(run_id="r2", agent="a", session_id="s", accepted_at="t"))
        assert registry.get("r1") is first
        now[0] = 11
        registry.prune()
        assert registry.get("r1") is None
        assert registry.get("r2") is not None  # not finished: never dropped

    asyncio.run(scenario())


def test_a_slow_subscriber_is_cut_off_not_the_run() -> None:
    async def scenario() -> None:
        registry = RunRegistry(max_backlog=3)
        record = RunRecord(run_id="r", agent="a", session_id="s", accepted_at="t")
        registry.add(record)
        sub = registry.subscribe_run("r")
        for i in range(10):
            registry.publish(record, "assistant", {"kind": "text", "delta": str(i)})
        assert sub.closed_reason is not None and "too slow" in sub.closed_reason
        assert len(record.events) == 10
        assert registry.subscribers() == 0

    asyncio.run(scenario())
