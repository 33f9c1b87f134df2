"""From config to engine objects: the backend, the strategy, requirements, plugins, seeds."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sampling_core.backends import ScriptedBackend
from sampling_core.errors import PluginError
from sampling_core.plugins import PluginSpec
from sampling_core.requirements import REQUIREMENTS_BY_NAME, Requirement
from sampling_core.runs.config import BackendConfig, RequirementSpec, RunConfig, StrategyConfig
from sampling_core.runs.errors import ConfigError
from sampling_core.sampler import Sampler
from sampling_core.strategies import (
    STRATEGIES_BY_NAME,
    MultiTurn,
    RejectionSampling,
    RepairTemplate,
    Strategy,
)

__all__ = [
    "build_backend",
    "build_requirements",
    "build_sampler",
    "build_strategy",
    "prompt_seed",
]


def build_requirements(specs: Iterable[RequirementSpec]) -> list[Requirement]:
    """The requirement each spec names, built with :mod:`sampling_core.requirements`."""
    out = []
    for spec in specs:
        build = REQUIREMENTS_BY_NAME[spec.kind]
        out.append(build() if spec.kind == "is_json" else build(spec.argument))
    return out


def build_strategy(config: StrategyConfig) -> Strategy:
    """The strategy named in the config."""
    cls = STRATEGIES_BY_NAME.get(config.name, RejectionSampling)
    if cls in (RepairTemplate, MultiTurn):
        return cls(config.template, keep_failures=config.keep_failures)
    return cls(keep_failures=config.keep_failures)


def build_backend(config: RunConfig) -> Any:
    """The backend the config names; real backends are imported only when asked for."""
    b: BackendConfig = config.backend
    if b.kind == "scripted":
        return ScriptedBackend(list(b.replies or []), latency=b.latency_s)
    if b.kind == "local":
        cls = _real_backend("LocalBackend", "local")
        at_once = (  # prompts at once in this process: a Ray worker's, or the local run's
            config.run.ray.calls_per_worker
            if config.run.executor == "ray"
            else config.run.max_concurrent_prompts
        )
        parallel = b.parallel or at_once * config.budgets.concurrency_budget
        args: tuple[Any, ...] = (b.model_path,)
        kwargs: dict[str, Any] = {"parallel": parallel}
    else:
        cls = _real_backend("OpenAIBackend", "openai")
        args = (b.model,)
        kwargs = {
            "base_url": b.base_url,
            "api_key_env": b.api_key_env,
            "max_in_flight": b.max_in_flight,
            "rpm": b.rpm,
        }
    try:
        return cls(*args, timeout=b.timeout_s, **kwargs)
    except Exception as exc:  # a missing model file, a bad value: the user's to fix
        raise ConfigError(f"backend: cannot set up the {b.kind!r} backend: {exc}") from exc


def _real_backend(name: str, extra: str) -> Any:
    try:
        from sampling_core import backends

        return getattr(backends, name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"backend.kind {extra!r} is not available here ({type(exc).__name__}: {exc}); "
            f"install it with: pip install 'samplehooks[{extra}]'"
        ) from exc


def plugin_specs(
    names: Sequence[str], events_file: Path, total: int = 0, recorder: Any = None
) -> list[PluginSpec]:
    """What the config's plugin names become.

    ``recorder`` writes into the run directory (``events.jsonl``), or is the ``recorder``
    object given; ``progress`` gets one bar over the ``total`` prompts to run; other names
    are resolved by the plugin registry.
    """
    out: list[PluginSpec] = []
    for name in names:
        built = None
        if name == "recorder" and recorder is not None:
            built = recorder
        elif name == "recorder":
            built = _builtin("builtin_plugins.recorder", "RecorderPlugin", events_file)
        elif name == "progress":
            built = _builtin("builtin_plugins.progress", "ProgressPlugin", total=total)
        out.append(built if built is not None else name)
    return out


def _builtin(module: str, cls_name: str, *args: Any, **kwargs: Any) -> Any:
    try:
        cls = getattr(importlib.import_module(module), cls_name)
    except (ImportError, AttributeError):
        return None
    return cls(*args, **kwargs)


def build_sampler(
    backend: Any,
    names: Sequence[str],
    events_file: Path,
    extra: Iterable[PluginSpec] = (),
    total: int = 0,
    recorder: Any = None,
) -> Sampler:
    """One sampler for the whole run, with exactly the configured plugins (and ``extra``).

    Entry points are not loaded implicitly, so a resumed run sees the same plugins.
    """
    try:
        return Sampler(
            backend,
            plugins=[*plugin_specs(names, events_file, total, recorder), *extra],
            load_entrypoints=False,
        )
    except PluginError as exc:
        raise ConfigError(f"plugins: {exc}") from exc


def close_plugins(sampler: Sampler) -> None:
    """Release what the run's plugins hold: ``close()`` files, ``stop()`` the progress bar."""
    for name in sampler.plugins.names():
        plugin = sampler.plugins.get(name)
        for method in ("stop", "close") if name == "progress" else ("close",):
            release = getattr(plugin, method, None)
            if callable(release):
                with contextlib.suppress(Exception):
                    release()


def prompt_seed(seed: int | None, key: str) -> int | None:
    """A prompt's own seed, derived from the run's seed and the prompt's key."""
    if seed is None:
        return None
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
