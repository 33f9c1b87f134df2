"""``OpenAIBackend``: chat or plain completions against any OpenAI-compatible HTTP server.

Works with OpenAI, vLLM, llama.cpp's server, Ollama and LM Studio. It uses one
``httpx.AsyncClient`` per event loop, made on first use. It never retries by itself: 429s,
5xx, timeouts and dropped connections raise
:class:`~sampling_core.backends.transport.TransientBackendError` (with the server's
``Retry-After``) and the engine retries them under its ``RetryPolicy``;
other HTTP errors raise :class:`BackendError`. Cancelling a call closes its HTTP request.
:meth:`OpenAIBackend.stream` asks for the answer as server-sent events (``stream: true``,
with ``stream_options.include_usage`` so the tokens are still counted); closing the stream
closes the request, and the server stops generating. A stream that brings no whole answer
(an error event after the ``200``, data that is not a JSON object, no ``[DONE]`` and no
``finish_reason``) is a transient failure, never an answer (:mod:`.sse`). A request's
``json_schema`` is sent as ``response_format`` (``{"type": "json_schema", ...}``), which
constrains the decoding on servers that support it (OpenAI, vLLM, llama.cpp).

The API key is read from the environment variable named by ``api_key_env`` when the client
is made; it is never stored on the backend, shown in its repr, logged, or put in a message.
It, the token of an ``Authorization`` / ``api-key`` header given, and credentials in the base
URL (user, password, key-like query values: accepted from ``$OPENAI_BASE_URL`` or the
argument, never shown) are registered with :mod:`sampling_core.redaction`, and every message
is scrubbed *before* it is cut to length. A redirect (3xx) is an error: it is never followed.
"""

from __future__ import annotations

import os
import re
import threading
import time
import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from hook_specs.records import Generation, Usage
from sampling_core.backends.base import Chunk, GenerationRequest, content_text
from sampling_core.backends.limits import TransportLimits, per_event_loop
from sampling_core.backends.logprobs import logprobs_of
from sampling_core.backends.openai_body import Mode, openai_body
from sampling_core.backends.sse import (
    DONE,
    MAX_EVENT_CHARS,
    BrokenStream,
    EventTooLong,
    StreamedReply,
    event_lines,
    usage_of,
)
from sampling_core.backends.transport import TransientBackendError
from sampling_core.errors import SamplehooksError, exception_text
from sampling_core.pricing import priced
from sampling_core.redaction import (
    refresh_environment,
    register_headers,
    register_secret,
    scrub,
    url_secrets,
    without_credentials,
)

