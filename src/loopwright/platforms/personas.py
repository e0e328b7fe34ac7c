"""Personas: who the agent is on a given server or platform.

A persona carries the system prompt, the tool modules on offer (tool ``groups``; ``None`` = every
tool the caller's level allows), the default model and the maximum output tokens per model call.
For a message, the most specific one wins: the persona of its server (a Discord guild, a Slack
workspace), else the persona of its platform, else the default persona, else none (the service's
own settings apply). The database allows at most one of each kind per place.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from loopwright.errors import InputError, NotFoundError
from loopwright.sql._database import Database
from loopwright.sql.models import Persona

__all__ = [
    "UNSET",
    "PersonaInfo",
    "create_persona",
    "edit_persona",
    "get_persona",
    "list_personas",
    "resolve_persona",
]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_MODULE = re.compile(r"[A-Za-z0-9_.:-]{1,100}")


class _Unset(enum.Enum):
    UNSET = "UNSET"


UNSET = _Unset.UNSET
"""For :func:`edit_persona`: leave the field as it is (``None`` clears it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PersonaInfo:
    id: str
    name: str
    platform: str | None
    platform_server_id: str | None
    is_default: bool
    system_prompt: str
    allowed_modules: tuple[str, ...] | None
    default_model: str | None
    max_tokens_per_request: int | None
    updated_at: datetime

    @property
    def scope(self) -> str:
        if self.platform_server_id is not None:
            return f"server {self.platform}:{self.platform_server_id}"
        if self.platform is not None:
            return f"platform {self.platform}"
        return "default" if self.is_default else "unused"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "platform": self.platform,
            "platformServerId": self.platform_server_id,
            "isDefault": self.is_default,
            "systemPrompt": self.system_prompt,
            "allowedModules": None if self.allowed_modules is None else list(self.allowed_modules),
            "defaultModel": self.default_model,
            "maxTokensPerRequest": self.max_tokens_per_request,
            "updatedAt": self.updated_at.isoformat(),
        }


def _info(p: Persona) -> PersonaInfo:
    return PersonaInfo(
        id=p.id,
        name=p.name,
        platform=p.platform,
        platform_server_id=p.platform_server_id,
        is_default=p.is_default,
        system_prompt=p.system_prompt,
        allowed_modules=None if p.allowed_modules is None else tuple(p.allowed_modules),
        default_model=p.default_model,
        max_tokens_per_request=p.max_tokens_per_request,
        updated_at=p.updated_at,
    )


async def resolve_persona(database: Database, platform: str, server_id: str | None) -> PersonaInfo | None:
    """The persona for a message: server-specific, then platform-specific, then the default."""
    async with database.transaction() as s:
        if server_id is not None:
            found = (
                await s.scalars(
                    select(Persona).where(
                        Persona.platform == platform, Persona.platform_server_id == server_id
                    )
                )
            ).one_or_none()
            if found is not None:
                return _info(found)
        found = (
            await s.scalars(
                select(Persona).where(Persona.platform == platform, Persona.platform_server_id.is_(None))
            )
        ).one_or_none()
        if found is None:
            found = (await s.scalars(select(Persona).where(Persona.is_default.is_(True)))).one_or_none()
        return None if found is None else _info(found)


async def list_personas(database: Database) -> list[PersonaInfo]:
    async with database.transaction() as s:
        return [_info(p) for p in (await s.scalars(select(Persona).order_by(Persona.name))).all()]


async def get_persona(database: Database, name: str) -> PersonaInfo:
    async with database.transaction() as s:
        found = (await s.scalars(select(Persona).where(Persona.name == name))).one_or_none()
        if found is None:
            raise NotFoundError("persona", name)
        return _info(found)


