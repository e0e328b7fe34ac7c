"""PERSIST: close every open tool call, update session metadata, save the report, sync."""

from __future__ import annotations

import logging
import time

from loopwright.context.pairing import IN_DOUBT_RESULT
from loopwright.loop._state import RunState
from loopwright.messages import ToolResultMessage, Usage, now_iso
from loopwright.report import ToolCallReport

__all__ = ["persist"]

log = logging.getLogger("loopwright")


async def persist(run: RunState) -> None:
    """Write what the run leaves behind. Failures are recorded in the report, never raised:
    the caller releases the lock right after, whatever happens here."""
    store = run.setup.store
    sid = run.session_id
    report = run.report
    try:
        if run.open_calls:
            why = {"stopped": "run stopped", "timeout": "run timed out"}.get(report.reason, "run failed")
            texts = {
                c.id: IN_DOUBT_RESULT.format(why=why) if c.id in run.started_calls else f"not executed: {why}"
                for c in run.open_calls.values()
            }
            synthetic = [
                ToolResultMessage(
                    tool_call_id=c.id,
                    name=c.name,
                    content=texts[c.id],
                    is_error=True,
                    synthetic=True,
                    run_id=run.run_id,
                    timestamp=now_iso(),
                )
                for c in run.open_calls.values()
            ]
            if report.steps:
                report.steps[-1].tool_calls.extend(
                    ToolCallReport(
                        call_id=c.id,
                        tool_name=c.name,
                        arguments_json=c.arguments,
                        skipped=c.id not in run.started_calls,
                        error=texts[c.id],
                    )
                    for c in run.open_calls.values()
                )
            run.open_calls.clear()
            await store.append(sid, synthetic)
            run.appended += len(synthetic)
            run.messages.extend(synthetic)
        report.completed_at = time.time()
        info = run.session
        if info is not None:
            info.updated_at = now_iso()
            info.awaiting_approval = False  # the run ended: nothing of it waits any more
            info.message_count += run.appended
            info.run_count += 1
            info.usage = Usage.total((info.usage, *(s.usage for s in report.steps)))
            run_cost = report.total_cost_usd
            info.cost_usd = None if info.cost_usd is None or run_cost is None else info.cost_usd + run_cost
            await store.save_info(info)
        await store.save_report(sid, report)
        await store.sync(sid)
    except Exception as exc:
        log.error("persisting run %s of session %s failed: %s", run.run_id, sid, exc)
        if report.error is None:
            report.reason = "error"
            report.error = f"could not persist the run: {exc}"
            report.error_type = type(exc).__name__
    finally:
        try:
            await store.close(sid)
        except Exception as exc:  # pragma: no cover - closing a file handle
            log.warning("closing session %s failed: %s", sid, exc)
