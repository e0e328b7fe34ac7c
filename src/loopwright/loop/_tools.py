"""Tool calls of one step: look up, validate, guard against runaway repeats, run with a timeout,
format and cap the result, and record it at once. Nothing a tool does can crash the run."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from loopwright.events import ToolCallEnded, ToolCallStarted
from loopwright.hooks._bus import StopRun
from loopwright.hooks._events import ToolCallHook, ToolResultHook
from loopwright.loop._approval import IN_DOUBT, ask, journal_start
from loopwright.loop._eager import start_eagerly
from loopwright.loop._state import RunState
from loopwright.messages import ToolCall, ToolResultMessage, now_iso
from loopwright.report import StepReport, ToolCallReport, parse_arguments
from loopwright.tools._scope import ScopeError
from loopwright.tools.base import Tool, ToolArgumentError, ToolContext

__all__ = ["cap_result", "format_result", "mark_untrusted", "run_tool_calls"]

_dumps = json.JSONEncoder(ensure_ascii=False, default=str).encode


async def run_tool_calls(run: RunState, step: int, calls: Sequence[ToolCall], report: StepReport) -> None:
    """Run the step's calls (concurrently when allowed); every call gets exactly one result, and its
    report joins ``report.tool_calls`` as soon as it finishes."""
    done = report.tool_calls
    if len(calls) == 1:
        call = calls[0]
        run.open_calls = {call.id: call}
        done.append(await _run_one(run, step, call))
        return
    run.open_calls = {c.id: c for c in calls}
    if not run.setup.config.parallel_tool_calls:
        for c in calls:
            if run.steering:  # a new user message arrived: calls not yet started are skipped
                done.append(await _skip(run, c, "skipped: a new user message arrived"))
                continue
            done.append(await _run_one(run, step, c))
        return

    async def one(call: ToolCall) -> None:
        try:
            done.append(await _run_one(run, step, call))
        except StopRun as exc:  # re-raised once the other calls have their results
            run.stop_run = exc

    async with asyncio.TaskGroup() as tg:
        for call in calls:
            tg.create_task(one(call))
    order = {c.id: i for i, c in enumerate(calls)}
    done.sort(key=lambda r: order.get(r.call_id, 0))
    if run.stop_run is not None:
        raise run.stop_run


async def _skip(run: RunState, call: ToolCall, why: str) -> ToolCallReport:
    result = ToolResultMessage(
        tool_call_id=call.id,
        name=call.name,
        content=why,
        is_error=True,
        synthetic=True,
        run_id=run.run_id,
        timestamp=now_iso(),
    )
    await run.setup.store.append(run.session_id, [result])
    run.appended += 1
    run.messages.append(result)
    run.open_calls.pop(call.id, None)
    return ToolCallReport(
        call_id=call.id, tool_name=call.name, arguments_json=call.arguments, skipped=True, error=why
    )


async def _run_one(run: RunState, step: int, call: ToolCall) -> ToolCallReport:
    sink = run.sink
    if sink.active:
        await sink.emit(
            ToolCallStarted(
                run_id=run.run_id,
                step=step,
                call_id=call.id,
                tool_name=call.name,
                arguments=parse_arguments(call.arguments),
            )
        )
    started = time.perf_counter()
    content, error = await _invoke(run, step, call)
    latency_ms = (time.perf_counter() - started) * 1000.0
    setup = run.setup
    traits = setup.traits.get(call.name)
    if traits is not None and traits.untrusted and error is None:
        content = mark_untrusted(content, call.name)
    content = cap_result(content, setup.config.max_tool_result_chars)
    if setup.hooks.has("tool_result_persist"):
        persisted = setup.hooks.fire_sync(
            "tool_result_persist",
            ToolResultHook(
                run_id=run.run_id,
                session_id=run.session_id,
                call_id=call.id,
                tool=call.name,
                content=content,
                is_error=error is not None,
            ),
        )
        content = cap_result(str(persisted.content), setup.config.max_tool_result_chars)
    result = ToolResultMessage(
        tool_call_id=call.id,
        name=call.name,
        content=content,
        is_error=error is not None,
        run_id=run.run_id,
        timestamp=now_iso(),
    )
    await setup.store.append(run.session_id, [result])
    run.appended += 1
    run.messages.append(result)
    run.open_calls.pop(call.id, None)
    if sink.active:
        await sink.emit(
            ToolCallEnded(
                run_id=run.run_id,
                step=step,
                call_id=call.id,
                tool_name=call.name,
                result=content,
                is_error=error is not None,
                latency_ms=latency_ms,
            )
        )
    return ToolCallReport(
        call_id=call.id,
        tool_name=call.name,
        arguments_json=call.arguments,
        result_size_bytes=len(content) if content.isascii() else len(content.encode("utf-8")),
        latency_ms=latency_ms,
        error=error,
    )


async def _invoke(run: RunState, step: int, call: ToolCall) -> tuple[str, str | None]:
    """Return ``(content, error)``; ``error`` is None on success and equals ``content`` otherwise.

    The order is the contract: unknown tool, bad arguments, runaway repeat, ``before_tool_call``
    hooks (which may rewrite the arguments or skip), the permission policy and its approval gate
    (shown the final arguments), the journal, the tool, ``after_tool_call`` hooks."""
    setup = run.setup
    tool = run.tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(run.tools)) or "none"
        return _error(f"unknown tool {call.name!r}; available tools: {known}")
    if call.id in run.in_doubt and not getattr(setup.traits.get(call.name), "idempotent", False):
        return _error(IN_DOUBT)
    try:
        args = tool.validate(call.arguments)
    except ToolArgumentError as exc:
        return _error(str(exc))
    repeated = _check_repeat(run, call)
    if repeated is not None:
        return _error(repeated)
    arguments = call.arguments
    hooks = setup.hooks
    if hooks.has("before_tool_call"):
        event = await hooks.fire(
            "before_tool_call",
            ToolCallHook(
                run_id=run.run_id,
                session_id=run.session_id,
                step=step,
                call_id=call.id,
                tool=call.name,
                arguments=args if isinstance(args, dict) else parse_arguments(arguments),
                caller=run.request.caller,
            ),
        )
        if event.skip:
            return (event.result or f"skipped: a hook did not let {call.name!r} run"), None
        if event.arguments is not args and isinstance(event.arguments, dict):
            arguments = _dumps(event.arguments)
            try:
                args = tool.validate(arguments)
            except ToolArgumentError as exc:
                return _error(f"a hook rewrote the arguments into invalid ones: {exc}")
    decision = setup.decisions.get(call.name)
    if decision is not None and decision.permission != "allow":
        if decision.permission == "deny":
            return _error(f"denied: the permission policy does not allow {call.name!r} ({decision.rule})")
        verdict, by = await ask(run, step, call, arguments, f"{call.name!r} needs approval ({decision.rule})")
        note = f" ({verdict.note})" if verdict.note else ""
        if verdict.decision == "deny":
            who = "timed out waiting for approval" if by == "timeout" else "denied by the approver"
            return _error(f"not executed: {who}{note}")
        if verdict.decision == "skip" or verdict.result is not None:
            return (verdict.result if verdict.result is not None else f"skipped by the approver{note}"), None
    content, error = await _execute(run, step, call, tool, args)
    if hooks.has("after_tool_call"):
        done = await hooks.fire(
            "after_tool_call",
            ToolCallHook(
                run_id=run.run_id,
                session_id=run.session_id,
                step=step,
                call_id=call.id,
                tool=call.name,
                arguments=parse_arguments(arguments),
                caller=run.request.caller,
                result=content,
                is_error=error is not None,
            ),
        )
        if done.result is not None and done.result != content:
            content = str(done.result)
            error = content if done.is_error else None
    return content, error


async def _execute(run: RunState, step: int, call: ToolCall, tool: Tool, args: Any) -> tuple[str, str | None]:
    setup = run.setup
    if setup.journal:
        await journal_start(run, call)
    run.started_calls.add(call.id)
    ctx = ToolContext(
        run_id=run.run_id,
        session_id=run.session_id,
        call_id=call.id,
        tool_name=call.name,
        step=step,
        workspace=setup.workspace,
        deps=run.request.deps,
        caller=run.request.caller,
    )
    timeout = 0.0
    scope: asyncio.Timeout | None = None
    try:
        done, value, coro = start_eagerly(tool.call(args, ctx))
        if not done:
            # The tool is waiting on something: only now is a timer worth its cost.
            timeout = tool.timeout or setup.config.tool_timeout
            async with asyncio.timeout(timeout) as scope:
                value = await coro
    except TimeoutError:
        if scope is not None and scope.expired():
            return _error(f"tool {call.name!r} timed out after {timeout:g} s and was cancelled")
        return _error(f"tool {call.name!r} failed: TimeoutError")
    except ScopeError as exc:
        return _error(f"scope error: {exc}")
    except Exception as exc:
        return _error(f"tool {call.name!r} failed: {type(exc).__name__}: {exc}")
    try:
        return format_result(value), None
    except Exception as exc:  # a result that cannot be turned into text
        return _error(f"tool {call.name!r} returned a result that cannot be serialized: {exc}")


def mark_untrusted(content: str, tool: str) -> str:
    """Wrap outside content so the model reads it as data; a closing tag inside cannot break out."""
    body = content.replace("</untrusted", "<\\/untrusted")
    return f'<untrusted source="{tool}">\n{body}\n</untrusted>'


def _error(message: str) -> tuple[str, str]:
    return message, message


def _check_repeat(run: RunState, call: ToolCall) -> str | None:
    """Identical means the same tool and byte-identical arguments: what a model stuck in a loop sends."""
    key = (call.name, call.arguments.strip())
    if key == run.repeat_key:
        run.repeat_count += 1
    else:
        run.repeat_key, run.repeat_count = key, 1
    if run.repeat_count < run.setup.config.repeat_limit:
        return None
    run.repeat_offences += 1
    run.repeat_count = 0
    return (
        f"not executed: you called {call.name!r} with the same arguments "
        f"{run.setup.config.repeat_limit} times in a row; the result will not change. "
        "Use what you already have, try something different, or give your answer."
    )


def format_result(value: Any) -> str:
    """A tool's return value as the text the model sees."""
    kind = type(value)
    if kind is str:
        return value  # type: ignore[no-any-return]
    if kind is int or kind is float:
        return repr(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _dumps(dataclasses.asdict(value))
    return _dumps(value)


def cap_result(content: str, limit: int) -> str:
    """Cap a result at ``limit`` characters, saying how much was cut (before it is stored or sent)."""
    if len(content) <= limit:
        return content
    return content[:limit] + f"\n…[truncated: {len(content)} characters, showing the first {limit}]"
