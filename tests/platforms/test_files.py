"""Attachments become file records before the run, are described to the model and readable by the
read_file tool (their owner's only); files tools produce come back with the reply."""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from loopwright import tool
from loopwright.errors import InputError
from loopwright.messages import ToolCall, ToolResultMessage
from loopwright.platforms import Attachment, PlatformService
from loopwright.sql import Database
from loopwright.sql.models import FileRecord, User
from loopwright.testing import FunctionModel, ScriptedModel
from tests.platforms.helpers import message

PAGE = "Quarterly numbers: 42 kites sold.\n"


class _Handler(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        body = PAGE.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def file_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def reader(database: Database, checked: list[FileRecord | None]) -> FunctionModel:
    """A model that reads the first attached file, then repeats what the tool returned."""

    async def respond(messages: list[Any], info: Any) -> str | list[ToolCall]:
        last = messages[-1]
        if isinstance(last, ToolResultMessage):
            return f"The file says: {last.content}"
        found = re.search(r"file_id: ([0-9a-f-]{36})", last.content)
        if found is None:
            return "no file"
        async with database.transaction() as s:  # registered before the run: the record is there
            checked.append(await s.get(FileRecord, found.group(1)))
        return [ScriptedModel.call("read_file", file_id=found.group(1))]

    return FunctionModel(respond, name="reader")


async def test_an_inline_attachment_is_recorded_described_and_readable(
    database: Database, tmp_path: Path
) -> None:
    checked: list[FileRecord | None] = []
    service = PlatformService(database, model=reader(database, checked), files_dir=tmp_path / "files")
    data = base64.b64encode(b"line one\nline two\n").decode()
    reply = await service.handle(
        message(
            "what is in it?", attachments=[{"filename": "notes.txt", "data": data, "mime_type": "text/plain"}]
        )
    )
    assert reply.content == "The file says: line one\nline two\n"
    record = checked[0]
    assert record is not None and (record.filename, record.size_bytes, record.origin) == (
        "notes.txt",
        18,
        "attachment",
    )
    assert (tmp_path / "files" / str(record.storage_key)).read_text() == "line one\nline two\n"
    transcript = await service.store.load(reply.conversation_id or "")
    described = transcript.messages[0].content
    assert described.startswith("what is in it?\n\n[Attached files:]\n")
    assert f"- notes.txt (file_id: {record.id}, 18 bytes, text/plain)" in described
    assert "read_file(file_id)" in described


async def test_a_linked_attachment_is_fetched_when_read(database: Database, file_server: str) -> None:
    checked: list[FileRecord | None] = []
    service = PlatformService(database, model=reader(database, checked))
    reply = await service.handle(
        message("summarise", attachments=[Attachment(filename="q3.txt", url=f"{file_server}/q3.txt")])
    )
    assert reply.content == f"The file says: {PAGE}"
    assert checked[0] is not None and checked[0].url == f"{file_server}/q3.txt"


async def test_nobody_reads_another_users_file(database: Database, tmp_path: Path) -> None:
    service = PlatformService(database, model=ScriptedModel(["stored"]), files_dir=tmp_path)
    data = base64.b64encode(b"secret plans").decode()
    await service.handle(message("keep this", attachments=[{"filename": "plans.txt", "data": data}]))
    async with database.transaction() as s:
        file_id = await s.scalar(select(FileRecord.id))
    thief = ScriptedModel([[ScriptedModel.call("read_file", file_id=file_id)], "nothing"])
    other = PlatformService(database, model=thief, files_dir=tmp_path)
    await other.handle(message("read it", platform_user_id="mallory", platform_channel_id="c2"))
    result = thief.requests[1].messages[-1]
    assert result.content == f"no file with id {file_id!r}" and "secret" not in result.content


@tool(level="guest")
def make_chart(title: str) -> dict[str, Any]:
    """Draw a chart."""
    return {"url": f"https://files.example/{title}.png", "filename": f"{title}.png"}


@tool(level="guest")
def make_report() -> dict[str, Any]:
    """Write a report in two formats."""
    return {
        "files": [
            {"url": "https://files.example/r.pdf", "filename": "r.pdf", "mime_type": "application/pdf"},
            {"url": "https://files.example/r.csv", "filename": "r.csv"},
            {"name": "no url: ignored"},
        ]
    }


async def test_files_that_tools_produce_come_back_with_the_reply(database: Database) -> None:
    model = ScriptedModel(
        [
            [ScriptedModel.call("make_chart", title="sales"), ScriptedModel.call("make_report")],
            "Here you are.",
        ]
    )
    service = PlatformService(database, model=model, tools=[make_chart, make_report])
    reply = await service.handle(message("chart and report please"))
    assert reply.content == "Here you are."
    assert [(f.filename, f.url, f.mime_type) for f in reply.files] == [
        ("sales.png", "https://files.example/sales.png", None),
        ("r.pdf", "https://files.example/r.pdf", "application/pdf"),
        ("r.csv", "https://files.example/r.csv", None),
    ]
    async with database.transaction() as s:
        rows = (await s.scalars(select(FileRecord).order_by(FileRecord.filename))).all()
    assert [(r.filename, r.origin, r.user_id, r.conversation_id) for r in rows] == [
        (name, "tool", reply.user_id, reply.conversation_id) for name in ("r.csv", "r.pdf", "sales.png")
    ]
    assert reply.to_dict()["files"][0] == {
        "fileId": reply.files[0].file_id,
        "filename": "sales.png",
        "url": "https://files.example/sales.png",
        "mimeType": None,
    }


@pytest.mark.parametrize(
    ("attachment", "problem"),
    [
        ({"filename": "a.txt"}, "exactly one of 'url' or 'data'"),
        ({"filename": "a.txt", "url": "file:///etc/passwd"}, "must start with http:// or https://"),
        ({"filename": "a.txt", "url": "https://x/a", "data": "aGk="}, "exactly one of 'url' or 'data'"),
        ({"filename": "a.txt", "data": "not base64!"}, "'data' is not valid base64"),
    ],
)
async def test_bad_attachments_are_refused_before_anything_is_written(
    database: Database, tmp_path: Path, attachment: dict[str, Any], problem: str
) -> None:
    model = ScriptedModel([])
    service = PlatformService(database, model=model, files_dir=tmp_path)
    with pytest.raises(InputError, match=re.escape(problem)):
        await service.handle({**message().model_dump(), "attachments": [attachment]})
    assert model.requests == []
    async with database.transaction() as s:
        assert await s.scalar(select(func.count()).select_from(User)) == 0


def test_attachment_names_lose_their_folders() -> None:
    assert Attachment(filename="../../etc/passwd", url="https://x/y").filename == "passwd"
    assert Attachment(filename="C:\\Users\\a\\doc.txt", url="https://x/y").filename == "doc.txt"
