"""A tiny OpenAI-compatible HTTP/1.1 server that answers from a script, for transport tests.

It runs an asyncio server in a thread of its own, so the test's event loop (asyncio or
trio) talks to it over a real socket. A *script* is a function of the arrival number and
the request body returning a :class:`Reply`, or a :class:`Hang` that holds the request open
until the client goes away. The server records every arrival, the number of requests in
flight (and the peak), and every client disconnect.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass
class Reply:
    """An answer: ``status``, a JSON ``body`` (a chat completion by default; a ``str`` is
    sent as it is, e.g. a recorded event stream), extra headers, its ``content_type``, and
    a ``delay`` slept by the server before it answers."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    content_type: str = "application/json"


@dataclass
class Stream:
    """A streamed answer: ``pieces`` written one at a time, each flushed and ``gap`` seconds
    after the last (so that the client reads them apart), then the connection closed (with
    ``hang``: held open, sending nothing more, until the client closes it)."""

    pieces: list[bytes]
    gap: float = 0.01
    content_type: str = "text/event-stream"
    hang: bool = False


@dataclass
class Hang:
    """Hold the request open, sending nothing, until the client closes the connection."""


@dataclass
class Arrival:
    """One request as the server saw it."""

    number: int
    at: float
    path: str
    headers: dict[str, str]
    body: Any


Script = Callable[[int, Any], "Reply | Stream | Hang"]


def sse(data: Any) -> bytes:
    """One server-sent event whose data is ``data`` as JSON (a ``str`` is sent as it is)."""
    text = data if isinstance(data, str) else json.dumps(data)
    return f"data: {text}\n\n".encode()


def chunk_event(text: str | None = None, finish_reason: str | None = None) -> dict[str, Any]:
    """A chat-completion chunk bringing ``text`` (and a ``finish_reason``)."""
    delta = {} if text is None else {"content": text}
    return {
        "object": "chat.completion.chunk",
        "model": "scripted-http",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def streamed(*texts: str, finish_reason: str | None = "stop", done: bool = True) -> list[bytes]:
    """The events of a streamed chat completion of ``texts`` (with a usage event at the end)."""
    events = [sse(chunk_event(text)) for text in texts]
    if finish_reason is not None:
        events.append(sse(chunk_event(finish_reason=finish_reason)))
        usage = {"prompt_tokens": 5, "completion_tokens": len(texts)}
        events.append(sse({"object": "chat.completion.chunk", "choices": [], "usage": usage}))
    if done:
        events.append(sse("[DONE]"))
    return events


def completion(
    text: str,
    *,
    prompt_tokens: int = 5,
    completion_tokens: int = 3,
    finish_reason: str = "stop",
    model: str = "scripted-http",
) -> dict[str, Any]:
    """A chat-completion body."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": finish_reason,
                "message": {"role": "assistant", "content": text},
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class ScriptedHTTPServer:
    """Serve ``script`` on ``127.0.0.1`` on a free port; use as a context manager."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.arrivals: list[Arrival] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self.disconnects = 0
        self._changed = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> ScriptedHTTPServer:
        self._thread = threading.Thread(target=self._run, name="scripted-http", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._stop_event.set)
        if self._thread is not None:
            self._thread.join(10)

    def wait_for(
        self, predicate: Callable[[ScriptedHTTPServer], bool], timeout: float = 30.0
    ) -> bool:
        """Block until ``predicate(self)`` holds (re-checked on every server event)."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self), timeout)

    # -- the server thread ---------------------------------------------------------------

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0, backlog=512)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        async with self._server:
            await self._stop_event.wait()

    def _notify(self, change: Callable[[], None]) -> None:
        with self._changed:
            change()
            self._changed.notify_all()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                path, headers, body = request
                if not await self._answer(reader, writer, path, headers, body):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def _answer(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        path: str,
        headers: dict[str, str],
        body: Any,
    ) -> bool:
        def arrive() -> None:
            self.arrivals.append(
                Arrival(len(self.arrivals) + 1, time.monotonic(), path, headers, body)
            )
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

        self._notify(arrive)
        number = len(self.arrivals)
        reply = self.script(number, body)
        if isinstance(reply, Hang):
            await reader.read()  # returns at EOF: the client closed the connection
            self._notify(self._left_by_client)
            return False
        if isinstance(reply, Stream):
            await self._stream(reader, writer, reply)
            return False
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if isinstance(reply.body, str):
            payload = reply.body.encode()
        else:
            body = reply.body if reply.body is not None else completion("ok")
            payload = json.dumps(body).encode()
        head = [
            f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'Status')}",
            f"Content-Type: {reply.content_type}",
            f"Content-Length: {len(payload)}",
        ]
        head += [f"{k}: {v}" for k, v in reply.headers.items()]

        def leave() -> None:
            self.in_flight -= 1

        self._notify(leave)  # before the client can see the answer
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
        await writer.drain()
        return True

    async def _stream(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reply: Stream
    ) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {reply.content_type}\r\nConnection: close"
        writer.write((head + "\r\n\r\n").encode())
        await writer.drain()
        try:
            for piece in reply.pieces:
                await asyncio.sleep(reply.gap)
                writer.write(piece)
                await writer.drain()
            if reply.hang:
                await reader.read()  # returns at EOF: the client closed the connection
                self._notify(self._left_by_client)
                return
        except (ConnectionError, asyncio.CancelledError):  # the client left; the server stops
            self._notify(self._left_by_client)
            return
        self._notify(self._left)

    def _left(self) -> None:
        self.in_flight -= 1

    def _left_by_client(self) -> None:
        self.in_flight -= 1
        self.disconnects += 1


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, dict[str, str], Any] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    _method, path, _version = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    raw = await reader.readexactly(int(headers.get("content-length", "0")))
    return path, headers, json.loads(raw) if raw else None
