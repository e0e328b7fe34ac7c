"""A real HTTP server on loopback that replays canned provider responses (stdlib only).

:class:`ReplayServer` listens on ``127.0.0.1`` on an ephemeral port in a background thread, records
every request it receives and answers each one with the next queued :class:`ReplayResponse`, or
with whatever a responder callable returns. A response can be delivered in separate pieces (``split``,
sent as separate HTTP chunks so the client sees each boundary) and can be cut off after a number of
body bytes to simulate a dropped connection. :meth:`ReplayServer.from_recording` loads a
``provider-recording/v1`` file; :func:`openai_chat_stream` and :func:`openai_chat_completion` build
OpenAI Chat Completions bodies for dynamic servers::

    def answer(request: ReplayRequest) -> ReplayResponse:
        return ReplayResponse.sse(openai_chat_stream(text=["Hello", " world"]))

    with ReplayServer(answer) as server:
        model = OpenAIModel("gpt-4o", base_url=server.base_url, api_key="test")
"""

from __future__ import annotations

import collections
import contextlib
import json
import random
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from loopwright.messages import ToolCall

__all__ = [
    "ReplayRequest",
    "ReplayResponse",
    "ReplayServer",
    "Responder",
    "openai_chat_completion",
    "openai_chat_stream",
    "recorded_body",
    "recording_responses",
]

