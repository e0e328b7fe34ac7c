"""CONTEXT: load the transcript, record the user message, build the system prompt, estimate tokens."""

from __future__ import annotations

import logging

from loopwright.context.compaction import active_compaction, context_after
from loopwright.context.pairing import repair_pairing
from loopwright.errors import InputError
from loopwright.loop._compact import compact, compose_system, flush_memory
from loopwright.loop._state import RunState
from loopwright.messages import AssistantMessage, Message, ToolResultMessage, UserMessage, now_iso
from loopwright.sessions._codec import Entry, TranscriptRecord

__all__ = ["build_context", "load_context"]

log = logging.getLogger("loopwright")


async def build_context(run: RunState) -> None:
    """Prepare ``run.messages`` (the context the model sees) and ``run.system``; record the user
    message; flush memory or compact when the context nears the window."""
    await load_context(run)
    if run.request.resume is not None:
        return  # a checkpointed run continues: its message is in the transcript already
    if run.setup.workspace is not None and run.setup.config.memory_results:
        from loopwright.memory import memory_context  # SQLite only for workspaces that have notes

        run.recalled = await memory_context(
            run.setup.workspace, run.request.message, run.setup.config.memory_results, source="daily"
        )
        if run.recalled:
            compose_system(run, run.memory_text)
    await flush_memory(run)
    store = run.setup.store
    user = UserMessage(
        content=run.request.message, run_id=run.run_id, timestamp=now_iso(), meta=run.request.meta
    )
    await store.append(run.session_id, [user])
    await store.sync(run.session_id)  # the message is acknowledged: it must survive a crash
    run.appended += 1
    run.messages.append(user)
    await compact(run, reason="threshold")


async def load_context(run: RunState) -> None:
    """The session's context as a model would see it: transcript loaded and repaired, the active
    compaction applied, the system prompt composed."""
    store = run.setup.store
    transcript = await store.load(run.session_id)
    for warning in transcript.warnings:
        log.warning("%s", warning)
        run.warnings.append(warning)
    why = "the run was interrupted"
    leave_open: set[str] = set()
    if run.request.resume is not None:
        leave_open = _open_calls_of(transcript.messages, run.run_id)
        decided = set(run.request.resume.decisions) - leave_open
        if decided:  # answered meanwhile (another resume, a new message): nothing to continue
            raise InputError(f"tool call {sorted(decided)[0]!r} already has a result; nothing to resume")
        run.in_doubt = {c for r, c in _started_calls(transcript.entries) if r == run.run_id} & leave_open
    messages, synthetic, dropped = repair_pairing(transcript.messages, why=why, leave_open=leave_open)
    if synthetic:  # rare: say which of them had started (the journal), then write them
        started = _started_calls(transcript.entries)
        if started:
            messages, synthetic, dropped = repair_pairing(
                transcript.messages, why=why, started=started, leave_open=leave_open
            )
        await store.append(run.session_id, synthetic)
        run.warnings.append(f"wrote {len(synthetic)} missing tool result(s) left by an interrupted run")
    if dropped:
        run.warnings.append(f"ignored {dropped} tool result(s) without a matching call")
    active, run.flushed = active_compaction(transcript.entries)
    if active is not None:
        messages, covered = context_after(messages, active)
        if covered:
            run.summary = active.summary
        else:
            run.warnings.append(f"compaction {active.id!r} names a message that is not there; ignoring it")
    run.messages = messages
    compose_system(run, _read_memory(run))


def _started_calls(entries: list[Entry]) -> set[tuple[str | None, str]]:
    """Calls the journal saw start, as (run id, call id): call ids repeat across runs with some models."""
    return {
        (e.run_id, str(e.data.get("call_id")))
        for e in entries
        if type(e) is TranscriptRecord and e.type == "tool_start"
    }


def _open_calls_of(messages: list[Message], run_id: str) -> set[str]:
    """The unanswered calls of the run's last assistant message (where its checkpoint stopped)."""
    answered = {m.tool_call_id for m in messages if type(m) is ToolResultMessage and m.run_id == run_id}
    for m in reversed(messages):
        if type(m) is AssistantMessage and m.tool_calls and m.run_id == run_id:
            return {c.id for c in m.tool_calls if c.id not in answered}
    return set()


def _read_memory(run: RunState) -> str:
    path = run.setup.memory_path
    if path is None:
        return ""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("cannot read %s, continuing with empty memory: %s", path, exc)
        run.warnings.append(f"MEMORY.md unreadable: {exc}")
        return ""
