"""``Sampler``: the engine's entry point (``sample``, ``sample_sync``, ``aclose``)."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import anyio

from hook_specs.records import Message
from sampling_core.backends.base import Backend, aclose_backend
from sampling_core.backends.transport import RetryPolicy
from sampling_core.engine.budgets import (
    DEFAULT_MAX_ATTEMPTS_PER_CALL,
    DEFAULT_MAX_CONCURRENCY_BUDGET,
    DEFAULT_MAX_LOOP_BUDGET,
    BudgetCaps,
    check_budget,
)
from sampling_core.engine.launch import DEFAULT_STAGGER_S, Launch
from sampling_core.engine.loop import SamplingCall
from sampling_core.engine.results import SamplingResult
from sampling_core.engine.settings import (
    DEFAULT_TOKENS,
    CallSettings,
    asked_options,
    token_settings,
)
from sampling_core.engine.subsample_tasks import running_event_loop
from sampling_core.hooks.background import DEFAULT_MAXSIZE as DEFAULT_BACKGROUND_QUEUE
from sampling_core.hooks.background import BackgroundDelivery
from sampling_core.hooks.call_hooks import CallHooks
from sampling_core.hooks.entry_points import PluginSettings, PluginSpec, resolve_plugin
from sampling_core.hooks.faults import PluginFault
from sampling_core.hooks.registry import PluginRegistry
from sampling_core.requirements.checks import (
    DEFAULT_CHECK_TIMEOUT_S,
    Check,
    Requirement,
    as_requirements,
)
from sampling_core.requirements.formats import format_requirement
from sampling_core.strategies import RejectionSampling, Strategy

if TYPE_CHECKING:
    from sampling_core.backends.cache_store import ResponseCache

__all__ = ["Sampler"]

Prompt = str | Sequence[Message]
Selection = Literal["first", "ordered"]
Format = type[Any] | dict[str, Any]


class Sampler:
    """A reusable engine: a backend, its plugins, and the engine's limits.

    ``plugins`` are registered for every call of this sampler; with ``load_entrypoints``
    the installed entry-point plugins are loaded too, as ``SAMPLEHOOKS_PLUGINS`` and
    ``SAMPLEHOOKS_DISABLE_PLUGINS`` say (read now, when the sampler is created).
    ``strict_plugins`` turns plugin-fault isolation off. ``retry`` governs transport retries
    of transient backend failures; they never consume ``loop_budget``. ``attempt_timeout``
    bounds each backend call (a timeout is transient: retried under ``retry``).
    ``plugin_timeout`` bounds each async hook implementation; one that overruns is
    cancelled and treated like a plugin that raised. It also bounds each event of a
    ``@background`` observer (default
    :data:`~sampling_core.hooks.background.DEFAULT_TIMEOUT_S` there): one still running
    then is a reported fault, and nothing waits for it. ``max_loop_budget``,
    ``max_concurrency_budget`` and ``max_attempts_per_call`` (their product, default
    :data:`~sampling_core.engine.budgets.DEFAULT_MAX_ATTEMPTS_PER_CALL`) cap what a call may ask
    for, so one call's memory is bounded. ``background_queue_size`` bounds the queue of
    ``@background`` observers' events (when full, sampling waits for room).

    Registration is live: ``sampler.plugins.register(obj)`` / ``.unregister(name_or_obj)``
    (or registration on ``sampler.plugins.manager``) take effect from the next call. Use
    ``async with Sampler(...)`` or ``await sampler.aclose()`` to release the backend and
    wait for every background event to be delivered.
    ``check_timeout`` (default
    :data:`DEFAULT_CHECK_TIMEOUT_S`, ``None`` for none) bounds each requirement check: a
    check that runs longer fails, with the reason (an async one is cancelled then).
    ``cache`` (a file path, or a :class:`~sampling_core.backends.cache_store.ResponseCache`)
    is a response cache: a backend call asked again (the same body sent to the same model
    and server, seed included) is answered from it, without a call, marked ``cached``; an
    unusable file raises :class:`~sampling_core.backends.cache_keys.CacheError` here. It is
    kept by the built-in plugin ``cache`` (on ``generation_call``), registered on this
    sampler under that name, which the sampler's :attr:`cache` is the file of.
    """

    def __init__(
        self,
        backend: Backend | None = None,
        *,
        plugins: Iterable[PluginSpec] = (),
        load_entrypoints: bool = True,
        strict_plugins: bool = False,
        retry: RetryPolicy | None = None,
        attempt_timeout: float | None = None,
        plugin_timeout: float | None = None,
        check_timeout: float | None = DEFAULT_CHECK_TIMEOUT_S,
        max_loop_budget: int = DEFAULT_MAX_LOOP_BUDGET,
        max_concurrency_budget: int = DEFAULT_MAX_CONCURRENCY_BUDGET,
        max_attempts_per_call: int = DEFAULT_MAX_ATTEMPTS_PER_CALL,
        background_queue_size: int = DEFAULT_BACKGROUND_QUEUE,
        cache: str | os.PathLike[str] | ResponseCache | None = None,
    ) -> None:
        if backend is not None and not callable(getattr(backend, "generate", None)):
            raise TypeError(
                f"backend {backend!r} has no generate(request) method; "
                "see sampling_core.backends.Backend"
            )
        self.backend = backend
        self.strict_plugins = strict_plugins
        self.retry = retry or RetryPolicy()
        self.attempt_timeout = _positive_or_none("attempt_timeout", attempt_timeout)
        self.plugin_timeout = _positive_or_none("plugin_timeout", plugin_timeout)
        self.check_timeout = _positive_or_none("check_timeout", check_timeout)
        self.max_loop_budget = check_budget("max_loop_budget", max_loop_budget, 10**9, "the caller")
        self.max_concurrency_budget = check_budget(
            "max_concurrency_budget", max_concurrency_budget, 10**9, "the caller"
        )
        self.max_attempts_per_call = check_budget(
            "max_attempts_per_call", max_attempts_per_call, 10**12, "the caller"
        )
        self.caps = BudgetCaps(
            self.max_loop_budget, self.max_concurrency_budget, self.max_attempts_per_call
        )
        self.settings = PluginSettings.from_env()
        self.background = BackgroundDelivery(background_queue_size, timeout=self.plugin_timeout)
        self.plugins = PluginRegistry(
            strict=strict_plugins,
            settings=self.settings,
            timeout=self.plugin_timeout,
            delivery=self.background,
        )
        if load_entrypoints:
            self.plugins.load_entrypoints()
        for plugin in plugins:
            self.plugins.add(plugin)
        self.cache: ResponseCache | None = None
        self._own_cache = False
        if cache is not None:
            # SQLite is imported by samplers with a cache only: a larger heap would cost
            # every sampler's garbage collections (benchmarks.instructions sees it)
            from sampling_core.backends.cache_store import ResponseCache

            self._own_cache = not isinstance(cache, ResponseCache)
            self.cache = ResponseCache(cache) if self._own_cache else cache  # type: ignore[arg-type]
            try:  # given in code: registered whatever SAMPLEHOOKS_DISABLE_PLUGINS says
                keeper = resolve_plugin((CACHE_PLUGIN, {"path": self.cache}))
                assert keeper is not None
                self.plugins.register(keeper.plugin, CACHE_PLUGIN)
            except BaseException:
                if self._own_cache:
                    self.cache.close()
                raise

    async def aclose(self) -> None:
        """Deliver every queued background event, then free the backend's resources (and
        close the response cache this sampler opened)."""
        await self.background.adrain()
        await aclose_backend(self.backend)
        if self._own_cache and self.cache is not None:
            self.cache.close()
            self.cache = None

    @property
    def background_faults(self) -> list[PluginFault]:
        """Faults of ``@background`` observers (they are also logged as ``plugin.error``)."""
        return self.background.faults

    async def __aenter__(self) -> Sampler:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def register(self, plugin: PluginSpec, name: str | None = None) -> str | None:
        """Register one more plugin for every later call; returns its name."""
        return self.plugins.add(plugin, name)

    async def sample(
        self,
        prompt: Prompt,
        *,
        requirements: Iterable[Requirement | Check] = (),
        strategy: Strategy | None = None,
        loop_budget: int = 1,
        concurrency_budget: int = 1,
        plugins: Iterable[PluginSpec] | None = None,
        seed: int | None = None,
        selection: Selection = "first",
        options: dict[str, Any] | None = None,
        format: Format | None = None,
        backend: Backend | None = None,
        early_exit: bool = True,
        row: Mapping[str, Any] | None = None,
        prompt_key: str | None = None,
        early_stop: bool = True,
        launch: Launch = "all",
        stagger_s: float = DEFAULT_STAGGER_S,
        ask_again: bool = False,
    ) -> SamplingResult:
        """Sample until an answer to ``prompt`` meets every requirement, or the budget is spent.

        ``prompt`` is a string (one user message) or a list of chat messages. Up to
        ``concurrency_budget`` subsamples run at once, each making up to ``loop_budget``
        attempts. ``plugins`` given here see this call only. ``seed`` derives a distinct,
        reproducible seed for every (subsample, attempt). ``selection="ordered"`` picks the
        passing attempt first in (attempt, subsample_index) order, the same on every run
        with a seeded backend. ``format`` is a pydantic model (or a JSON schema, as a dict)
        the answer must parse as; the parsed value is ``result.value``, and backends that
        can constrain their decoding to the schema do. With ``early_exit=False`` a passing
        attempt does not cancel its siblings: every subsample runs until it passes or spends
        its ``loop_budget``, and the pick is made as usual. ``row`` is the dataset line
        checks see as ``CheckContext.row`` (a batch run passes each prompt's line), and
        ``prompt_key`` the key every payload of the call carries as ``prompt_key`` (a batch
        run passes each prompt's key; ``None`` outside a run).
        Spending fewer tokens: with ``early_stop`` (the default) a streamed generation
        stops as soon as a requirement's prefix check says the text so far cannot pass
        (``max_words``, ``max_chars``, ``not_contains``; the attempt fails and the strategy
        goes on). ``launch`` says when the subsamples start: ``"all"`` at once,
        ``"staggered"`` (subsample i ``i * stagger_s`` seconds after the first, unless the
        call is decided by then) or ``"on_failure"`` (the next one each time a running one
        fails an attempt or ends). With ``ask_again``, the call's backend calls are asked
        again (``generation_call``'s ``payload.ask_again``): the sampler's response cache
        answers none of them, and their answers replace the stored ones; what
        ``--retry-failed`` does for a prompt it samples again.

        A failed answer is not an error: it is a result with ``success=False``. Attempts
        whose backend call failed are in ``result.errors`` when other attempts completed,
        and plugin faults in observe-only hooks are in ``result.plugin_errors``.

        Raises:
            BudgetError: ``loop_budget`` or ``concurrency_budget`` is not an int >= 1 within
                the sampler's caps, as given or as a ``sampling_loop_start`` plugin set it
                (a ``ValueError``; the message names the field, the value and who set it).
            TypeError: no backend, a backend without ``generate``, a ``strategy`` that is
                not a ``Strategy``, a ``seed`` that is not an int.
            ValueError: an unknown ``selection``, a prompt that is an empty list or holds a
                message without ``role`` and ``content``.
            PluginError: a plugin in ``plugins`` could not be loaded (a name nothing is
                installed under: the message suggests the closest one), or a plugin failed
                in a hook whose changes it may make (such hooks fail closed), or in any hook
                when the sampler has ``strict_plugins=True``.
            CacheError: with a response cache, when no attempt completed because the
                backend says nothing of its model (see
                :func:`~sampling_core.backends.cache_keys.cache_identity`).
            Exception: when no attempt completed, the first backend exception, with its
                own type (e.g. ``httpx.ConnectError``, ``ModelNotFoundError``).
        """
        chosen = backend or self.backend
        if chosen is None:
            raise TypeError("no backend: give Sampler(backend) or sample(..., backend=...)")
        if not callable(getattr(chosen, "generate", None)):
            raise TypeError(f"backend {chosen!r} has no generate(request) method")
        self.caps.check(loop_budget, concurrency_budget)
        if selection not in ("first", "ordered"):
            raise ValueError(f'selection must be "first" or "ordered", not {selection!r}')
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed must be an int or None, not {type(seed).__name__}")
        if prompt_key is not None and not isinstance(prompt_key, str):
            raise TypeError(f"prompt_key must be a str or None, not {type(prompt_key).__name__}")
        if not isinstance(early_exit, bool):
            raise TypeError(f"early_exit must be a bool, not {type(early_exit).__name__}")
        tokens = DEFAULT_TOKENS
        if (
            early_stop is not True
            or launch != "all"
            or stagger_s is not DEFAULT_STAGGER_S
            or format is not None
        ):
            tokens = token_settings(early_stop, launch, stagger_s, format)
        strategy = strategy if strategy is not None else _DEFAULT_STRATEGY
        if not isinstance(strategy, Strategy):
            raise TypeError(f"strategy must be a Strategy, not {type(strategy).__name__}")
        checks = as_requirements(requirements)
        if format is not None:
            checks = (*checks, format_requirement(format))
        table = self.plugins.with_call_plugins(plugins) if plugins else self.plugins.hooks()
        sampling_id = new_sampling_id()
        call = SamplingCall(
            CallSettings(
                sampling_id=sampling_id,
                backend=chosen,
                messages=_as_messages(prompt),
                requirements=checks,
                strategy=strategy,
                loop_budget=loop_budget,
                concurrency_budget=concurrency_budget,
                selection=selection,
                seed=seed,
                options=asked_options(checks, options or {}),
                format=format,
                retry=self.retry,
                attempt_timeout=self.attempt_timeout,
                caps=self.caps,
                early_exit=bool(early_exit),
                check_timeout=self.check_timeout,
                row=row,
                tokens=tokens,
            ),
            CallHooks(table, sampling_id, strategy.name, prompt_key, bool(ask_again)),
        )
        return await call.run()

    def sample_sync(self, prompt: Prompt, **kwargs: Any) -> SamplingResult:
        """Run :meth:`sample` to completion from synchronous code.

        Returns once every background event of the call has been delivered too; after a
        Ctrl-C it says what it waits for, and a second Ctrl-C stops the waiting for a stuck
        observer (see :meth:`~sampling_core.hooks.background.BackgroundDelivery.drain`).
        """
        interrupted = False
        try:
            return run_sync(partial(self.sample, prompt, **kwargs))
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            self.background.drain(interrupted)


_ids = random.Random()  # seeded from os.urandom; never the caller's global random state
if hasattr(os, "register_at_fork"):  # a forked child must not repeat its parent's ids
    os.register_at_fork(after_in_child=_ids.seed)


def new_sampling_id() -> str:
    """A new call's ``sampling_id``: 16 random hex digits."""
    return _ids.getrandbits(64).to_bytes(8).hex()


def _positive_or_none(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a finite number of seconds > 0 or None, got {value!r}")
    return float(value)


CACHE_PLUGIN = "cache"
"""The built-in plugin that keeps a sampler's response cache (``Sampler(cache=...)``)."""

_DEFAULT_STRATEGY = RejectionSampling()  # strategies hold no per-call state


def _as_messages(prompt: Prompt) -> list[Message]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    messages = [dict(m) for m in prompt]
    if not messages:
        raise ValueError("prompt is an empty list of messages")
    for i, m in enumerate(messages):
        if "role" not in m or "content" not in m:
            raise ValueError(f"prompt message {i} needs 'role' and 'content' keys, got {m!r}")
    return messages


def run_sync(call: Any) -> SamplingResult:
    running = running_event_loop()
    if running is not None:
        raise RuntimeError(
            f"sample_sync() was called inside a running {running} event loop; "
            "use `await sample(...)` there instead"
        )
    return anyio.run(call)
