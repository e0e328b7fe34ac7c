"""Moving sessions: export a snapshot, import it (into any store), fork a copy.

A snapshot is plain JSON-ready data (``format: "loopwright-session/v1"``): the session's metadata, every
transcript entry exactly as the transcript line holds it, and the run reports. Export → import →
export gives the same snapshot (the session id aside, when a new one is given).
"""

from __future__ import annotations

from typing import Any

from loopwright.errors import InputError, NotFoundError
from loopwright.messages import now_iso
from loopwright.report import RunReport
from loopwright.sessions._codec import decode_dict, entry_to_dict
from loopwright.sessions.base import SessionInfo, SessionStore, new_session_id, validate_session_id

__all__ = ["SNAPSHOT_FORMAT", "export_session", "fork_session", "import_session"]

SNAPSHOT_FORMAT = "loopwright-session/v1"


async def export_session(store: SessionStore, session_id: str) -> dict[str, Any]:
    info = await store.get(session_id)
    if info is None:
        raise NotFoundError("session", session_id)
    transcript = await store.load(session_id)
    return {
        "format": SNAPSHOT_FORMAT,
        "info": info.to_dict(),
        "entries": [entry_to_dict(e) for e in transcript.entries],
        "reports": [r.to_dict() for r in await store.list_reports(session_id)],
    }


async def import_session(
    store: SessionStore, snapshot: dict[str, Any], *, session_id: str | None = None
) -> str:
    """Create a session from ``snapshot`` (under its own id, or ``session_id``); returns the id.
    Refuses to overwrite an existing session and names every line that is not a valid entry."""
    if not isinstance(snapshot, dict) or snapshot.get("format") != SNAPSHOT_FORMAT:
        raise InputError(f"not a session snapshot: expected format {SNAPSHOT_FORMAT!r}")
    try:
        info = SessionInfo.from_dict(snapshot["info"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"session snapshot has invalid metadata: {exc}") from None
    entries = []
    problems = []
    for i, data in enumerate(snapshot.get("entries") or []):
        try:
            entries.append(decode_dict(dict(data)))
        except (ValueError, TypeError, KeyError) as exc:
            problems.append(f"entry {i}: {exc}")
    if problems:
        raise InputError("session snapshot has invalid entries: " + "; ".join(problems[:5]))
    reports = [RunReport.from_dict(r) for r in snapshot.get("reports") or []]
    target = validate_session_id(session_id or info.id)
    if await store.get(target) is not None:
        raise InputError(f"session {target!r} already exists; import it under another id")
    info.id = target
    for report in reports:
        report.session_id = target
    await store.create(info)
    if entries:
        await store.append(target, entries)
    for report in reports:
        await store.save_report(target, report)
    await store.sync(target)
    await store.close(target)
    return target


async def fork_session(store: SessionStore, session_id: str, *, new_id: str | None = None) -> str:
    """An independent copy of a session (its transcript, compactions and reports) under a new id."""
    snapshot = await export_session(store, session_id)
    snapshot["info"]["createdAt"] = snapshot["info"]["updatedAt"] = now_iso()
    snapshot["info"]["title"] = snapshot["info"].get("title", "")
    return await import_session(store, snapshot, session_id=new_id or new_session_id())
