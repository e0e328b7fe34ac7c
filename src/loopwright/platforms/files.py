"""Files: attachments in, files out.

**In.** Before the run, each attachment becomes a ``file_records`` row (committed, so a tool running
in another process can see it); inline ones (base64 ``data``) are stored under the service's files
folder. The message the model gets ends with a list of the files (name, id, size, type) and says how
to read them: the ``read_file`` tool (group ``files``, level ``guest``) returns a file's text, for
files of the calling user (or of the conversation) only — it knows who calls through the run's
:class:`~loopwright.Caller`.

**Out.** A tool result that is a JSON object with a ``url`` (and maybe ``filename``), or with a
``files`` list of such objects, names files the tool produced: they are recorded and sent back with
the reply (:attr:`~loopwright.platforms.PlatformResponse.files`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import httpx
from pydantic import Field
from sqlalchemy import select

from loopwright.caller import Caller
from loopwright.errors import InputError, NotFoundError
from loopwright.messages import ToolResultMessage
from loopwright.platforms.incoming import Attachment, FileOut
from loopwright.sql._database import Database
from loopwright.sql.models import FileRecord
from loopwright.tools._function import FunctionTool

__all__ = ["FileAccess", "FileInfo", "describe_files", "produced_files", "read_file_tool"]

MAX_READ_BYTES = 1024 * 1024
"""The most ``read_file`` fetches or reads of one file."""
MAX_READ_CHARS = 20_000
"""The most text ``read_file`` returns (the rest is announced, not sent)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileInfo:
    id: str
    filename: str
    mime_type: str | None
    size_bytes: int | None
    url: str | None
    storage_key: str | None
    origin: str
    user_id: str
    conversation_id: str | None


def _info(r: FileRecord) -> FileInfo:
    return FileInfo(
        id=r.id,
        filename=r.filename,
        mime_type=r.mime_type,
        size_bytes=r.size_bytes,
        url=r.url,
        storage_key=r.storage_key,
        origin=r.origin,
        user_id=r.user_id,
        conversation_id=r.conversation_id,
    )


class FileAccess:
    """The files of one database (and the folder holding inline ones)."""

    def __init__(
        self, database: Database, files_dir: Path | None, *, http: httpx.AsyncClient | None = None
    ) -> None:
        self.database = database
        self.files_dir = files_dir
        self._http = http

    async def register_attachments(
        self, attachments: Sequence[Attachment], *, user_id: str, conversation_id: str
    ) -> list[FileInfo]:
        """Record every attachment (storing inline bytes); all or nothing."""
        records: list[FileRecord] = []
        blobs: list[tuple[FileRecord, bytes]] = []
        for att in attachments:
            record = FileRecord(
                user_id=user_id,
                conversation_id=conversation_id,
                origin="attachment",
                filename=att.filename,
                mime_type=att.mime_type,
                size_bytes=att.size_bytes,
                url=att.url,
            )
            if att.data is not None:
                if self.files_dir is None:
                    raise InputError("this service keeps no files folder: send attachments by url")
                data = att.decoded()
                record.size_bytes = len(data)
                blobs.append((record, data))
            records.append(record)
        async with self.database.transaction() as s:
            s.add_all(records)
            await s.flush()  # ids assigned
            for record, data in blobs:
                assert self.files_dir is not None
                key = f"{record.id}/{record.filename}"
                path = self.files_dir / key
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                record.storage_key = key
        return [_info(r) for r in records]

    async def record_produced(
        self, files: Sequence[dict[str, Any]], *, user_id: str, conversation_id: str
    ) -> list[FileOut]:
        """Record files tools produced; returns them as they go back with the reply."""
        records = [
            FileRecord(
                user_id=user_id,
                conversation_id=conversation_id,
                origin="tool",
                filename=str(f.get("filename") or f["url"].rstrip("/").rsplit("/", 1)[-1] or "file")[:255],
                mime_type=f.get("mime_type") if isinstance(f.get("mime_type"), str) else None,
                size_bytes=f.get("size_bytes") if isinstance(f.get("size_bytes"), int) else None,
                url=f["url"],
            )
            for f in files
        ]
        if records:
            async with self.database.transaction() as s:
                s.add_all(records)
        return [
            FileOut(file_id=r.id, filename=r.filename, url=r.url or "", mime_type=r.mime_type)
            for r in records
        ]

    async def get(self, file_id: str) -> FileInfo:
        async with self.database.transaction() as s:
            record = await s.get(FileRecord, file_id)
            if record is None:
                raise NotFoundError("file", file_id)
            return _info(record)

    async def list_for(
        self, *, user_id: str | None = None, conversation_id: str | None = None
    ) -> list[FileInfo]:
        query = select(FileRecord).order_by(FileRecord.created_at)
        if user_id is not None:
            query = query.where(FileRecord.user_id == user_id)
        if conversation_id is not None:
            query = query.where(FileRecord.conversation_id == conversation_id)
        async with self.database.transaction() as s:
            return [_info(r) for r in (await s.scalars(query)).all()]

    async def read_bytes(self, info: FileInfo) -> bytes:
        """A file's bytes (at most :data:`MAX_READ_BYTES`): from the files folder, or fetched."""
        if info.storage_key is not None and self.files_dir is not None:
            path = (self.files_dir / info.storage_key).resolve()
            if not path.is_relative_to(self.files_dir.resolve()):
                raise InputError(f"file {info.id!r} points outside the files folder")
            with path.open("rb") as f:
                return f.read(MAX_READ_BYTES)
        if info.url is None:
            raise NotFoundError("file content", info.id)
        client = self._http or httpx.AsyncClient(timeout=30.0, follow_redirects=True)
        try:
            async with client.stream("GET", info.url) as response:
                response.raise_for_status()
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data.extend(chunk)
                    if len(data) >= MAX_READ_BYTES:
                        break
                return bytes(data[:MAX_READ_BYTES])
        finally:
            if self._http is None:
                await client.aclose()


