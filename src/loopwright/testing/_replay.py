"""Record and replay: pin a real run as a regression test.

Run an agent once against a real model; its session's ``transcript.jsonl`` is the recording.
:class:`ReplayModel` then plays back, in order, every answer the model gave (text, thinking, tool
calls with their original ids and arguments, usage, finish reason), so the same agent can run again
offline, instantly and deterministically::

    model = ReplayModel.from_transcript("tests/recordings/refund")   # a session folder
    report = await Agent(model, tools=[lookup_order, refund]).run("Refund order 42")
    model.assert_complete()

Assistant messages cut short (``finish_reason`` ``error``, ``stopped`` or ``timeout``) are not answers
and are skipped. In strict mode (the default) every request is checked against the recording: the
conversation the loop sends must equal the recorded one up to that answer (roles, user texts, the
assistant's text and tool calls, and each tool result's name, error flag and content, exactly), so a
tool whose behaviour changed is caught. Results of one step are matched by call id, in any order
(parallel tools finish in any order). A difference raises :class:`ReplayMismatch`. The loop turns an
exception from its model into a failed run (``report.reason == "error"``), so every mismatch is also
kept, and :meth:`ReplayModel.assert_complete` raises the first one.

Replay a session's runs in order, in one session (a fresh one for the first run): each later run's
request then holds the earlier runs' messages, as the recording does.

The model is named ``"replay:<recorded model>"`` (the model of the first recorded answer), so reports
say it was a replay; each streamed answer names the recorded model, so the replay's transcript records
the same ``model`` on every assistant line as the original.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from loopwright.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, Usage, UserMessage
from loopwright.models._accumulate import complete_from_stream
from loopwright.models.base import (
    FinishReason,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    StreamFinish,
    ThinkingDelta,
)
from loopwright.sessions._codec import Entry, TranscriptRecord, decode_line
from loopwright.sessions.base import LoadedTranscript, SessionStore
from loopwright.sessions.file import TRANSCRIPT
from loopwright.testing._models import response_events

__all__ = ["ReplayMismatch", "ReplayModel"]

_CUT_SHORT = frozenset({"error", "stopped", "timeout"})
"""Finish reasons of assistant messages the loop wrote itself when a step was cut short."""
_FINISH_REASONS: dict[str, FinishReason] = {reason: reason for reason in get_args(FinishReason)}
_SHOWN = 200
"""Characters of a differing value quoted in a mismatch message."""


class ReplayMismatch(AssertionError):
    """A replayed run diverged from its recording.

    ``call`` is the model call (1-based) whose request differed; ``index`` the position of the
    differing message in that request (``None`` when the run made more calls than recorded, or fewer);
    ``expected`` and ``got`` the recorded and actual values, in full."""

    def __init__(
        self,
        message: str,
        *,
        call: int,
        index: int | None = None,
        expected: str | None = None,
        got: str | None = None,
    ) -> None:
        self.call = call
        self.index = index
        self.expected = expected
        self.got = got
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class _Turn:
    answer: AssistantMessage
    position: int
    """Where the answer is in the recorded conversation (answers cut short left out)."""


class ReplayModel:
    """Plays back the answers of a recorded session, one per model call (see the module docstring).

    ``requests`` logs every request received; ``failures`` every mismatch raised."""

    def __init__(
        self,
        entries: Iterable[Entry],
        *,
        strict: bool = True,
        name: str | None = None,
        chunks: int = 3,
    ) -> None:
        self._messages = [e for e in entries if not isinstance(e, TranscriptRecord) and not _cut_short(e)]
        self._turns = [
            _Turn(answer=m, position=i) for i, m in enumerate(self._messages) if type(m) is AssistantMessage
        ]
        self.recorded_model: str | None = next((t.answer.model for t in self._turns if t.answer.model), None)
        """The model that gave the first recorded answer."""
        self._name = name or (f"replay:{self.recorded_model}" if self.recorded_model else "replay")
        self.strict = strict
        self.chunks = chunks
        self._next = 0
        self.requests: list[ModelRequest] = []
        self.failures: list[ReplayMismatch] = []

    @classmethod
    def from_transcript(
        cls,
        source: str | os.PathLike[str] | LoadedTranscript | Iterable[Entry],
        *,
        strict: bool = True,
        name: str | None = None,
    ) -> ReplayModel:
        """Replay a transcript: a ``transcript.jsonl`` path, a session folder, a loaded transcript or
        a list of entries (messages). Raises ``ValueError`` for a line that is not a transcript entry."""
        if isinstance(source, str | os.PathLike):
            entries: Iterable[Entry] = _read(Path(source))
        elif isinstance(source, LoadedTranscript):
            entries = source.entries
        else:
            entries = source
        return cls(entries, strict=strict, name=name)

    @classmethod
    async def from_session(
        cls, store: SessionStore, session_id: str, *, strict: bool = True, name: str | None = None
    ) -> ReplayModel:
        """Replay a session of any :class:`~loopwright.sessions.SessionStore`."""
        return cls((await store.load(session_id)).entries, strict=strict, name=name)

    @property
    def name(self) -> str:
        return self._name

    @property
    def remaining(self) -> int:
        """Recorded answers not yet played."""
        return len(self._turns) - self._next

    def assert_complete(self) -> None:
        """Fail with the first mismatch seen, or if some recorded answers were never requested."""
        if self.failures:
            raise self.failures[0]
        if self.remaining:
            raise ReplayMismatch(
                f"ReplayModel: {self.remaining} of {len(self._turns)} recorded answers were not used "
                f"(after {self._next} model call(s))",
                call=self._next,
            )

    # --- the Model protocol ----------------------------------------------------------------------

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for event in self._events(self._take(request)):
            yield event

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await complete_from_stream(self.stream(request))

    def _take(self, request: ModelRequest) -> AssistantMessage:
        messages = tuple(request.messages)
        self.requests.append(
            ModelRequest(
                system=request.system,
                messages=messages,
                stable_system=request.stable_system,
                tools=tuple(request.tools),
                settings=request.settings,
                run_id=request.run_id,
                session_id=request.session_id,
            )
        )
        call = self._next + 1
        try:
            if self._next >= len(self._turns):
                raise ReplayMismatch(
                    f"ReplayModel: the run made model call {call}, but the recording has only "
                    f"{len(self._turns)} answer(s)",
                    call=call,
                )
            turn = self._turns[self._next]
            if self.strict:
                recorded = self._messages[: turn.position]
                _check(recorded, [m for m in messages if not _cut_short(m)], call)
        except ReplayMismatch as exc:
            self.failures.append(exc)
            raise
        self._next += 1
        return turn.answer

    def _events(self, answer: AssistantMessage) -> list[ModelEvent]:
        reason = _FINISH_REASONS.get(answer.finish_reason or "")
        response = ModelResponse(
            content=answer.content,
            tool_calls=answer.tool_calls,
            usage=answer.usage or Usage(),
            finish_reason=reason or ("tool_calls" if answer.tool_calls else "stop"),
        )
        events: list[ModelEvent] = [
            ThinkingDelta(text=t.text, signature=t.signature, redacted=t.redacted, block=i)
            for i, t in enumerate(answer.thinking)
        ]
        events.extend(response_events(response, chunks=self.chunks)[:-1])  # all but the finish
        events.append(StreamFinish(response.finish_reason, model=answer.model))
        return events

    def __repr__(self) -> str:
        return f"ReplayModel({self._name!r}, answers={len(self._turns)}, played={self._next})"


def _read(path: Path) -> list[Entry]:
    file = path / TRANSCRIPT if path.is_dir() else path
    entries: list[Entry] = []
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entries.append(decode_line(line))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{str(file)!r} line {number} is not a transcript entry: {exc}") from exc
    return entries


def _cut_short(message: Message) -> bool:
    return type(message) is AssistantMessage and message.finish_reason in _CUT_SHORT


# --- comparing a request with the recording ------------------------------------------------------


def _check(expected: Sequence[Message], got: Sequence[Message], call: int) -> None:
    """Raise :class:`ReplayMismatch` at the first message of ``got`` that differs from ``expected``."""
    i = j = 0
    while i < len(expected) and j < len(got):
        if type(expected[i]) is ToolResultMessage and type(got[j]) is ToolResultMessage:
            want, have = _results(expected, i), _results(got, j)
            _check_results(want, have, j, call)
            i, j = i + len(want), j + len(have)
            continue
        _check_one(expected[i], got[j], j, call)
        i += 1
        j += 1
    if j < len(got):
        raise ReplayMismatch(
            f"ReplayModel: model call {call} sends message {j} ({_describe(got[j])}), "
            f"which the recording does not have at this point: {_short(got[j].content)}",
            call=call,
            index=j,
            got=got[j].content,
        )
    if i < len(expected):
        raise ReplayMismatch(
            f"ReplayModel: model call {call} lacks message {j}: the recording has "
            f"{_describe(expected[i])} {_short(expected[i].content)}",
            call=call,
            index=j,
            expected=expected[i].content,
        )


def _results(messages: Sequence[Message], start: int) -> list[ToolResultMessage]:
    """The run of tool results that starts at ``start``: one step's results."""
    out = []
    for m in messages[start:]:
        if not isinstance(m, ToolResultMessage):
            break
        out.append(m)
    return out


