"""What a chat platform sends and gets back.

:class:`IncomingMessage` is the trust boundary (pydantic, unknown fields refused): a bot adapter, or
the gateway's ``agent`` method, builds one per message. Field names are snake_case as in the
specification; the camelCase spelling (``platformUserId``) is accepted too, for JSON-RPC clients.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from loopwright.errors import InputError
from loopwright.messages import Usage

__all__ = ["Attachment", "FileOut", "IncomingMessage", "PlatformResponse", "ResponseReason", "parse_incoming"]

MAX_INLINE_BYTES = 10 * 1024 * 1024
"""Largest attachment sent inline (``data``, base64); larger files must come by ``url``."""

_ID = Field(min_length=1, max_length=200)


class _Wire(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True, loc_by_alias=False
    )


class Attachment(_Wire):
    """A file sent with a message: by ``url`` (http or https) or inline as base64 ``data``."""

    filename: str = Field(default="file", min_length=1, max_length=255)
    url: str | None = Field(default=None, max_length=4096)
    data: str | None = None
    mime_type: str | None = Field(default=None, max_length=200)
    size_bytes: int | None = Field(default=None, ge=0)

    @field_validator("filename")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        name = value.replace("\\", "/").rsplit("/", 1)[-1].strip()
        if not name or name in (".", ".."):
            raise ValueError(f"not a usable file name: {value!r}")
        return name

    @field_validator("url")
    @classmethod
    def _web_url(cls, value: str | None) -> str | None:
        if value is not None and not value.lower().startswith(("http://", "https://")):
            raise ValueError("attachment url must start with http:// or https://")
        return value

    @model_validator(mode="after")
    def _has_content(self) -> Attachment:
        if (self.url is None) == (self.data is None):
            raise ValueError("an attachment needs exactly one of 'url' or 'data' (base64)")
        if self.data is not None:
            if len(self.data) > MAX_INLINE_BYTES * 4 // 3 + 4:
                raise ValueError(f"inline data is over {MAX_INLINE_BYTES} bytes; send the file by url")
            try:
                base64.b64decode(self.data, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ValueError(f"'data' is not valid base64 ({exc})") from None
        return self

    def decoded(self) -> bytes:
        """The inline bytes (``data``), checked against :data:`MAX_INLINE_BYTES`."""
        if self.data is None:
            raise InputError(f"attachment {self.filename!r} has no inline data")
        return base64.b64decode(self.data, validate=True)  # checked when the message was validated


class IncomingMessage(_Wire):
    """One message from a chat platform (Discord, Slack, Telegram, ...)."""

    platform: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    platform_user_id: str = _ID
    platform_username: str | None = Field(default=None, max_length=200)
    platform_server_id: str | None = Field(default=None, min_length=1, max_length=200)
    """A Discord guild, a Slack workspace: selects a server-specific persona."""
    platform_channel_id: str = _ID
    platform_thread_id: str | None = Field(default=None, min_length=1, max_length=200)
    """A thread is a conversation of its own, apart from its channel."""
    content: str
    attachments: tuple[Attachment, ...] = ()


def parse_incoming(data: IncomingMessage | dict[str, Any]) -> IncomingMessage:
    """Validate a message; every problem is named in one :class:`~loopwright.errors.InputError`."""
    if isinstance(data, IncomingMessage):
        return data
    try:
        return IncomingMessage.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'message'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise InputError(f"invalid platform message: {problems}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class FileOut:
    """A file to send back with the reply (produced by a tool)."""

    file_id: str
    filename: str
    url: str
    mime_type: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "fileId": self.file_id,
            "filename": self.filename,
            "url": self.url,
            "mimeType": self.mime_type,
        }


ResponseReason = Literal[
    "done", "stopped", "error", "guardrail", "max_steps", "timeout", "limit", "loop_detected", "budget"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlatformResponse:
    """The reply to post back, and what the run cost."""

    content: str
    files: tuple[FileOut, ...] = ()
    reason: ResponseReason = "done"
    """The run's stop reason, or ``budget`` when the user's monthly budget refused it."""
    user_id: str
    conversation_id: str | None = None
    """Also the session id of the conversation's transcript."""
    run_id: str | None = None
    persona: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    error: str | None = None

    @property
    def budget_exceeded(self) -> bool:
        return self.reason == "budget"

    def to_dict(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "files": [f.to_dict() for f in self.files],
            "reason": self.reason,
            "budgetExceeded": self.budget_exceeded,
            "userId": self.user_id,
            "conversationId": self.conversation_id,
            "sessionId": self.conversation_id,
            "runId": self.run_id,
            "persona": self.persona,
            "usage": self.usage.to_dict(),
            "costUsd": self.cost_usd,
            "error": self.error,
        }