async def create_persona(
    database: Database,
    name: str,
    *,
    system_prompt: str = "",
    platform: str | None = None,
    platform_server_id: str | None = None,
    is_default: bool = False,
    allowed_modules: list[str] | tuple[str, ...] | None = None,
    default_model: str | None = None,
    max_tokens_per_request: int | None = None,
) -> PersonaInfo:
    if not _NAME.fullmatch(name):
        raise InputError(f"invalid persona name {name!r}: use letters, digits, '.', '_' or '-' (at most 100)")
    persona = Persona(name=name, system_prompt="", is_default=False)
    _apply(
        persona,
        system_prompt=system_prompt,
        platform=platform,
        platform_server_id=platform_server_id,
        is_default=is_default,
        allowed_modules=allowed_modules,
        default_model=default_model,
        max_tokens_per_request=max_tokens_per_request,
    )
    try:
        async with database.transaction() as s:
            s.add(persona)
    except IntegrityError:
        raise InputError(_conflict(name, persona, await _name_taken(database, name, None))) from None
    return await get_persona(database, name)


async def edit_persona(
    database: Database,
    name: str,
    *,
    system_prompt: str | _Unset = UNSET,
    platform: str | _Unset | None = UNSET,
    platform_server_id: str | _Unset | None = UNSET,
    is_default: bool | _Unset = UNSET,
    allowed_modules: list[str] | tuple[str, ...] | _Unset | None = UNSET,
    default_model: str | _Unset | None = UNSET,
    max_tokens_per_request: int | _Unset | None = UNSET,
) -> PersonaInfo:
    """Change the given fields (``UNSET`` ones stay; ``None`` clears an optional one)."""
    persona: Persona | None = None
    try:
        async with database.transaction() as s:
            persona = (await s.scalars(select(Persona).where(Persona.name == name))).one_or_none()
            if persona is None:
                raise NotFoundError("persona", name)
            _apply(
                persona,
                system_prompt=system_prompt,
                platform=platform,
                platform_server_id=platform_server_id,
                is_default=is_default,
                allowed_modules=allowed_modules,
                default_model=default_model,
                max_tokens_per_request=max_tokens_per_request,
            )
            persona.updated_at = datetime.now(UTC)
    except IntegrityError:
        assert persona is not None
        raise InputError(_conflict(name, persona, False)) from None
    return await get_persona(database, name)


def _apply(persona: Persona, **fields: Any) -> None:
    for key, value in fields.items():
        if value is UNSET:
            continue
        if key == "allowed_modules" and value is not None:
            modules = [str(m).strip() for m in value if str(m).strip()]
            bad = [m for m in modules if not _MODULE.fullmatch(m)]
            if bad:
                raise InputError(f"invalid tool module names: {', '.join(repr(b) for b in bad)}")
            value = sorted(set(modules))
        if (
            key == "max_tokens_per_request"
            and value is not None
            and (not isinstance(value, int) or value < 1)
        ):
            raise InputError(f"max tokens per request must be a positive integer, not {value!r}")
        if (
            key in ("platform", "platform_server_id", "default_model")
            and value is not None
            and not str(value).strip()
        ):
            value = None
        setattr(persona, key, value)
    if persona.platform_server_id is not None and persona.platform is None:
        raise InputError("a server-specific persona needs its platform too (--platform)")
    if persona.is_default and persona.platform is not None:
        raise InputError("the default persona applies everywhere: give it no platform or server")


def _conflict(name: str, persona: Persona, name_taken: bool) -> str:
    if name_taken:
        where = f"the name {name!r} is taken"
    elif persona.platform_server_id is not None:
        where = f"server {persona.platform}:{persona.platform_server_id} already has a persona"
    elif persona.platform is not None:
        where = f"platform {persona.platform} already has a persona"
    else:
        where = "there is already a default persona"
    return f"cannot save persona {name!r}: {where}"


async def _name_taken(database: Database, name: str, own_id: str | None) -> bool:
    async with database.transaction() as s:
        found = await s.scalar(select(Persona.id).where(Persona.name == name))
    return found is not None and found != own_id
