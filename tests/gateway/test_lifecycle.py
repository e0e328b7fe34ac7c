"""Shutdown and restart with real processes: SIGTERM drains, waiting messages survive a restart."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from loopwright import Agent
from loopwright.gateway import Gateway, ServerThread
from loopwright.hooks import GatewayHook
from tests.gateway.support import rpc, tool_started, wait_for_event

REPO = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).parent / "loopwright"


class Process:
    def __init__(self, args: list[str], cwd: Path = REPO) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "http://" not in line:
            self.proc.kill()
            raise AssertionError(
                f"the server did not start: {line!r} {self.proc.stderr.read() if self.proc.stderr else ''}"
            )
        self.url = "http://" + line.split("http://", 1)[1].split()[0]

    def terminate(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=45)
        return self.proc.returncode, out + err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        process.kill()


def _serve_app(workspace: Path, grace: float, started: list[Process]) -> Process:
    process = Process([sys.executable, "-m", "tests.gateway.serve_app", str(workspace), str(grace)])
    started.append(process)
    return process


async def test_sigterm_stops_running_runs_and_keeps_waiting_ones(
    tmp_path: Path, processes: list[Process]
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    first = _serve_app(workspace, 2, processes)
    async with httpx.AsyncClient(base_url=first.url, timeout=40) as http:
        running = await rpc(http, "agent", message="first", agent="gated", sessionId="kept")
        await wait_for_event(http, running["runId"], tool_started)
        waiting = await rpc(http, "agent", message="second", agent="gated", sessionId="kept")
        # Both waits are with the server before the signal: it answers them before it exits.
        waits = [
            asyncio.create_task(rpc(http, "agent.wait", runId=r["runId"], timeoutMs=30_000))
            for r in (running, waiting)
        ]
        await rpc(http, "health")
        first.proc.send_signal(signal.SIGTERM)
        stopped, requeued = await asyncio.gather(*waits)
        assert (stopped["status"], stopped["reason"]) == ("ok", "stopped")
        assert requeued["status"] == "error" and requeued["error"]["code"] == "requeued"
    out, err = first.proc.communicate(timeout=45)
    assert first.proc.returncode == 0, err
    assert "drained" in out
    queued = list((workspace / "sessions" / "kept" / "queue").glob("*.json"))
    assert [p.name.endswith(f"{waiting['runId']}.json") for p in queued] == [True]

    (workspace / "open").touch()
    second = _serve_app(workspace, 5, processes)
    async with httpx.AsyncClient(base_url=second.url, timeout=40) as http:
        resumed = await rpc(http, "agent.wait", runId=waiting["runId"], timeoutMs=30_000)
        assert (resumed["status"], resumed["reason"]) == ("ok", "done")
        assert "released" in resumed["text"]
        session = await rpc(http, "sessions.get", sessionId="kept", agent="gated")
    users = [e["content"] for e in session["entries"] if e.get("role") == "user"]
    assert users == ["first", "second"]
    assert [r["reason"] for r in session["reports"]] == ["stopped", "done"]
    code, _ = second.terminate()
    assert code == 0
    assert not list((workspace / "sessions" / "kept" / "queue").glob("*.json"))


async def test_sigterm_lets_a_run_finish_within_the_grace_period(
    tmp_path: Path, processes: list[Process]
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    server = _serve_app(workspace, 30, processes)
    async with httpx.AsyncClient(base_url=server.url, timeout=40) as http:
        running = await rpc(http, "agent", message="finish", agent="gated", sessionId="s")
        await wait_for_event(http, running["runId"], tool_started)
        server.proc.send_signal(signal.SIGTERM)
        # Draining: new messages are refused while the run goes on.
        while (await http.post("/api/health")).json()["status"] != "draining":
            pass
        refused = await http.post("/api/agent", json={"message": "late", "agent": "gated"})
        assert refused.status_code == 503
        waiting = asyncio.create_task(rpc(http, "agent.wait", runId=running["runId"], timeoutMs=30_000))
        await rpc(http, "health")  # the wait is with the server before the run can end
        (workspace / "open").touch()
        done = await waiting
        assert (done["status"], done["reason"]) == ("ok", "done")
    server.proc.communicate(timeout=45)
    assert server.proc.returncode == 0


@pytest.fixture
def initialised(tmp_path: Path) -> Path:
    workspace = tmp_path / "agent"
    subprocess.run([str(CLI), "init", str(workspace)], check=True, capture_output=True)
    return workspace


def test_loopwright_serve_refuses_other_addresses_without_a_token(initialised: Path) -> None:
    refused = subprocess.run(
        [str(CLI), "serve", "-w", str(initialised), "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2
    assert "without an auth token" in refused.stderr


async def test_loopwright_serve_serves_the_workspace_agent(
    initialised: Path, tmp_path: Path, processes: list[Process]
) -> None:
    workspace = initialised
    server = Process([str(CLI), "serve", "-w", str(workspace), "--port", "0"], cwd=tmp_path)
    processes.append(server)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        health = await rpc(http, "health")
        assert [a["name"] for a in health["agents"]] == ["agent"]
        accepted = await rpc(http, "agent", message="count the words in 'a b c'")
        result = await rpc(http, "agent.wait", runId=accepted["runId"])
        assert result["status"] == "ok"
        page = await http.get("/")
        assert page.status_code == 200 and "loopwright console" in page.text
    code, output = server.terminate()
    assert code == 0
    assert "gateway stopped" in output


def test_gateway_start_and_stop_hooks_fire_with_the_address() -> None:
    agent = Agent("test", name="hooked")
    seen: list[tuple[str, GatewayHook]] = []
    agent.hooks.on("gateway_start", lambda event: seen.append(("start", event)))
    agent.hooks.on("gateway_stop", lambda event: seen.append(("stop", event)))
    with ServerThread(Gateway(agent)) as server:
        port = int(server.url.rsplit(":", 1)[1])
        assert [name for name, _ in seen] == ["start"]
    assert [name for name, _ in seen] == ["start", "stop"]
    for _, event in seen:
        assert (event.host, event.port, event.agents) == ("127.0.0.1", port, ["hooked"])


async def test_after_a_crash_started_runs_are_reported_and_waiting_ones_run(
    tmp_path: Path, processes: list[Process]
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    first = _serve_app(workspace, 5, processes)
    async with httpx.AsyncClient(base_url=first.url, timeout=40) as http:
        started = await rpc(http, "agent", message="first", agent="gated", sessionId="crash")
        await wait_for_event(http, started["runId"], tool_started)
        waiting = await rpc(http, "agent", message="second", agent="gated", sessionId="crash")
    first.proc.kill()  # no drain, no cleanup
    first.proc.communicate(timeout=30)

    (workspace / "open").touch()
    second = _serve_app(workspace, 5, processes)
    async with httpx.AsyncClient(base_url=second.url, timeout=40) as http:
        reported = await rpc(http, "agent.wait", runId=started["runId"], timeoutMs=30_000)
        assert reported["status"] == "error"
        assert reported["error"]["code"] == "interrupted"
        assert "not run again" in reported["error"]["message"]
        resumed = await rpc(http, "agent.wait", runId=waiting["runId"], timeoutMs=30_000)
        assert (resumed["status"], resumed["reason"]) == ("ok", "done")
        session = await rpc(http, "sessions.get", sessionId="crash", agent="gated")
    users = [e["content"] for e in session["entries"] if e.get("role") == "user"]
    assert users == ["first", "second"]
    code, _ = second.terminate()
    assert code == 0
