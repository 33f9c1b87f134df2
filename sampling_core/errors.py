"""The exceptions ``sample()`` raises on purpose."""

from __future__ import annotations

from hook_specs.errors import StopSampling, exception_text

__all__ = [
    "BudgetError",
    "CheckCallFailed",
    "PluginError",
    "SamplehooksError",
    "StopSampling",
    "StrategyError",
    "exception_text",
]


class SamplehooksError(Exception):
    """Base class of the errors samplehooks raises itself."""


class BudgetError(SamplehooksError, ValueError):
    """A budget is not an int >= 1 within the engine's caps.

    The message names the field, the value, and who set it (the caller or a plugin).
    """

    def __init__(self, field: str, value: object, source: str, problem: str) -> None:
        super().__init__(f"{field}={value!r} set by {source} is invalid: {problem}")
        self.field = field
        self.value = value
        self.source = source


class PluginError(SamplehooksError):
    """A plugin failed where the engine cannot go on without it.

    Raised when a hook whose payload a plugin may change raises (the engine fails closed),
    and, for every hook, when the sampler is strict.
    """

    def __init__(self, plugin_name: str, hook: str, message: str | None = None) -> None:
        detail = f": {message}" if message else ""
        super().__init__(f"plugin {plugin_name!r} failed in {hook}{detail}")
        self.plugin_name = plugin_name
        self.hook = hook


class CheckCallFailed(SamplehooksError):
    """A check's model call (``CheckContext.generate``, e.g. ``llm_judge``) failed for good.

    The answer could not be graded, so the attempt did not fail: it ends like an attempt
    whose backend call failed (in ``result.errors``, counted in neither ``iterations_used``
    nor ``cancelled``; a prompt none of whose attempts completed is an ``error`` in a
    batch run). A check must let it propagate; ``__cause__`` is the backend's exception.
    """


class StrategyError(SamplehooksError):
    """A strategy's ``pick`` raised: the message names the strategy and what it raised
    (``__cause__`` is the exception itself)."""

    def __init__(self, strategy_name: str, message: str) -> None:
        super().__init__(f"strategy {strategy_name!r}: {message}")
        self.strategy_name = strategy_name
