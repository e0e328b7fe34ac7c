"""The RPC methods, shared by ``POST /api/<method>`` and the WebSocket.

Each method validates its params with a pydantic model (camelCase names; unknown fields refused),
so every bad field comes back in a 400 with its name. Results are plain JSON objects.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from loopwright.approvals import ApprovalDecision
from loopwright.errors import InputError, LoopwrightError, NotFoundError
from loopwright.gateway._errors import ApiError, FieldError
from loopwright.gateway._gateway import Gateway
from loopwright.sessions._codec import entry_to_dict
from loopwright.sessions.base import new_session_id, validate_session_id

__all__ = ["METHODS", "call", "parse"]


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=False, frozen=True)


class AgentParams(Params):
    message: str
    session_id: str | None = None
    agent: str | None = None
    queue_mode: str | None = None
    idempotency_key: str | None = Field(None, min_length=1, max_length=256)
    # A message from a chat platform (see docs/platforms.md): answered through the agent's
    # PlatformService (users, budgets, personas, conversations), synchronously, with its reply.
    platform: str | None = None
    platform_user_id: str | None = None
    platform_username: str | None = None
    platform_server_id: str | None = None
    platform_channel_id: str | None = None
    platform_thread_id: str | None = None
    attachments: list[dict[str, Any]] | None = None

    def platform_message(self) -> dict[str, Any] | None:
        """The platform message these params carry (None without ``platform``)."""
        fields = {
            "platform": self.platform,
            "platform_user_id": self.platform_user_id,
            "platform_username": self.platform_username,
            "platform_server_id": self.platform_server_id,
            "platform_channel_id": self.platform_channel_id,
            "platform_thread_id": self.platform_thread_id,
        }
        if self.platform is None:
            given = [to_camel(k) for k, v in fields.items() if v is not None]
            if self.attachments is not None:
                given.append("attachments")
            if given:
                message = f"{', '.join(given)} need 'platform'"
                raise ApiError(400, message, fields=[FieldError(given[0], message)])
            return None
        for name in ("session_id", "queue_mode", "idempotency_key"):
            if getattr(self, name) is not None:
                message = (
                    f"{to_camel(name)} cannot be used with 'platform': the conversation decides the session"
                )
                raise ApiError(400, message, fields=[FieldError(to_camel(name), message)])
        out: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
        out["content"] = self.message
        out["attachments"] = self.attachments or []
        return out


class WaitParams(Params):
    run_id: str
    timeout_ms: int = Field(30_000, ge=0, le=600_000)


class StopParams(Params):
    run_id: str | None = None
    session_id: str | None = None
    agent: str | None = None


class ListParams(Params):
    agent: str | None = None
    limit: int = Field(50, ge=1, le=1000)
    offset: int = Field(0, ge=0)


class SessionParams(Params):
    session_id: str
    agent: str | None = None


class GetParams(SessionParams):
    offset: int = Field(0, ge=0)
    limit: int = Field(200, ge=1, le=1000)
    reports: bool = True


class ApprovalsParams(Params):
    agent: str | None = None
    session_id: str | None = None


class ResolveParams(Params):
    approval_id: str
    decision: Literal["approve", "deny", "skip"]
    agent: str | None = None
    note: str | None = None
    result: str | None = None


class EmptyParams(Params):
    pass


Handler = Callable[[Gateway, Any], Awaitable[dict[str, Any]]]


def parse(model: type[Params], raw: Any) -> Any:
    """``raw`` as ``model``, or a 400 naming every bad field."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ApiError(
            400, "params must be a JSON object", fields=[FieldError("params", "expected an object")]
        )
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        fields = [
            FieldError(".".join(str(p) for p in err["loc"]) or "params", err["msg"]) for err in exc.errors()
        ]
        summary = "; ".join(f"{f.field}: {f.message}" for f in fields)
        raise ApiError(400, f"invalid params: {summary}", fields=fields) from None