_HOP_BY_HOP = frozenset(
    {"connection", "content-length", "content-encoding", "keep-alive", "transfer-encoding"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayRequest:
    """A request the server received. ``headers`` names are lower-cased; ``json`` is the parsed body."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayResponse:
    """A canned response.

    ``split`` lists body byte offsets at which the body is flushed as separate pieces (``pause`` seconds
    apart). ``cut_after`` closes the connection after that many body bytes. ``chunked`` chooses
    ``Transfer-Encoding: chunked`` (each piece one HTTP chunk); by default event streams are chunked and
    everything else gets a ``Content-Length``.
    """

    status: int = 200
    headers: Sequence[tuple[str, str]] = ()
    body: bytes = b""
    split: Sequence[int] = ()
    pause: float = 0.0
    cut_after: int | None = None
    chunked: bool | None = None

    @classmethod
    def sse(cls, body: bytes | str, *, status: int = 200, **options: Any) -> ReplayResponse:
        """An event stream (``text/event-stream``)."""
        data = body.encode() if isinstance(body, str) else body
        return cls(status=status, headers=(("content-type", "text/event-stream"),), body=data, **options)

    @classmethod
    def json_body(
        cls, payload: Any, *, status: int = 200, headers: Sequence[tuple[str, str]] = (), **options: Any
    ) -> ReplayResponse:
        """A JSON response; extra ``headers`` (for example ``retry-after``) are sent as well."""
        all_headers = (("content-type", "application/json"), *headers)
        return cls(status=status, headers=all_headers, body=json.dumps(payload).encode(), **options)

    def pieces(self) -> list[bytes]:
        """The body cut at the ``split`` offsets (empty pieces dropped)."""
        bounds = sorted({o for o in self.split if 0 < o < len(self.body)})
        starts = [0, *bounds]
        ends = [*bounds, len(self.body)]
        return [self.body[a:b] for a, b in zip(starts, ends, strict=True) if b > a]

    def resplit(self, seed: int | None = None, *, piece_size: int | None = None) -> ReplayResponse:
        """A copy split at random offsets (seeded) or into pieces of ``piece_size`` bytes."""
        size = len(self.body)
        if piece_size is not None:
            offsets = list(range(piece_size, size, piece_size))
        else:
            rng = random.Random(seed)
            count = rng.randint(1, max(1, min(size // 4, 40)))
            offsets = sorted(rng.sample(range(1, size), min(count, size - 1))) if size > 1 else []
        return replace(self, split=offsets)


Responder = Callable[[ReplayRequest], ReplayResponse]
"""A function that answers a request; called on the server's thread."""


class ReplayServer:
    """An HTTP/1.1 keep-alive server on ``127.0.0.1`` that replays responses; a context manager.

    ``responses`` is either an iterable of :class:`ReplayResponse` served in order (more can be queued
    with :meth:`add`) or a :data:`Responder`. When the queue is empty, or the responder raises, the
    server answers 500 with a JSON error naming the problem and records it in :attr:`errors`, so a test
    fails instead of hanging. :attr:`requests` lists what was received; :attr:`connections_opened`
    counts TCP connections (a keep-alive client opens one).
    """

    def __init__(
        self, responses: Iterable[ReplayResponse] | Responder = (), *, path_prefix: str = "/v1"
    ) -> None:
        self.requests: list[ReplayRequest] = []
        self.errors: list[str] = []
        self.connections_opened = 0
        self._responder: Responder | None = None
        self._queue: collections.deque[ReplayResponse] = collections.deque()
        if callable(responses):
            self._responder = responses
        else:
            self._queue.extend(responses)
        self._path_prefix = path_prefix
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.replay = self
        self._thread: threading.Thread | None = None

    @classmethod
    def from_recording(
        cls, path: str | Path, *, split_seed: int | None = None, piece_size: int | None = None
    ) -> ReplayServer:
        """A server that replays the responses of a ``provider-recording/v1`` file, in order."""
        responses = recording_responses(path)
        if split_seed is not None or piece_size is not None:
            responses = [r.resplit(split_seed, piece_size=piece_size) for r in responses]
        return cls(responses)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The server's root URL, ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The API base URL to give a client, ``http://127.0.0.1:PORT/v1``."""
        return self.url + self._path_prefix

    def add(self, *responses: ReplayResponse) -> None:
        """Queue more responses."""
        with self._lock:
            self._queue.extend(responses)

    def start(self) -> Self:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, drop open connections and join the server thread."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- called on handler threads -------------------------------------------------------------

    def _answer(self, request: ReplayRequest) -> ReplayResponse:
        with self._lock:
            self.requests.append(request)
            responder = self._responder
            queued = self._queue.popleft() if responder is None and self._queue else None
        if responder is not None:
            try:
                return responder(request)
            except Exception as exc:
                return self._fail(f"responder raised {type(exc).__name__}: {exc}")
        if queued is None:
            return self._fail(f"no response queued for {request.method} {request.path}")
        return queued

    def _fail(self, message: str) -> ReplayResponse:
        with self._lock:
            self.errors.append(message)
        payload = {"error": {"message": f"ReplayServer: {message}", "type": "replay_server_error"}}
        return ReplayResponse.json_body(payload, status=500)

    def _track(self, conn: socket.socket, open_: bool) -> None:
        with self._lock:
            if open_:
                self._connections.add(conn)
                self.connections_opened += 1
            else:
                self._connections.discard(conn)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    replay: ReplayServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-response is normal here (timeouts, cut tests): stay quiet."""
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return
        self.replay._fail(f"handler crashed: {type(exc).__name__}: {exc}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = 30
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.replay._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.replay._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read ``ReplayServer.requests`` instead of a log on stderr."""

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self) -> None:
        body = self._read_body()
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        request = ReplayRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            json=parsed,
        )
        self._send(self.server.replay._answer(request))

    def _send(self, response: ReplayResponse) -> None:
        """Write the response: the head with the first piece, one write per piece (one HTTP chunk each)."""
        headers = [(k, v) for k, v in response.headers if k.lower() not in _HOP_BY_HOP]
        content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
        chunked = response.chunked
        if chunked is None:
            chunked = content_type.startswith("text/event-stream")
        reason = self.responses.get(response.status, ("",))[0]
        lines = [f"HTTP/1.1 {response.status} {reason}", *(f"{k}: {v}" for k, v in headers)]
        lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(response.body)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        pieces = response.pieces()
        if response.cut_after is not None:
            kept, budget = [], response.cut_after
            for piece in pieces:
                if budget <= 0:
                    break
                kept.append(piece[:budget])
                budget -= len(piece)
            pieces = kept
        frames = [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces] if chunked else list(pieces)
        frames = frames or [b""]
        frames[0] = head + frames[0]
        if chunked and response.cut_after is None:
            frames[-1] += b"0\r\n\r\n"
        for number, frame in enumerate(frames):
            if number and response.pause:
                time.sleep(response.pause)
            self.wfile.write(frame)
        if response.cut_after is not None:
            self._cut()

    def _cut(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


# --- recordings ----------------------------------------------------------------------------------


def _flatten_headers(raw: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    headers: list[tuple[str, str]] = []
    for name, value in (raw or {}).items():
        values = value if isinstance(value, list) else [value]
        headers.extend((name, str(v)) for v in values)
    return tuple(headers)


def recorded_body(response: Mapping[str, Any]) -> bytes:
    """The body bytes of one recorded response, following the ``provider-recording/v1`` rules."""
    events = response.get("sse_events")
    if events:
        return ("\n\n".join(events) + "\n\n").encode()
    if response.get("body_text") is not None:
        return str(response["body_text"]).encode()
    if response.get("body_json") is not None:
        return json.dumps(response["body_json"]).encode()
    payloads = response.get("sse_data_payloads") or response.get("chunks_jsonl")
    if payloads:
        return "".join(f"data: {p}\n\n" for p in payloads).encode()
    return str(response.get("quoted_text") or "").encode()


def recording_responses(path: str | Path) -> list[ReplayResponse]:
    """The responses of a recording file that have an HTTP status, in order."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if data.get("format") != "provider-recording/v1":
        raise ValueError(f"{str(path)!r} is not a provider-recording/v1 file")
    out = []
    for interaction in data["interactions"]:
        response = interaction["response"]
        if response.get("status") is None:
            continue
        headers = _flatten_headers(response.get("headers"))
        if not any(k.lower() == "content-type" for k, _ in headers):
            kind = "text/event-stream" if data.get("streaming") else "application/json"
            headers = (*headers, ("content-type", kind))
        out.append(
            ReplayResponse(status=int(response["status"]), headers=headers, body=recorded_body(response))
        )
    return out


# --- OpenAI Chat Completions bodies --------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class _Chunker:
    model: str
    id: str
    created: int = 1_700_000_000
    lines: list[str] = field(default_factory=list)

    def add(self, delta: dict[str, Any], finish_reason: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        self.emit({"choices": [choice]})

    def emit(self, extra: dict[str, Any]) -> None:
        chunk = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
        }
        chunk.update(extra)
        self.lines.append("data: " + json.dumps(chunk, separators=(",", ":")))


def _usage(usage: tuple[int, int] | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": usage[0] + usage[1]}


def _split_text(text: str, pieces: int) -> list[str]:
    if pieces <= 1 or len(text) <= 1:
        return [text]
    step = max(1, -(-len(text) // pieces))
    return [text[i : i + step] for i in range(0, len(text), step)]


def openai_chat_stream(
    *,
    text: str | Sequence[str] = (),
    tool_calls: Sequence[ToolCall] = (),
    reasoning: str | Sequence[str] = (),
    usage: tuple[int, int] | None = (10, 5),
    finish_reason: str | None = None,
    model: str = "replay-model",
    args_pieces: int = 2,
    id: str = "chatcmpl-replay",
) -> bytes:
    """An OpenAI Chat Completions SSE body, as ``stream_options.include_usage`` makes OpenAI send it.

    ``text`` and ``reasoning`` (sent as ``reasoning_content``) are one string or a list of deltas; each
    tool call's arguments are split into ``args_pieces`` deltas. ``usage`` is ``(prompt, completion)``
    tokens, or ``None`` for no usage chunk. ``finish_reason`` defaults to ``tool_calls`` when there are
    calls, else ``stop``.
    """
    chunker = _Chunker(model=model, id=id)
    chunker.add({"role": "assistant", "content": ""})
    for piece in [reasoning] if isinstance(reasoning, str) else reasoning:
        if piece:
            chunker.add({"reasoning_content": piece})
    for piece in [text] if isinstance(text, str) else text:
        if piece:
            chunker.add({"content": piece})
    for index, call in enumerate(tool_calls):
        start = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        chunker.add({"tool_calls": [start]})
        for part in _split_text(call.arguments, args_pieces):
            chunker.add({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
    chunker.add({}, finish_reason or ("tool_calls" if tool_calls else "stop"))
    if usage is not None:
        chunker.emit({"choices": [], "usage": _usage(usage)})
    chunker.lines.append("data: [DONE]")
    return ("\n\n".join(chunker.lines) + "\n\n").encode()


def openai_chat_completion(
    *,
    text: str | None = None,
    tool_calls: Sequence[ToolCall] = (),
    reasoning: str | None = None,
    usage: tuple[int, int] | None = (10, 5),
    finish_reason: str | None = None,
    model: str = "replay-model",
    id: str = "chatcmpl-replay",
) -> dict[str, Any]:
    """A non-streaming OpenAI Chat Completions response body (serve it with ``ReplayResponse.json_body``)."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in tool_calls
        ]
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
    }
    body: dict[str, Any] = {
        "id": id,
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [choice],
    }
    if usage is not None:
        body["usage"] = _usage(usage)
    return body
