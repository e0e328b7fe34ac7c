"""CONTEXT: load the transcript, record the user message, build the system prompt, estimate tokens."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from loopwright.context.pairing import repair_pairing
from loopwright.context.prompt import compose_system_prompt, dynamic_layers
from loopwright.context.tokens import estimate_tokens
from loopwright.loop._state import RunState
from loopwright.messages import UserMessage, now_iso

__all__ = ["build_context"]

log = logging.getLogger("loopwright")


async def build_context(run: RunState) -> int:
    """Prepare ``run.messages`` and ``run.system``; return the token estimate."""
    store = run.setup.store
    transcript = await store.load(run.session_id)
    for warning in transcript.warnings:
        log.warning("%s", warning)
        run.warnings.append(warning)
    messages, synthetic, dropped = repair_pairing(transcript.messages, why="the run was interrupted")
    if synthetic:
        await store.append(run.session_id, synthetic)
        run.warnings.append(f"wrote {len(synthetic)} missing tool result(s) left by an interrupted run")
    if dropped:
        run.warnings.append(f"ignored {dropped} tool result(s) without a matching call")

    user = UserMessage(
        content=run.request.message, run_id=run.run_id, timestamp=now_iso(), meta=run.request.meta
    )
    await store.append(run.session_id, [user])
    await store.sync(run.session_id)  # the message is acknowledged: it must survive a crash
    run.appended += 1
    messages.append(user)
    run.messages = messages

    dynamic = compose_system_prompt(dynamic_layers(memory=_read_memory(run), now=datetime.now(UTC)))
    run.system = f"{run.setup.stable_prompt}\n\n{dynamic}"
    return estimate_tokens(run.system, messages)


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
