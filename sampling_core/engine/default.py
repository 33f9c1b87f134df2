"""The module-level ``sample`` and ``sample_sync``: a ``Sampler`` made on first use, which
loads entry-point plugins by the environment's rules."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from sampling_core.backends.base import Backend
from sampling_core.engine.launch import DEFAULT_STAGGER_S, Launch
from sampling_core.engine.results import SamplingResult
from sampling_core.engine.sampler import Format, Prompt, Sampler, Selection
from sampling_core.hooks.entry_points import PluginSpec
from sampling_core.requirements.checks import Check, Requirement
from sampling_core.strategies import Strategy

__all__ = ["default_sampler", "sample", "sample_sync"]

_default: Sampler | None = None
_default_lock = threading.Lock()


def default_sampler() -> Sampler:
    """The sampler behind the module-level ``sample``; created on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Sampler()
        return _default


async def sample(
    prompt: Prompt,
    *,
    backend: Backend,
    requirements: Iterable[Requirement | Check] = (),
    strategy: Strategy | None = None,
    loop_budget: int = 1,
    concurrency_budget: int = 1,
    plugins: Iterable[PluginSpec] | None = None,
    seed: int | None = None,
    selection: Selection = "first",
    options: dict[str, Any] | None = None,
    format: Format | None = None,
    early_exit: bool = True,
    early_stop: bool = True,
    launch: Launch = "all",
    stagger_s: float = DEFAULT_STAGGER_S,
    ask_again: bool = False,
) -> SamplingResult:
    """Sample with the default sampler: the arguments of :meth:`Sampler.sample`.

    The default sampler, created on first use, loads entry-point plugins by the
    environment's rules.

    Raises:
        BudgetError: a budget is not an int >= 1 within the caps (a ``ValueError``).
        TypeError: a backend without ``generate``, a bad ``strategy`` or ``seed``.
        ValueError: an unknown ``selection`` or a malformed list of messages.
        PluginError: a plugin could not be loaded, or failed where it may change the
            call (fail closed).
        Exception: the first backend exception, with its own type, when no attempt
            completed. The full account is in :meth:`Sampler.sample`.
    """
    return await default_sampler().sample(
        prompt,
        backend=backend,
        requirements=requirements,
        strategy=strategy,
        loop_budget=loop_budget,
        concurrency_budget=concurrency_budget,
        plugins=plugins,
        seed=seed,
        selection=selection,
        options=options,
        format=format,
        early_exit=early_exit,
        early_stop=early_stop,
        launch=launch,
        stagger_s=stagger_s,
        ask_again=ask_again,
    )


def sample_sync(
    prompt: Prompt,
    *,
    backend: Backend,
    requirements: Iterable[Requirement | Check] = (),
    strategy: Strategy | None = None,
    loop_budget: int = 1,
    concurrency_budget: int = 1,
    plugins: Iterable[PluginSpec] | None = None,
    seed: int | None = None,
    selection: Selection = "first",
    options: dict[str, Any] | None = None,
    format: Format | None = None,
    early_exit: bool = True,
    early_stop: bool = True,
    launch: Launch = "all",
    stagger_s: float = DEFAULT_STAGGER_S,
    ask_again: bool = False,
) -> SamplingResult:
    """The default sampler's :meth:`Sampler.sample_sync <sampling_core.Sampler.sample_sync>`:
    :func:`sample` run to completion from synchronous code (not inside an event loop).

    Returns once every background event of the call has been delivered too; after a Ctrl-C
    it says what it waits for, and a second Ctrl-C stops the waiting for a stuck observer,
    exactly as the method does (it is the method).

    Raises:
        RuntimeError: called inside a running event loop (use ``await sample(...)``).
        Exception: whatever :func:`sample` raises.
    """
    return default_sampler().sample_sync(
        prompt,
        backend=backend,
        requirements=requirements,
        strategy=strategy,
        loop_budget=loop_budget,
        concurrency_budget=concurrency_budget,
        plugins=plugins,
        seed=seed,
        selection=selection,
        options=options,
        format=format,
        early_exit=early_exit,
        early_stop=early_stop,
        launch=launch,
        stagger_s=stagger_s,
        ask_again=ask_again,
    )
