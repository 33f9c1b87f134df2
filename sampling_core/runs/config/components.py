"""From config to engine objects: the backend, the strategy, requirements, plugins, seeds."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from sampling_core.backends.cache_store import ResponseCache
from sampling_core.backends.transport import RetryPolicy
from sampling_core.engine.sampler import Sampler
from sampling_core.errors import PluginError, exception_text
from sampling_core.hooks.entry_points import PluginSpec, resolve_plugin
from sampling_core.kinds import KindError, KindRegistry
from sampling_core.requirements.checks import Requirement
from sampling_core.runs.config.config import PluginEntry, RequirementSpec, RunConfig, StrategyConfig
from sampling_core.runs.errors import ConfigError
from sampling_core.strategies import Strategy

__all__ = [
    "Components",
    "build_backend",
    "build_components",
    "check_kinds",
    "build_requirements",
    "build_sampler",
    "build_strategy",
    "prompt_seed",
]


def build_requirements(specs: Iterable[RequirementSpec], kinds: KindRegistry) -> list[Requirement]:
    """The requirement each spec names, built by its kind (one-line KindError otherwise)."""
    return [kinds.requirement(spec.kind, spec.value, **spec.options) for spec in specs]


def build_strategy(config: StrategyConfig, kinds: KindRegistry) -> Strategy:
    """The strategy named in the config, with its options."""
    built: Strategy = kinds.strategy(config.name, **config.options)
    return built


def build_backend(config: RunConfig, kinds: KindRegistry) -> Any:
    """The backend the config names, with its options.

    A kind with a ``parallel`` option left unset gets the calls this process keeps in flight:
    prompts at once (a Ray worker's ``calls_per_worker``, or the local run's
    ``max_concurrent_prompts``) x concurrency budget.
    """
    kind = kinds.get("backend", config.backend.kind)
    options = config.backend.options
    if "parallel" in kind.options.model_fields and options.get("parallel") is None:
        at_once = (
            config.run.ray.calls_per_worker
            if config.run.executor == "ray"
            else config.run.max_concurrent_prompts
        )
        options["parallel"] = at_once * config.budgets.concurrency_budget
    try:
        return kind.build(options=options)
    except KindError as exc:
        raise ConfigError(f"backend: {exception_text(exc)}") from exc


def check_kinds(config: RunConfig, kinds: KindRegistry, where: str = "") -> None:
    """Every kind the config names exists and takes the options given.

    The strategy and the requirements are built (cheap, and what their factories refuse is
    found here); the backend's options are only validated. Raises :class:`ConfigError`
    naming the config key.
    """
    backend = config.backend
    checks: list[tuple[str, Any]] = [
        ("backend", lambda: kinds.get("backend", backend.kind).check_options(backend.options)),
        ("strategy", lambda: build_strategy(config.strategy, kinds)),
    ]
    for index, spec in enumerate(config.requirements):
        checks.append((f"requirements[{index}]", partial(build_requirements, [spec], kinds)))
    for key, check in checks:
        try:
            check()
        except KindError as exc:
            sub = sub_key(exc)
            raise ConfigError(f"{where}{key}{sub}: {exception_text(exc)}") from exc


def sub_key(exc: KindError) -> str:
    """``.OPTION`` (or ``.KIND``, ``.name``) when the error is about one key, else ``""``."""
    return "" if exc.key is None else f".{exc.key}"


def plugin_specs(
    entries: Sequence[PluginEntry | str], events_file: Path, total: int = 0
) -> list[tuple[str, PluginSpec]]:
    """What the config's plugin entries become: each installed plugin, made with its options
    and told about the run, with the name to register it under.

    A plugin (a built-in or a third-party one) may define ``for_run(events_file, total)``:
    it is then configured for this batch run (the ``recorder`` writes into the run
    directory, ``progress`` shows one bar over the ``total`` prompts). The engine knows
    plugins only through this plugin API, never by name.
    """
    out: list[tuple[str, PluginSpec]] = []
    for given in entries:
        entry = PluginEntry.model_validate(given)
        resolved = resolve_plugin((entry.name, dict(entry.options)))
        if resolved is None:  # never: nothing is disabled here (the config says what runs)
            continue
        configure = getattr(resolved.plugin, "for_run", None)
        if callable(configure):
            try:
                configure(events_file=events_file, total=total)
            except Exception as exc:  # an option the plugin cannot honour in a run
                raise ConfigError(f"plugins: {resolved.name!r}: {exception_text(exc)}") from exc
        out.append((resolved.name, resolved.plugin))
    return out


def build_sampler(
    backend: Any,
    names: Sequence[PluginEntry],
    events_file: Path,
    extra: Iterable[PluginSpec] = (),
    total: int = 0,
    config: RunConfig | None = None,
    cache: ResponseCache | None = None,
) -> Sampler:
    """One sampler for the whole run, with exactly the configured plugins (and ``extra``),
    and the config's retry policy, call and check timeouts and response cache (``cache`` when the
    caller opened it, else ``run.cache`` by its path).

    Entry points are not loaded implicitly, so a resumed run sees the same plugins.
    """
    settings: dict[str, Any] = {}
    if config is not None:
        retries = config.backend.retries
        settings["retry"] = RetryPolicy(
            max_retries=retries.max_retries,
            base_delay=retries.base_delay_s,
            max_delay=retries.max_delay_s,
        )
        settings["check_timeout"] = config.check_timeout_s
        settings["attempt_timeout"] = config.attempt_timeout_s
        settings["cache"] = cache if cache is not None else config.run.cache
    try:
        sampler = Sampler(backend, load_entrypoints=False, **settings)
        for name, plugin in plugin_specs(names, events_file, total):
            sampler.plugins.add(plugin, name)
        for plugin in extra:
            sampler.plugins.add(plugin)
    except PluginError as exc:
        raise ConfigError(f"plugins: {exception_text(exc)}") from exc
    return sampler


@dataclass(frozen=True, slots=True)
class Components:
    """What a run samples with, built from its config by :func:`build_components`
    (:func:`~sampling_core.runs.execution.prompt_run.run_prompt` samples one prompt with it)."""

    backend: Any
    strategy: Strategy
    requirements: list[Requirement]
    sampler: Sampler
    config: RunConfig
    kinds: KindRegistry
    options: dict[str, Any]


def build_components(
    config: RunConfig,
    kinds: KindRegistry,
    events_file: Path,
    *,
    backend: Any = None,
    extra_plugins: Iterable[PluginSpec] = (),
    total: int = 0,
    cache: ResponseCache | None = None,
) -> Components:
    """The backend (unless given), strategy, requirements and sampler of a run.

    The one place a run's engine objects are made from its config: the local executor calls
    it once in its process, the Ray executor once in each worker.
    Raises :class:`ConfigError` with one line when a kind or a plugin cannot be built.
    """
    try:
        strategy = build_strategy(config.strategy, kinds)
        requirements = build_requirements(config.requirements, kinds)
    except KindError as exc:
        raise ConfigError(exception_text(exc)) from exc
    chosen = backend if backend is not None else build_backend(config, kinds)
    sampler = build_sampler(
        chosen, config.plugins, events_file, extra_plugins, total, config, cache
    )
    return Components(
        chosen, strategy, requirements, sampler, config, kinds, config.options.as_options()
    )


def close_plugins(sampler: Sampler) -> None:
    """Release what the run's plugins hold: call each one's ``close()``, if it has one."""
    for name in sampler.plugins.names():
        release = getattr(sampler.plugins.get(name), "close", None)
        if callable(release):
            with contextlib.suppress(Exception):
                release()


def prompt_seed(seed: int | None, key: str, retry: int = 0) -> int | None:
    """A prompt's own seed, derived from the run's seed and the prompt's key; for a prompt
    sampled again by ``--retry-failed``, from which time it is too (``retry``: 1 the first
    time), as a seeded model would give a retry with the same seed the very answers that
    failed. ``retry`` 0, the first sampling, gives the seed it always did."""
    if seed is None:
        return None
    # a retry's text starts with "[", a first sampling's with a digit: never the same
    text = json.dumps([seed, key, retry]) if retry else f"{seed}:{key}"
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
