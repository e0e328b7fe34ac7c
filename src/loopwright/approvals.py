"""Approval gates: a tool call the policy marks ``ask`` waits for a person's decision.

The run records the request in its transcript (a checkpoint, synced), emits
:class:`~loopwright.events.ApprovalRequested`, and waits: for the agent's ``approver`` when it has
one (the CLI prompts inline), else for :meth:`Agent.resolve_approval` (the gateway's
``approvals.resolve``). After ``approval_timeout`` seconds without an answer the call is denied.

A decision is bound to the exact tool and arguments that were shown: ``digest`` is a hash of both,
and a resumed run refuses a decision whose call does not match it.

If the process dies while a call waits, the checkpoint survives: ``Agent.restore(snapshot)`` in a
new process and ``resume_with_approval(call_id, decision)`` continue the same run from that call,
without running earlier calls again.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from loopwright.errors import InputError, NotFoundError

__all__ = [
    "ApprovalBoard",
    "ApprovalDecision",
    "ApprovalMismatchError",
    "ApprovalRequest",
    "Approver",
    "approval_id_for",
    "call_digest",
]

DecisionKind = Literal["approve", "deny", "skip"]
_KINDS: tuple[DecisionKind, ...] = ("approve", "deny", "skip")


def approval_id_for(run_id: str, call_id: str) -> str:
    """An approval's id: the call's id within its run (call ids alone repeat across runs with some
    models and servers)."""
    return f"{run_id}:{call_id}"


def pick(items: Mapping[str, Any], key: str, call_id_of: Callable[[Any], str]) -> str | None:
    """The approval id ``key`` names: an approval id, or a call id that only one approval has.
    Raises :class:`~loopwright.errors.InputError` when a call id is ambiguous."""
    if key in items:
        return key
    matches = [approval_id for approval_id, item in items.items() if call_id_of(item) == key]
    if len(matches) > 1:
        raise InputError(
            f"several runs wait for a call {key!r}; name it by its approval id: {sorted(matches)}"
        )
    return matches[0] if matches else None


def call_digest(tool: str, arguments: str) -> str:
    """What an approval is bound to: the tool's name and the exact argument text."""
    return hashlib.sha256(f"{tool}\0{arguments}".encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """A tool call waiting for a decision: what tool, which arguments, and why it needs one."""

    approval_id: str
    run_id: str
    session_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any] | str
    arguments_json: str
    reason: str
    requested_at: str
    expires_at: str
    digest: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "approvalId": self.approval_id,
            "runId": self.run_id,
            "sessionId": self.session_id,
            "callId": self.call_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "argumentsJson": self.arguments_json,
            "reason": self.reason,
            "requestedAt": self.requested_at,
            "expiresAt": self.expires_at,
            "digest": self.digest,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ApprovalRequest:
        return cls(
            approval_id=d["approvalId"],
            run_id=d["runId"],
            session_id=d["sessionId"],
            call_id=d["callId"],
            tool=d["tool"],
            arguments=d.get("arguments", {}),
            arguments_json=d.get("argumentsJson", ""),
            reason=d.get("reason", ""),
            requested_at=d.get("requestedAt", ""),
            expires_at=d.get("expiresAt", ""),
            digest=d.get("digest", ""),
        )


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """``approve`` runs the tool (or, with ``result``, returns that result instead); ``deny`` refuses
    it (an error result the model sees); ``skip`` does not run it and returns ``result`` (or a note)
    as a normal result."""

    decision: DecisionKind
    result: str | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        if self.decision not in _KINDS:
            raise InputError(f"unknown approval decision {self.decision!r}; use approve, deny or skip")
        for name in ("result", "note"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InputError(f"an approval decision's {name} must be text, not {type(value).__name__}")

    @classmethod
    def of(cls, value: ApprovalDecision | str | Mapping[str, Any]) -> ApprovalDecision:
        if isinstance(value, ApprovalDecision):
            return value
        if isinstance(value, str):
            return cls(value.strip().lower())  # type: ignore[arg-type]
        if isinstance(value, Mapping):
            return cls(value.get("decision", ""), value.get("result"), value.get("note"))
        raise InputError(f"an approval decision must be approve, deny or skip, not {value!r}")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"decision": self.decision}
        if self.result is not None:
            d["result"] = self.result
        if self.note is not None:
            d["note"] = self.note
        return d


Approver = Callable[[ApprovalRequest], "Awaitable[ApprovalDecision | str] | ApprovalDecision | str"]


class ApprovalMismatchError(InputError):
    """A decision was given for a call whose tool or arguments differ from what was approved."""


@dataclass(slots=True)
class _Waiting:
    request: ApprovalRequest
    snapshot: dict[str, Any]
    future: asyncio.Future[tuple[ApprovalDecision, str]]


@dataclass(slots=True)
class ApprovalBoard:
    """The approvals an agent's runs are waiting for in this process."""

    _waiting: dict[str, _Waiting] = field(default_factory=dict)

    def open(
        self, request: ApprovalRequest, snapshot: dict[str, Any]
    ) -> asyncio.Future[tuple[ApprovalDecision, str]]:
        future: asyncio.Future[tuple[ApprovalDecision, str]] = asyncio.get_running_loop().create_future()
        self._waiting[request.approval_id] = _Waiting(request, snapshot, future)
        return future

    def snapshots(self) -> list[dict[str, Any]]:
        """The run snapshots of every waiting call (what :meth:`Agent.dump` writes)."""
        return [w.snapshot for w in self._waiting.values() if not w.future.done()]

    def close(self, approval_id: str) -> None:
        self._waiting.pop(approval_id, None)

    def get(self, key: str) -> ApprovalRequest | None:
        """The waiting request named by its approval id, or by a call id only one run waits on."""
        found = pick(self._waiting, key, lambda w: w.request.call_id)
        return None if found is None else self._waiting[found].request

    def resolve(self, key: str, decision: ApprovalDecision, *, by: str = "api") -> ApprovalRequest:
        found = pick(self._waiting, key, lambda w: w.request.call_id)
        waiting = None if found is None else self._waiting[found]
        if waiting is None or waiting.future.done():
            raise NotFoundError("pending approval", key)
        waiting.future.set_result((decision, by))
        return waiting.request

    def pending(self, session_id: str | None = None) -> list[ApprovalRequest]:
        return [
            w.request
            for w in self._waiting.values()
            if not w.future.done() and (session_id is None or w.request.session_id == session_id)
        ]