__all__ = ["BackendError", "OpenAIBackend", "parse_retry_after"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0"})


class BackendError(SamplehooksError):
    """A backend call failed in a way retrying will not fix (a 4xx other than 429, a bad reply).

    ``status`` is the HTTP status, when there was one.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def is_transient_status(status: int) -> bool:
    """Whether an HTTP status is worth retrying: 408, 409, 425, 429 and 5xx but 501 and 505."""
    return status in (408, 409, 425, 429) or (status >= 500 and status not in (501, 505))


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds a server asked us to wait: ``retry-after-ms``, or ``Retry-After`` as seconds or
    an HTTP date. ``None`` when absent or unreadable; never negative."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def is_local_url(base_url: str) -> bool:
    """Whether ``base_url`` points at this machine (no API key needed there)."""
    return (urlsplit(base_url).hostname or "") in _LOCAL_HOSTS


class OpenAIBackend:
    """A model behind an OpenAI-compatible HTTP API.

    ``model`` is sent as the request's model. ``base_url`` defaults to ``$OPENAI_BASE_URL``
    or OpenAI's. ``mode="chat"`` posts to ``/chat/completions``, ``mode="completions"`` to
    ``/completions`` (messages rendered into one prompt). ``default_options`` are merged
    under each request's options (temperature, max_tokens, seed, stop, top_p, ...), which
    are sent as body fields. ``timeout`` bounds each read, ``connect_timeout`` the connect.

    Transport limits, shared by every ``sample()`` call that uses this object:
    ``max_in_flight`` requests open at once, ``rpm`` request starts per minute (``burst``
    back to back), and with ``adaptive`` an in-flight limit that is cut on each 429 and
    grows back on success (see :mod:`sampling_core.backends.limits`).

    Each call's ``usage.cost_usd`` is priced by :mod:`sampling_core.pricing` from the model
    and ``base_url`` (``None`` when the price is unknown); ``free_of_charge=True`` makes it
    ``0.0`` (a model run on this machine). ``stream_options`` are body fields added to a
    streamed request only (the local backend asks llama.cpp for per-token ``timings``, so a
    stream cut short still knows its tokens).
    """

    max_event_chars: int = MAX_EVENT_CHARS
    """The longest line of a stream read (a longer one fails the call, unbuffered)."""

    provider_name: str = "openai"
    """``gen_ai.provider.name`` in traces: "openai", as the OpenTelemetry GenAI conventions
    name OpenAI-compatible APIs; set it to the server's provider when you know it."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        max_in_flight: int | None = None,
        rpm: float | None = None,
        burst: int = 1,
        adaptive: bool = False,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        mode: Mode = "chat",
        default_options: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        free_of_charge: bool = False,
        stream_options: Mapping[str, Any] | None = None,
    ) -> None:
        if mode not in ("chat", "completions"):
            raise ValueError(f'mode must be "chat" or "completions", not {mode!r}')
        if api_key_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", api_key_env):
            # never repeated: it may be the key itself, given by mistake
            raise ValueError(
                "api_key_env must be the NAME of an environment variable (letters, digits "
                "and _), not the key itself"
            )
        refresh_environment()
        self.model = model
        url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        for secret in url_secrets(url):
            register_secret(secret)
        self._url = url  # what requests go to; may carry credentials, never shown
        self.base_url = without_credentials(url) if url_secrets(url) else url
        self.api_key_env = api_key_env
        self.mode: Mode = mode
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.default_options = dict(default_options or {})
        self.limits = TransportLimits(
            max_in_flight=max_in_flight, rpm=rpm, burst=burst, adaptive=adaptive
        )
        self._headers = dict(headers or {})
        register_headers(self._headers.items())
        self.free_of_charge = free_of_charge
        self.stream_options = dict(stream_options or {})
        self._path = "/chat/completions" if mode == "chat" else "/completions"
        self._clients: weakref.WeakKeyDictionary[Any, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"OpenAIBackend(model={self.model!r}, base_url={self.base_url!r}, mode={self.mode!r}, "
            f"max_in_flight={self.limits.max_in_flight!r}, api_key_env={self.api_key_env!r})"
        )

    # -- lifecycle ----------------------------------------------------------------------

    async def __aenter__(self) -> OpenAIBackend:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client of this event loop and forget those of other loops."""
        with self._lock:
            clients = list(self._clients.items())
            self._clients.clear()
        here = per_event_loop()
        for loop, client in clients:
            if loop is here:
                await client.aclose()

    def _client(self) -> httpx.AsyncClient:
        loop = per_event_loop()
        with self._lock:
            client = self._clients.get(loop)
            if client is None:
                client = self._clients[loop] = self._new_client()
            return client

    def _new_client(self) -> httpx.AsyncClient:
        headers = {"Accept": "application/json", **self._headers}
        key = self._api_key()
        if key:
            register_secret(key)
            headers["Authorization"] = f"Bearer {key}"
        elif not is_local_url(self.base_url) and not any(
            name.lower() in ("authorization", "api-key", "x-api-key") for name in headers
        ):
            raise BackendError(
                f"no API key for {self.base_url}: set the environment variable "
                f"{self.api_key_env or 'OPENAI_API_KEY'} (or pass api_key_env=...)"
            )
        limit = self.limits.max_in_flight
        return httpx.AsyncClient(
            base_url=self._url,
            headers=headers,
            follow_redirects=False,
            timeout=httpx.Timeout(self.timeout, connect=self.connect_timeout),
            limits=httpx.Limits(max_connections=limit, max_keepalive_connections=limit or 64),
        )

    def _api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        return os.environ.get(self.api_key_env) or None

    def _scrub(self, text: str, limit: int | None = None) -> str:
        """``text`` without any secret, then cut to ``limit`` characters (in that order: a
        key straddling the cut is masked whole, not left in part)."""
        register_secret(self._api_key())
        text = scrub(text)
        return text if limit is None else text[:limit]

    # -- one call -----------------------------------------------------------------------

    def build_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The JSON body for ``request`` (:func:`openai_body`): what :meth:`generate` sends,
        and :meth:`stream` with its streaming fields added; the response cache keys by it."""
        return openai_body(request, self.model, self.mode, self.default_options)

    def cache_identity(self) -> dict[str, Any]:
        """The server, for the response cache: the endpoint requests go to (without any
        credential); the model, the mode's shape and the options are in the body."""
        return {"server": f"{self.base_url}{self._path}"}

    def _transient(self, exc: httpx.TransportError) -> TransientBackendError:
        """A request that failed on its way (a timeout, a dropped connection): retried."""
        where = f"{self.base_url}{self._path}"
        if isinstance(exc, httpx.TimeoutException):
            return TransientBackendError(f"{where} timed out ({type(exc).__name__})")
        return TransientBackendError(
            self._scrub(f"{where}: {type(exc).__name__}: {exception_text(exc)}")
        )

    def _broken(self, exc: BrokenStream) -> Exception:
        """A stream that brought no whole answer: a failed call, never an answer. Transient
        (retried), but a line longer than :attr:`max_event_chars`: that one will not mend."""
        where = f"{self.base_url}{self._path}"
        detail = f": {self._scrub(exc.detail[:65536], 200)!r}" if exc.detail else ""
        message = f"{where}: {exception_text(exc)}{detail}"
        if isinstance(exc, EventTooLong):
            return BackendError(message)
        return TransientBackendError(message)

    async def generate(self, request: GenerationRequest) -> Generation:
        """Send ``request`` and map the reply into a :class:`Generation`."""
        body = self.build_body(request)
        client = self._client()
        async with self.limits.slot() as epoch:
            began = time.perf_counter()
            try:
                response = await client.post(self._path, json=body)
            except httpx.TransportError as exc:  # timeouts included
                raise self._transient(exc) from None
            latency = time.perf_counter() - began
        if response.status_code >= 300:
            self._raise_for(response, epoch)
        self.limits.on_success()
        return self._generation(response, latency)

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Chunk | Generation]:
        """Send ``request`` as a stream: a :class:`Chunk` per piece of text as it arrives,
        then the whole :class:`Generation`. Closing the iterator closes the request."""
        body = self.build_body(request)
        body.update(self.stream_options)
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        client = self._client()
        pieces: list[str] = []
        reply = StreamedReply()
        async with self.limits.slot() as epoch:
            began = time.perf_counter()
            try:
                async with client.stream("POST", self._path, json=body) as response:
                    if response.status_code >= 300:
                        await response.aread()
                        self._raise_for(response, epoch)
                    if not response.headers.get("content-type", "").startswith(
                        "text/event-stream"
                    ):  # a server that does not stream answers at once: one whole reply
                        await response.aread()
                        whole = self._generation(response, time.perf_counter() - began)
                        self.limits.on_success()
                        if whole.text:
                            yield Chunk(whole.text, whole.usage, whole.logprobs or ())
                        yield whole
                        return
                    lines = event_lines(response.aiter_bytes(), self.max_event_chars)
                    async with aclosing(lines):
                        async for line in lines:
                            timings = reply.timings
                            piece = reply.read(line, self.mode)
                            if piece is DONE:
                                break
                            if piece:
                                pieces.append(piece)
                                yield Chunk(piece, reply.usage_so_far(), reply.new_logprobs())
                            elif reply.timings != timings:  # the server's count moved
                                yield Chunk("", reply.usage_so_far())
                        else:
                            piece = reply.end(self.mode)  # a stream cut short raises here
                            if piece:
                                pieces.append(piece)
                                yield Chunk(piece, reply.usage_so_far(), reply.new_logprobs())
            except httpx.TransportError as exc:  # timeouts included
                raise self._transient(exc) from None
            except BrokenStream as exc:
                raise self._broken(exc) from None
            latency = time.perf_counter() - began
        self.limits.on_success()
        model = reply.model or self.model
        usage = reply.usage if reply.usage is not None else Usage(None, len(pieces))
        yield Generation(
            text="".join(pieces),
            usage=self._priced(usage, model),
            finish_reason=reply.finish_reason,
            model=model,
            latency_s=latency,
            logprobs=None if reply.logprobs is None else tuple(reply.logprobs),
        )

    def _raise_for(self, response: httpx.Response, epoch: int) -> None:
        status = response.status_code
        detail = self._scrub(_error_detail(response), 300)
        where = f"{self.base_url}{self._path}"
        if status < 400:
            raise BackendError(
                f"{where} answered {status} (a redirect, to "
                f"{self._scrub(response.headers.get('location', '?'), 200)!r}); redirects are "
                "not followed: set base_url to the address the server means",
                status=status,
            )
        if is_transient_status(status):
            retry_after = parse_retry_after(response.headers)
            if status == 429:
                self.limits.on_rate_limited(epoch, retry_after)
            raise TransientBackendError(
                f"{where} answered {status}: {detail}", retry_after=retry_after, status=status
            )
        hint = {
            401: f" (check the API key in ${self.api_key_env})",
            403: f" (check the API key in ${self.api_key_env} and its permissions)",
            404: f" (check base_url and the model name {self.model!r})",
        }.get(status, "")
        raise BackendError(f"{where} answered {status}: {detail}{hint}", status=status)

    def _priced(self, usage: Usage, model: str | None) -> Usage:
        if self.free_of_charge:
            return Usage(usage.input_tokens, usage.output_tokens, 0.0)
        if not usage.known:
            return usage  # unknown tokens have no known price
        return priced(usage, model, api_url=self.base_url)

    def _generation(self, response: httpx.Response, latency: float) -> Generation:
        try:
            data = response.json()
            choice = data["choices"][0]
            if self.mode == "chat":
                text = content_text((choice.get("message") or {}).get("content"))
            else:
                text = content_text(choice.get("text"))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise BackendError(
                f"{self.base_url}{self._path} sent a reply that is not a completion: "
                f"{self._scrub(response.text, 200)!r}",
                status=response.status_code,
            ) from None
        return Generation(
            text=text or "",
            usage=self._priced(usage_of(data.get("usage")), data.get("model") or self.model),
            finish_reason=choice.get("finish_reason"),
            model=data.get("model") or self.model,
            latency_s=latency,
            raw=data,
            logprobs=logprobs_of(choice),
        )


def _error_detail(response: httpx.Response) -> str:
    """The server's error message (its first 64 KiB): the caller scrubs it, then cuts it.

    Cutting at 64 KiB first is safe: a key straddling that cut leaves pieces long enough to
    be matched, or none that survive the caller's much shorter cut."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:65536].strip() or response.reason_phrase
    error = data.get("error") if isinstance(data, Mapping) else None
    if isinstance(error, Mapping) and error.get("message"):
        return str(error["message"])[:65536]
    if isinstance(error, str):
        return error[:65536]
    return str(data)[:65536]