async def _agent(gw: Gateway, p: AgentParams) -> dict[str, Any]:
    incoming = p.platform_message()
    if incoming is not None:
        return await gw.platform_reply(p.agent, incoming)
    record, repeated = await gw.submit(
        p.message,
        agent=p.agent,
        session_id=p.session_id,
        queue_mode=p.queue_mode,
        idempotency_key=p.idempotency_key,
    )
    return {
        "runId": record.run_id,
        "sessionId": record.session_id,
        "agent": record.agent,
        "acceptedAt": record.accepted_at,
        "deduplicated": repeated,
    }


async def _wait(gw: Gateway, p: WaitParams) -> dict[str, Any]:
    return await gw.wait(p.run_id, p.timeout_ms / 1000)


async def _stop(gw: Gateway, p: StopParams) -> dict[str, Any]:
    if p.run_id is None and p.session_id is None:
        message = "give runId or sessionId"
        raise ApiError(400, message, fields=[FieldError("runId", message)])
    if gw.scaleout is not None:  # the run may be on another gateway: ask through the database
        if p.run_id is not None:
            await gw.known(p.run_id)  # 404 for an unknown run
        name = gw.agent(p.agent)[0] if p.agent is not None or p.run_id is None else None
        stopped = await gw.scaleout.stop(run_id=p.run_id, agent=name, session_id=p.session_id)
        return {"stopped": stopped}
    return {"stopped": gw.stop(run_id=p.run_id, session_id=p.session_id, agent=p.agent)}


async def _sessions_list(gw: Gateway, p: ListParams) -> dict[str, Any]:
    names = [gw.agent(p.agent)[0]] if p.agent is not None else list(gw.agents)
    found: list[dict[str, Any]] = []
    for name in names:
        for info in await gw.agents[name].sessions():
            found.append({**info.to_dict(), "agent": name, "running": gw.registry.busy(name, info.id)})
    found.sort(key=lambda d: d["updatedAt"], reverse=True)
    page = found[p.offset : p.offset + p.limit]
    more = p.offset + p.limit < len(found)
    return {"sessions": page, "total": len(found), "nextOffset": p.offset + p.limit if more else None}


async def _session(gw: Gateway, p: SessionParams) -> tuple[str, Any]:
    name, agent = gw.agent(p.agent)
    try:
        validate_session_id(p.session_id)
    except InputError as exc:
        raise ApiError(400, str(exc), fields=[FieldError("sessionId", str(exc))]) from None
    info = await agent.store.get(p.session_id)
    if info is None:
        raise ApiError(404, f"session {p.session_id!r} not found for agent {name!r}")
    return name, info


async def _sessions_get(gw: Gateway, p: GetParams) -> dict[str, Any]:
    name, agent = gw.agent(p.agent)
    if await agent.store.get(p.session_id) is None and gw.registry.busy(name, p.session_id):
        # accepted here, not started yet (waiting for a slot): the session exists for its client
        session = {"id": p.session_id, "agent": name, "running": True, "queued": True}
        out: dict[str, Any] = {"session": session, "entries": [], "total": 0, "offset": p.offset}
        out["nextOffset"] = None
        if p.reports:
            out["reports"] = []
        return out
    name, info = await _session(gw, p)
    entries = await agent.transcript(p.session_id)
    page = [entry_to_dict(e) for e in entries[p.offset : p.offset + p.limit]]
    more = p.offset + p.limit < len(entries)
    out = {
        "session": {**info.to_dict(), "agent": name, "running": gw.registry.busy(name, p.session_id)},
        "entries": page,
        "total": len(entries),
        "offset": p.offset,
        "nextOffset": p.offset + p.limit if more else None,
    }
    if p.reports:
        out["reports"] = [r.to_dict() for r in await agent.reports(p.session_id)]
    return out


async def _sessions_reset(gw: Gateway, p: SessionParams) -> dict[str, Any]:
    name, info = await _session(gw, p)
    if gw.registry.busy(name, p.session_id):
        raise ApiError(409, f"session {p.session_id!r} is running; stop it or wait before resetting it")
    agent = gw.agents[name]
    info.terminated = True
    await agent.store.save_info(info)
    new_id = new_session_id()
    gw.keys[name].reset(p.session_id, new_id)
    await agent.end_session(p.session_id, reason="reset")
    return {"sessionId": new_id, "previousSessionId": p.session_id, "agent": name}


