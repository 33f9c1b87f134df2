"""The ``llm`` plugin: every model of the `llm` library as the backend kind ``llm``.

Registered through ``register_backends`` exactly as a third-party plugin registers a kind
(entry point ``llm``), so the models `llm`'s own plugins provide (hosted APIs, Ollama, GGUF,
``llm-echo``) work with samplehooks::

    backend: {kind: llm, model: gpt-4o-mini, options: {temperature: 0.2}}

    samplehooks sample "Hi" --backend llm --backend-option model=echo

Needs the ``llm`` extra (``pip install 'samplehooks[llm]'``); `llm` is imported only when a
backend of this kind is built. Under asyncio a model with an async implementation is awaited;
otherwise (trio, or a sync-only model) the sync API runs in a worker thread, so the event
loop is never blocked. Usage is taken from what the model reports (missing counts are 0).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Annotated, Any

import anyio
import anyio.to_thread
from pydantic import Field

from hook_specs import hookimpl
from hook_specs.records import Generation, Usage
from sampling_core.backends.base import GenerationRequest
from sampling_core.errors import exception_text
from sampling_core.kinds import LOCATION, THROUGHPUT

__all__ = ["LLMBackend", "register_backends"]

_VARIABLE = r"^[A-Za-z_][A-Za-z0-9_]*$"
# The engine's options that are passed on when the model takes an option of that name.
_ENGINE_OPTIONS = ("max_tokens", "temperature", "top_p", "seed", "stop")


def _llm() -> Any:
    try:
        import llm
    except ImportError as exc:
        raise ValueError(
            f"backend kind 'llm' needs the llm package ({exception_text(exc)}); "
            "pip install 'samplehooks[llm]'"
        ) from None
    return llm


def _resolve(llm: Any, model: str, get: Callable[[str], Any]) -> Any:
    try:
        return get(model)
    except llm.UnknownModelError:
        raise
    except Exception as exc:  # a broken llm plugin fails while llm loads its plugins
        raise ValueError(
            f"llm could not load its plugins ({type(exc).__name__}: {exception_text(exc)}); set "
            "LLM_LOAD_PLUGINS to the llm plugins to load, e.g. LLM_LOAD_PLUGINS=llm-echo"
        ) from None


def _under_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # trio (or no loop): llm's async API would not run here
        return False
    return True


class LLMBackend:
    """A backend that sends each request to an `llm` model.

    The system messages become ``system``; the last user message is the prompt, and
    earlier turns (a multi-turn repair) are written into it as ``User:`` / ``Assistant:``
    lines. The engine's ``max_tokens``, ``temperature``, ``top_p``, ``seed`` and ``stop``
    are passed on when the model has an option of that name; ``options`` always are.
    """

    provider_name = "llm"  # what spans, metrics and records call the provider

    def __init__(
        self,
        model: Annotated[str, Field(description="An llm model id or alias (see `llm models`).")],
        options: Annotated[
            dict[str, Any] | None,
            Field(description="The model's own options (see `llm models --options`)."),
        ] = None,
        key_env: Annotated[
            str | None,
            Field(
                pattern=_VARIABLE,
                description="The NAME of an environment variable holding the model's API key "
                "(default: llm's own key lookup).",
            ),
            LOCATION,
        ] = None,
        prefer_async: Annotated[
            bool,
            Field(
                description="Under asyncio, await the model's async implementation when it has one."
            ),
            THROUGHPUT,
        ] = True,
    ) -> None:
        llm = _llm()
        try:
            self.sync_model = _resolve(llm, model, llm.get_model)
        except llm.UnknownModelError:
            self.sync_model = None
        try:
            self.async_model = _resolve(llm, model, llm.get_async_model)
        except llm.UnknownModelError:
            self.async_model = None
        if self.sync_model is None and self.async_model is None:
            raise ValueError(f"llm has no model {model!r} (list them with `llm models`)")
        found = self.sync_model or self.async_model
        self.model_id = str(found.model_id)
        self.options = dict(options or {})
        try:
            found.Options(**self.options)  # the model's own option model checks them now
        except Exception as exc:
            first = exc.errors()[0] if hasattr(exc, "errors") else None
            where = ".".join(map(str, first["loc"])) if first else ""
            raise ValueError(f"options.{where}: {first['msg'] if first else exc}") from None
        self.key_env = key_env
        self.prefer_async = prefer_async

    def cache_identity(self) -> dict[str, Any]:
        """What the response cache keys this backend's answers by: the model and its options."""
        return {"model": self.model_id, "options": self.options}

    def _arguments(self, request: GenerationRequest, model: Any) -> dict[str, Any]:
        system = "\n\n".join(
            str(m.get("content", "")) for m in request.messages if m.get("role") == "system"
        )
        turns = [m for m in request.messages if m.get("role") in ("user", "assistant")]
        if len(turns) == 1:
            prompt = str(turns[0].get("content", ""))
        else:
            prompt = "\n\n".join(
                f"{str(m['role']).capitalize()}: {m.get('content', '')}" for m in turns
            )
        taken = getattr(model.Options, "model_fields", {})
        options = {k: v for k, v in request.options.items() if k in _ENGINE_OPTIONS and k in taken}
        options.update(self.options)
        arguments: dict[str, Any] = {"system": system or None, **options}
        if self.key_env is not None and getattr(model, "needs_key", None):
            arguments["key"] = os.environ.get(self.key_env)
        return {"prompt": prompt, **arguments}

    async def generate(self, request: GenerationRequest) -> Generation:
        """Ask the model; the sync API runs in a worker thread."""
        if self.async_model is not None and (
            self.sync_model is None or (self.prefer_async and _under_asyncio())
        ):
            response = self.async_model.prompt(**self._arguments(request, self.async_model))
            text = await response.text()
            usage = await response.usage()
        elif self.sync_model is None:
            raise RuntimeError(
                f"llm model {self.model_id!r} has only an async implementation, which runs "
                "under asyncio only"
            )
        else:
            model = self.sync_model

            def call() -> tuple[str, Any]:
                response = model.prompt(**self._arguments(request, model))
                return response.text(), response.usage()

            text, usage = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        return Generation(
            text=text,
            usage=Usage(_count(usage.input), _count(usage.output)),  # unknown stays None
            model=self.model_id,
            raw={"provider": self.provider_name, "model": self.model_id},
        )


@hookimpl
def register_backends(register: Callable[..., None]) -> None:
    """llm."""
    register("llm", LLMBackend)  # its options: the annotated parameters of LLMBackend


def _count(value: Any) -> int | None:
    """A token count ``llm`` reported, or ``None`` (unknown, never 0) when it did not."""
    return None if value is None else int(value)
