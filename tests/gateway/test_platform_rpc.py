"""The ``agent`` RPC with platform fields: answered through the agent's PlatformService (users,
conversations per channel and thread), through real HTTP; bad combinations refused with 400."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from loopwright import Agent
from loopwright.gateway import Gateway, GatewayConfig, ServerThread
from loopwright.messages import UserMessage
from loopwright.sessions.sql import SQLSessionStore
from loopwright.sql import Database


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    db = Database(tmp_path / "platform.db")
    await db.migrate()
    await db.engine.dispose()  # the server's own event loop opens its connections
    yield db
    await db.aclose()


@pytest.fixture
def server(database: Database) -> Iterator[ServerThread]:
    gateway = Gateway(Agent("test", name="helper"), config=GatewayConfig(grace=5), database=database)
    with ServerThread(gateway) as running:
        yield running


def _message(text: str, **fields: Any) -> dict[str, Any]:
    return {
        "message": text,
        "platform": "discord",
        "platformUserId": "u-1",
        "platformUsername": "ada",
        "platformChannelId": "c-1",
        **fields,
    }


async def test_a_platform_message_is_answered_with_the_services_reply(
    server: ServerThread, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        first = await http.post("/api/agent", json=_message("hello from discord"))
        assert first.status_code == 200, first.text
        reply = first.json()
        assert reply["reason"] == "done" and reply["content"] and not reply["budgetExceeded"]
        assert reply["userId"] and reply["conversationId"] == reply["sessionId"]
        again = (await http.post("/api/agent", json=_message("and again"))).json()
        assert again["conversationId"] == reply["conversationId"] and again["userId"] == reply["userId"]
        thread = (await http.post("/api/agent", json=_message("in a thread", platformThreadId="t-9"))).json()
        assert thread["conversationId"] != reply["conversationId"]
        other = (await http.post("/api/agent", json=_message("hi", platformUserId="u-2"))).json()
        assert other["userId"] != reply["userId"]  # another person in the same channel:
        assert other["conversationId"] == reply["conversationId"]  # the channel's conversation
    # the conversation is a session in the database, with the channel's messages
    db = Database(tmp_path / "platform.db")
    try:
        entries = (await SQLSessionStore(db).load(reply["sessionId"])).entries
    finally:
        await db.aclose()
    users = [e for e in entries if type(e) is UserMessage]
    assert [u.content for u in users] == ["hello from discord", "and again", "hi"]


async def test_attachments_pass_through_to_the_service(server: ServerThread) -> None:
    by_url = {"filename": "notes.txt", "url": "https://files.example/notes.txt", "mimeType": "text/plain"}
    inline = {"filename": "notes.txt", "data": base64.b64encode(b"remember the milk").decode()}
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        ok = await http.post("/api/agent", json=_message("see the file", attachments=[by_url]))
        assert ok.status_code == 200, ok.text
        assert ok.json()["reason"] == "done"
        # an agent without a workspace keeps no files folder: inline data is refused, clearly
        refused = await http.post("/api/agent", json=_message("see the file", attachments=[inline]))
        assert refused.status_code == 400
        assert "send attachments by url" in refused.json()["error"]["message"]
        bad = await http.post(
            "/api/agent", json=_message("see the file", attachments=[{"filename": "x", "data": "%%%"}])
        )
        assert bad.status_code == 400
        assert "not valid base64" in bad.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "status", "text"),
    [
        ({"message": "x", "platform": "discord", "platformChannelId": "c"}, 400, "platform_user_id"),
        ({"message": "x", "platformUserId": "u"}, 400, "platformUserId need 'platform'"),
        ({"message": "x", "attachments": []}, 400, "attachments need 'platform'"),
        (_message("x", sessionId="s1"), 400, "sessionId cannot be used with 'platform'"),
        (_message("x", platform="no spaces allowed"), 400, "invalid platform message"),
        (_message("x", platformChannelId=7), 400, "platformChannelId"),
    ],
)
async def test_bad_platform_params_are_refused(
    server: ServerThread, body: dict[str, Any], status: int, text: str
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        response = await http.post("/api/agent", json=body)
        assert response.status_code == status, response.text
        assert text in response.json()["error"]["message"]


async def test_a_gateway_without_a_database_refuses_platform_messages() -> None:
    with ServerThread(Gateway(Agent("test"), config=GatewayConfig(grace=5))) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            response = await http.post("/api/agent", json=_message("hello"))
            assert response.status_code == 400
            assert "need a database" in response.json()["error"]["message"]
            plain = await http.post("/api/agent", json={"message": "hello"})  # ordinary messages still work
            assert plain.status_code == 200