def _check_results(
    expected: Sequence[ToolResultMessage], got: Sequence[ToolResultMessage], first: int, call: int
) -> None:
    """One step's results, matched by call id (parallel tools finish in any order)."""
    by_id = {r.tool_call_id: (first + k, r) for k, r in enumerate(got)}
    for e in expected:
        found = by_id.pop(e.tool_call_id, None)
        if found is None:
            raise ReplayMismatch(
                f"ReplayModel: model call {call} lacks the {_describe(e)} at message {first}: "
                f"the recording has {_short(e.content)}",
                call=call,
                index=first,
                expected=e.content,
            )
        index, g = found
        for field, want, have in (
            ("tool name", e.name, g.name),
            ("error flag", str(e.is_error), str(g.is_error)),
            ("content", e.content, g.content),
        ):
            if want != have:
                raise _differs(call, index, g, field, want, have)
    if by_id:
        index, extra = min(by_id.values(), key=lambda item: item[0])
        raise ReplayMismatch(
            f"ReplayModel: model call {call} sends message {index} ({_describe(extra)}), "
            f"which the recording does not have: {_short(extra.content)}",
            call=call,
            index=index,
            got=extra.content,
        )


def _check_one(e: Message, g: Message, index: int, call: int) -> None:
    if e.role != g.role:
        raise _differs(call, index, g, "role", _describe(e), _describe(g))
    if e.content != g.content:
        raise _differs(call, index, g, "text", e.content, g.content)
    if type(e) is AssistantMessage and type(g) is AssistantMessage:
        want, have = _calls_text(e.tool_calls), _calls_text(g.tool_calls)
        if want != have:
            raise _differs(call, index, g, "tool calls", want, have)


def _calls_text(calls: Sequence[ToolCall]) -> str:
    return ", ".join(f"{c.name}#{c.id}({c.arguments})" for c in calls) or "none"


def _differs(call: int, index: int, got: Message, field: str, expected: str, value: str) -> ReplayMismatch:
    return ReplayMismatch(
        f"ReplayModel: model call {call} differs from the recording at message {index} "
        f"({_describe(got)}): {field} expected {_short(expected)}, got {_short(value)}",
        call=call,
        index=index,
        expected=expected,
        got=value,
    )


def _describe(message: Message) -> str:
    if type(message) is ToolResultMessage:
        return f"result of tool {message.name!r}, call {message.tool_call_id!r}"
    if type(message) is UserMessage:
        return "user message"
    return "assistant message"


def _short(text: str) -> str:
    if len(text) <= _SHOWN:
        return repr(text)
    return f"{text[:_SHOWN]!r}… ({len(text)} characters)"