def describe_files(files: Sequence[FileInfo]) -> str:
    """What the model is told about a message's attachments (appended to the message)."""
    if not files:
        return ""
    lines = ["", "", "[Attached files:]"]
    for f in files:
        size = f"{f.size_bytes} bytes" if f.size_bytes is not None else "size unknown"
        lines.append(f"- {f.filename} (file_id: {f.id}, {size}, {f.mime_type or 'type unknown'})")
    lines.append("Use read_file(file_id) to read a file's text.")
    return "\n".join(lines)


def read_file_tool(files: FileAccess) -> FunctionTool[..., Any]:
    """The ``read_file`` tool over ``files`` (group ``files``, level ``guest``): it reads files of
    the calling user, or of the conversation it runs in, and nobody else's."""

    async def read_file(
        file_id: Annotated[str, Field(description="The file_id given in the list of attached files.")],
        caller: Caller | None = None,
    ) -> str:
        """Read the text of a file attached to the conversation (or produced earlier) by its file_id."""
        try:
            info = await files.get(file_id)
        except NotFoundError:
            return f"no file with id {file_id!r}"
        mine = caller is not None and (
            (caller.user_id is not None and info.user_id == caller.user_id)
            or (caller.conversation_id is not None and info.conversation_id == caller.conversation_id)
        )
        if not mine:
            return f"no file with id {file_id!r}"  # someone else's: as if it did not exist
        data = await files.read_bytes(info)
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            size = info.size_bytes or len(data)
            kind = info.mime_type or "type unknown"
            return f"{info.filename} is a binary file ({size} bytes, {kind}); it cannot be shown as text."
        if len(content) > MAX_READ_CHARS:
            rest = len(content) - MAX_READ_CHARS
            content = content[:MAX_READ_CHARS] + f"\n…[{rest} more characters not shown]"
        return content

    return FunctionTool(read_file, name="read_file", level="guest", groups=("files",), idempotent=True)


def produced_files(results: Sequence[ToolResultMessage]) -> list[dict[str, Any]]:
    """Files named by tool results: an object with a ``url``, or with a ``files`` list of them."""
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    for result in results:
        if result.is_error:
            continue
        try:
            value = json.loads(result.content)
        except ValueError:
            continue
        if not isinstance(value, dict):
            continue
        candidates = [value] if isinstance(value.get("url"), str) else []
        if isinstance(value.get("files"), list):
            candidates.extend(
                f for f in value["files"] if isinstance(f, dict) and isinstance(f.get("url"), str)
            )
        for f in candidates:
            if f["url"] not in seen and f["url"].lower().startswith(("http://", "https://")):
                seen.add(f["url"])
                found.append(f)
    return found