async def _approvals_list(gw: Gateway, p: ApprovalsParams) -> dict[str, Any]:
    names = [gw.agent(p.agent)[0]] if p.agent is not None else list(gw.agents)
    found: list[dict[str, Any]] = []
    if gw.scaleout is not None:  # every gateway's waiting calls, from the shared table
        found = await gw.scaleout.approvals.pending(names, p.session_id)
    shared = {a["approvalId"] for a in found}
    for name in names:  # and what waits only here (a sub-run's call, a restored checkpoint)
        pending = getattr(gw.agents[name], "pending_approvals", None)
        if pending is None:
            continue
        for request in pending(p.session_id):
            if request.approval_id in shared:
                continue
            found.append({**request.to_dict(), "agent": name, "runId": _gateway_run(gw, request.run_id)})
    return {"approvals": found}


def _gateway_run(gw: Gateway, loop_run_id: str) -> str:
    """The gateway's runId of a loop run (approvals name the loop's)."""
    for record in gw.registry.active():
        if record.loop_run_id == loop_run_id:
            return record.run_id
    return loop_run_id


async def _approvals_resolve(gw: Gateway, p: ResolveParams) -> dict[str, Any]:
    names = [gw.agent(p.agent)[0]] if p.agent is not None else list(gw.agents)
    decision = ApprovalDecision(p.decision, p.result, p.note)
    if gw.scaleout is not None:  # the call may wait on another gateway: decided through the table
        try:
            agent_name = await gw.scaleout.resolve_approval(p.approval_id, decision, agent=p.agent)
        except NotFoundError:
            pass  # not in the table: maybe a call waiting only here (below)
        else:
            return {"approvalId": p.approval_id, "decision": p.decision, "agent": agent_name}
    for name in names:
        agent = gw.agents[name]
        resolve = getattr(agent, "resolve_approval", None)
        pending = getattr(agent, "pending_approvals", None)
        if resolve is None or pending is None:
            continue
        if not any(r.approval_id == p.approval_id or r.call_id == p.approval_id for r in pending(None)):
            continue
        try:
            resolve(p.approval_id, decision)
        except NotFoundError:
            break
        except InputError as exc:
            raise ApiError(400, str(exc), fields=[FieldError("decision", str(exc))]) from None
        return {"approvalId": p.approval_id, "decision": p.decision, "agent": name}
    raise ApiError(404, f"no pending approval {p.approval_id!r} (unknown, decided or expired)")


async def _health(gw: Gateway, p: EmptyParams) -> dict[str, Any]:
    return gw.health()


METHODS: dict[str, tuple[type[Params], Handler]] = {
    "agent": (AgentParams, _agent),
    "agent.wait": (WaitParams, _wait),
    "agent.stop": (StopParams, _stop),
    "sessions.list": (ListParams, _sessions_list),
    "sessions.get": (GetParams, _sessions_get),
    "sessions.reset": (SessionParams, _sessions_reset),
    "approvals.list": (ApprovalsParams, _approvals_list),
    "approvals.resolve": (ResolveParams, _approvals_resolve),
    "health": (EmptyParams, _health),
}


async def call(gw: Gateway, method: str, raw: Any) -> dict[str, Any]:
    """Run ``method`` with ``raw`` params; raises :class:`ApiError` for every refusal."""
    entry = METHODS.get(method)
    if entry is None:
        known = ", ".join(METHODS)
        raise ApiError(404, f"unknown method {method!r}; methods are: {known}")
    model, handler = entry
    params = parse(model, raw)
    try:
        return await handler(gw, params)
    except ApiError:
        raise
    except NotFoundError as exc:
        raise ApiError(404, str(exc)) from None
    except InputError as exc:
        raise ApiError(400, str(exc)) from None
    except LoopwrightError as exc:
        raise ApiError(500, str(exc), code="internal") from None
