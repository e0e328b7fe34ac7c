"""Bearer tokens, the failed-auth slowdown and lockout, bind refusal, WebSocket origin and auth."""

from __future__ import annotations

import json
import logging
import socket
import time

import httpx
import pytest
import websockets
from websockets.asyncio.client import connect

from loopwright import Agent
from loopwright.errors import ConfigError
from loopwright.gateway import Gateway, GatewayConfig, ServerThread, check_bind
from loopwright.gateway._auth import AuthGuard
from tests.gateway.conftest import MakeServer

TOKEN = "s3cret-token-never-logged"


def _ws(server: ServerThread, **kwargs: object) -> connect:
    return connect(server.ws_url, proxy=None, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def guarded(make_server: MakeServer) -> ServerThread:
    return make_server(GatewayConfig(token=TOKEN, auth_failures_before_lockout=3, auth_slowdown=0.001))


async def test_every_route_needs_the_token(guarded: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=guarded.url) as client:
        for method, path in (("POST", "/api/health"), ("GET", "/api/events?runId=x"), ("GET", "/v1/models")):
            response = await client.request(method, path)
            assert response.status_code == 401, path
            assert "missing bearer token" in response.text
        good = {"Authorization": f"Bearer {TOKEN}"}
        assert (await client.post("/api/health", headers=good)).json()["auth"] is True
        assert (await client.get("/v1/models", headers=good)).status_code == 200
        # The console's page itself is public (it holds no data; its calls need the token).
        assert (await client.get("/")).status_code == 200


async def test_a_wrong_token_is_401_and_never_logged(
    guarded: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with httpx.AsyncClient(base_url=guarded.url) as client:
        response = await client.post("/api/health", headers={"Authorization": "Bearer not-it"})
        assert response.status_code == 401
        assert response.json()["error"]["message"].startswith("invalid bearer token")
        ok = await client.post("/api/health", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200
    assert TOKEN not in caplog.text
    assert "not-it" not in caplog.text
    assert TOKEN not in repr(guarded.gateway.config)
    assert TOKEN not in repr(guarded.gateway.auth)
    assert TOKEN not in ok.text


async def test_repeated_failures_lock_the_client_out(guarded: ServerThread) -> None:
    base = time.monotonic()
    now = [base]
    guarded.gateway.auth.clock = lambda: now[0]
    good = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=guarded.url) as client:
        for _ in range(3):
            assert (
                await client.post("/api/health", headers={"Authorization": "Bearer guess"})
            ).status_code == 401
        locked = await client.post("/api/health", headers=good)
        assert locked.status_code == 429
        assert locked.json()["error"]["code"] == "locked_out"
        assert locked.json()["error"]["retryAfterMs"] > 0
        assert int(locked.headers["retry-after"]) >= 1
        now[0] = base + guarded.gateway.config.auth_lockout + 1
        assert (await client.post("/api/health", headers=good)).status_code == 200


async def test_failed_attempts_are_slowed_down_more_each_time() -> None:
    delays: list[float] = []

    async def record(seconds: float) -> None:
        delays.append(seconds)

    guard = AuthGuard("t", max_failures=100, slowdown=0.1, sleep=record)
    for _ in range(7):
        with pytest.raises(Exception, match="invalid bearer token"):
            await guard.check("1.2.3.4", "wrong")
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    await guard.check("1.2.3.4", "t")
    assert guard.failures("1.2.3.4") == 0


def test_other_addresses_need_a_token() -> None:
    with pytest.raises(ConfigError, match=r"refusing to listen on '0\.0\.0\.0' without an auth token"):
        check_bind(GatewayConfig(host="0.0.0.0"))
    with pytest.raises(ConfigError, match="without an auth token"):
        ServerThread(Gateway(Agent("test"), config=GatewayConfig(host="192.168.1.5")), host="192.168.1.5")
    check_bind(GatewayConfig(host="0.0.0.0", token="x" * 32))
    for loopback in ("127.0.0.1", "localhost", "::1", "127.1.2.3"):
        check_bind(GatewayConfig(host=loopback))
    with pytest.raises(ConfigError, match="token is empty"):
        GatewayConfig(token="  ")


async def test_websocket_from_another_origin_is_refused(server: ServerThread) -> None:
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with _ws(server, origin="http://evil.example"):
            pass
    assert refused.value.response.status_code == 403
    async with _ws(server, origin=server.url) as ws:  # the console's own origin
        await ws.send(json.dumps({"id": 1, "method": "health"}))
        assert json.loads(await ws.recv())["ok"] is True


async def test_configured_origins_may_connect(make_server: MakeServer) -> None:
    server = make_server(GatewayConfig(allowed_origins=("https://app.example",)))
    async with _ws(server, origin="https://app.example") as ws:
        await ws.send(json.dumps({"id": "a", "method": "health"}))
        assert json.loads(await ws.recv())["id"] == "a"


async def test_websocket_auth_by_header_or_first_frame(guarded: ServerThread) -> None:
    async with _ws(guarded, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        await ws.send(json.dumps({"id": 1, "method": "health"}))
        assert json.loads(await ws.recv())["ok"] is True
    async with _ws(guarded) as ws:
        await ws.send(json.dumps({"id": 1, "method": "health"}))
        refused = json.loads(await ws.recv())
        assert (refused["ok"], refused["error"]["status"]) == (False, 401)
        await ws.send(json.dumps({"id": 2, "method": "auth", "params": {"token": TOKEN}}))
        assert json.loads(await ws.recv())["result"] == {"authenticated": True}
        await ws.send(json.dumps({"id": 3, "method": "health"}))
        assert json.loads(await ws.recv())["ok"] is True
    async with _ws(guarded) as ws:
        await ws.send(json.dumps({"id": 1, "method": "auth", "params": {"token": "wrong"}}))
        assert json.loads(await ws.recv())["error"]["status"] == 401
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401


async def test_a_websocket_message_over_1_mib_closes_the_connection(server: ServerThread) -> None:
    async with _ws(server, max_size=None) as ws:
        await ws.send(json.dumps({"id": 1, "method": "agent", "params": {"message": "x" * (1024 * 1024)}}))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


async def test_pages_of_other_sites_cannot_use_the_api(
    client: httpx.AsyncClient, server: ServerThread
) -> None:
    # A form or fetch from another site carries that site's Origin.
    response = await client.post(
        "/api/agent", json={"message": "hi"}, headers={"Origin": "https://evil.example"}
    )
    assert response.status_code == 403
    assert "another origin" in response.json()["error"]["message"]
    same = await client.post("/api/health", headers={"Origin": server.url})
    assert same.status_code == 200
    # DNS rebinding: the page's own origin, but its name is not a loopback one.
    rebound = await client.post(
        "/api/health", headers={"Host": "evil.example:80", "Origin": "http://evil.example:80"}
    )
    assert rebound.status_code == 403
    assert "not a loopback name" in rebound.json()["error"]["message"]
    port = int(server.url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port))
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with connect(f"ws://evil.example:{port}/ws", sock=sock, proxy=None):
            pass
    assert refused.value.response.status_code == 403


async def test_with_a_token_any_host_name_may_be_used(guarded: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=guarded.url) as client:
        response = await client.post(
            "/api/health", headers={"Host": "gateway.example", "Authorization": f"Bearer {TOKEN}"}
        )
    assert response.status_code == 200


def test_bad_gateway_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="port 70000"):
        GatewayConfig(port=70000)
    with pytest.raises(ConfigError, match="grace must be 0 or more"):
        GatewayConfig(grace=-1)
    with pytest.raises(ConfigError, match="max_body_bytes must be 1 or more"):
        GatewayConfig(max_body_bytes=0)
