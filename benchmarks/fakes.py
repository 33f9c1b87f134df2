"""The fake model, the engine called on it, and the plugins the hook scenario registers.

A :class:`FakeModel` decides, for the n-th backend call of one run, how long the call
takes and what it answers. The engine and the bare loop call it through
:class:`EngineBackend`; Mellea calls the same model through its own backend class (see
``mellea_baseline``). Latency is an ``asyncio.sleep``: the benchmarks run under asyncio
because Mellea does. A call cancelled while it sleeps is counted in ``cancelled``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from benchmarks.timing import Runner
from hook_specs import CALL_HOOKS, HookName, hookimpl
from hook_specs.records import Generation
from sampling_core import Requirement, Sampler, SamplingResult
from sampling_core.backends import GenerationRequest

PASS = "PASS"
FAIL = "an answer that fails"
PROMPT = "Name a colour."


class FakeModel:
    """Latency and answer of the n-th call (0-based) since the last :meth:`reset`."""

    def __init__(
        self,
        latency: float | Callable[[int], float] = 0.0,
        passes: Callable[[int], bool] | None = None,
    ) -> None:
        self._latency = latency
        self._passes = passes
        self.calls = 0
        self.cancelled = 0

    def reset(self) -> None:
        """Start counting calls (and cancellations) from zero again."""
        self.calls = 0
        self.cancelled = 0

    def next_call(self) -> tuple[float, str]:
        """Claim the next call number; return its latency and its answer."""
        n = self.calls
        self.calls += 1
        delay = self._latency(n) if callable(self._latency) else self._latency
        text = PASS if self._passes is not None and self._passes(n) else FAIL
        return delay, text

    async def wait(self, delay: float) -> None:
        """Sleep ``delay`` seconds, counting a cancellation that arrives meanwhile."""
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


class EngineBackend:
    """The engine's view of a :class:`FakeModel`: ``generate`` returns a ``Generation``.

    With zero latency it returns a prebuilt constant ``Generation`` without awaiting.
    """

    def __init__(self, model: FakeModel) -> None:
        self.model = model
        self._replies = {text: Generation(text=text, latency_s=1e-9) for text in (PASS, FAIL)}

    async def generate(self, request: GenerationRequest) -> Generation:
        """Answer one request as the model says."""
        delay, text = self.model.next_call()
        if delay:
            await self.model.wait(delay)
        return self._replies[text]


def passes(text: str) -> bool:
    """The answer is the passing one."""
    return text == PASS


PASSES = Requirement("the answer is the passing one", passes)
"""The one requirement every scenario checks (it never passes unless the model says so)."""


def engine_runner(
    model: FakeModel,
    *,
    loop_budget: int,
    concurrency_budget: int,
    plugins: Iterable[Any] = (),
    call_plugins: Iterable[Any] = (),
) -> Runner:
    """One engine ``sample()`` call on ``model``, never passing unless the model says so.

    ``plugins`` are registered on the sampler; ``call_plugins`` are passed to every call
    (``sample(..., plugins=...)``), the same objects each time.
    """
    sampler = Sampler(EngineBackend(model), plugins=list(plugins), load_entrypoints=False)
    per_call = list(call_plugins) or None

    async def run() -> SamplingResult:
        return await sampler.sample(
            PROMPT,
            requirements=[PASSES],
            loop_budget=loop_budget,
            concurrency_budget=concurrency_budget,
            plugins=per_call,
        )

    return run


class TrivialPlugin:
    """Implements every hook and does nothing: the cost of dispatch and payloads alone.

    Its implementations are made from the hook list (:func:`_trivial`): a plain one that
    returns nothing on every hook fired with a payload, a sync wrapper (``return (yield)``)
    on the call hooks. A new hook needs no edit here."""


def _trivial(hook: HookName) -> Any:
    if hook in CALL_HOOKS:

        def around(self: TrivialPlugin, payload: Any) -> Any:
            return (yield)

        around.__name__ = around.__qualname__ = hook.value
        around.__doc__ = "Hand the outcome back."
        return hookimpl(wrapper=True)(around)

    def nothing(self: TrivialPlugin, payload: Any) -> None:
        pass

    nothing.__name__ = nothing.__qualname__ = hook.value
    nothing.__doc__ = "Do nothing."
    return hookimpl(nothing)


for _hook in HookName.fired():
    setattr(TrivialPlugin, _hook.value, _trivial(_hook))


def tracing_plugin() -> Any | None:
    """The built-in tracing plugin, or ``None`` when this checkout does not have it yet."""
    try:
        from builtin_plugins.tracing import TracingPlugin
    except ImportError:
        return None
    return TracingPlugin()


def configure_logging() -> None:
    """Give structlog an application's configuration: JSON lines, written to the null device.

    The benchmark is an application, so it configures structlog (the library never does);
    the events are rendered in full, then discarded, so the tracing plugin pays its real
    cost without flooding the table.
    """
    sink = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.PrintLoggerFactory(file=sink),
        cache_logger_on_first_use=True,
    )
