"""samplehooks' testing kit: fixtures for testing plugins without a model.

The fixtures are installed with samplehooks through a ``pytest11`` entry point
(:mod:`sampling_core.pytest_plugin`, which imports this module only when a test uses one),
so in any project where samplehooks is installed they are available with no import or
conftest:

``hook_recorder``
    A :class:`HookRecorder`: a plugin that records every hook call (its payload, a
    snapshot of the payload's fields, and ``current_iteration()`` at that moment).
``scripted_backend``
    A factory of :class:`~sampling_core.ScriptedBackend`: ``scripted_backend(["no", "yes"])``,
    or replies and latencies per subsample: ``scripted_backend({0: ["slow"], 1: ["fast"]},
    latency={0: 0.05})``.
``sampler``
    A factory of :class:`~sampling_core.Sampler` that loads no entry point (so the
    tests see only the plugins they give) and registers ``hook_recorder`` unless told not to.
``plugin_env``
    A :class:`PluginEnv`: the ``SAMPLEHOOKS_*`` variables cleared for the test, with
    helpers to set them.
``strict_plugins``
    Whether ``sampler`` builds strict samplers (a plugin that raises fails the test instead
    of landing in ``result.plugin_errors``): the ``samplehooks_strict_plugins`` ini option
    (``-o samplehooks_strict_plugins=true`` on the command line), off by default. Override
    the fixture to return ``True`` in a test module or ``conftest.py`` to turn it on there.

A typical test::

    from hook_specs import HookName

    def test_my_plugin_sees_every_attempt(sampler, scripted_backend, hook_recorder):
        plugin = MyPlugin()
        s = sampler(scripted_backend(["no", "yes"]), plugins=[plugin])
        result = s.sample_sync("Say yes.", requirements=[lambda t: t == "yes"], loop_budget=2)
        assert result.success
        assert len(hook_recorder.for_hook(HookName.SAMPLING_ITERATION)) == 2
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from hook_specs.contract import CALL_HOOKS
from hook_specs.markers import hookimpl
from hook_specs.names import HookName
from hook_specs.payloads import HookPayload
from hook_specs.records import IterationInfo
from sampling_core.backends.base import GenerationRequest
from sampling_core.backends.scripted import ScriptedBackend
from sampling_core.engine.context import current_iteration
from sampling_core.engine.sampler import Sampler
from sampling_core.hooks.entry_points import PluginSpec

__all__ = [
    "HookEvent",
    "HookRecorder",
    "PluginEnv",
    "make_plugin_env",
    "make_sampler_factory",
    "make_scripted_backend",
]

PLUGIN_ENV_VARS = ("SAMPLEHOOKS_PLUGINS", "SAMPLEHOOKS_DISABLE_PLUGINS", "SAMPLEHOOKS_TRACE_HOOKS")


# -- the recorder -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HookEvent:
    """One hook call as a :class:`HookRecorder` saw it.

    ``payload`` is the payload object itself; ``fields`` is a snapshot of its fields taken
    when the recorder ran (lists and dicts copied one level deep), so later changes by other
    plugins do not rewrite history. ``iteration`` is ``current_iteration()`` at that moment.
    """

    hook: HookName
    payload: HookPayload
    fields: dict[str, Any]
    iteration: IterationInfo | None

    @property
    def name(self) -> str:
        """The hook's name, e.g. ``"sampling_iteration"``."""
        return self.hook.value

    @property
    def sampling_id(self) -> str | None:
        """The ``sample()`` call this event belongs to (``None`` for a run hook's event)."""
        found = self.fields.get("sampling_id")
        return None if found is None else str(found)

    def __getitem__(self, field_name: str) -> Any:
        """The snapshot value of one payload field: ``event["passed"]``."""
        return self.fields[field_name]


class HookRecorder:
    """A plugin that records every hook call, in the order the hooks fired.

    Its implementations are ``trylast``, so registered after the plugins under test it runs
    after them (pluggy calls the later-registered of two ``trylast`` implementations last):
    in the hooks whose payload plugins may change (``sampling_loop_start``,
    ``sampling_validate``, ``sampling_repair``, ``generation_pre_call``), the snapshot shows
    the payload as they left it. Register one on a ``Sampler`` (the ``sampler`` fixture
    does, after the plugins it is given) or per call with ``plugins=[...]``.
    """

    def __init__(self) -> None:
        self.events: list[HookEvent] = []

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[HookEvent]:
        return iter(self.events)

    def __repr__(self) -> str:
        return f"HookRecorder({len(self.events)} events)"

    def clear(self) -> None:
        """Forget every event recorded so far."""
        self.events.clear()

    def names(self, sampling_id: str | None = None) -> list[str]:
        """The hook names, in call order (of one call when ``sampling_id`` is given)."""
        return [event.name for event in self._of_call(sampling_id)]

    def for_hook(self, hook: HookName | str, sampling_id: str | None = None) -> list[HookEvent]:
        """The events of one hook, in call order."""
        wanted = HookName(hook)
        return [event for event in self._of_call(sampling_id) if event.hook is wanted]

    def payloads(self, hook: HookName | str, sampling_id: str | None = None) -> list[Any]:
        """The payload objects of one hook, in call order."""
        return [event.payload for event in self.for_hook(hook, sampling_id)]

    def for_call(self, sampling_id: str) -> list[HookEvent]:
        """Every event of one ``sample()`` call, in call order."""
        return list(self._of_call(sampling_id))

    def sampling_ids(self) -> list[str]:
        """The ``sample()`` calls seen, in the order of their first event."""
        return list(dict.fromkeys(e.sampling_id for e in self.events if e.sampling_id is not None))

    def iterations(self, sampling_id: str | None = None) -> list[int]:
        """The ``iteration`` of every ``sampling_iteration`` event, in delivery order.

        Under concurrency this is not sorted: iteration numbers follow subsample and
        attempt, delivery follows completion.
        """
        return [e["iteration"] for e in self.for_hook(HookName.SAMPLING_ITERATION, sampling_id)]

    def _of_call(self, sampling_id: str | None) -> Iterable[HookEvent]:
        if sampling_id is None:
            return self.events
        return (event for event in self.events if event.sampling_id == sampling_id)

    def _record(self, hook: HookName, payload: HookPayload) -> None:
        snapshot = {name: _copy_one_level(value) for name, value in payload.__dict__.items()}
        self.events.append(HookEvent(hook, payload, snapshot, current_iteration()))


def _recording(hook: HookName) -> Callable[..., Any]:
    """The recorder's implementation of ``hook``: ``trylast`` (after the plugins under test); on
    a call hook a wrapper (the innermost one) that records the call as it begins."""
    if hook in CALL_HOOKS:

        def record_around(self: HookRecorder, payload: HookPayload) -> Any:
            self._record(hook, payload)
            return (yield)

        record_around.__name__ = record_around.__qualname__ = hook.value
        record_around.__doc__ = "Record the call as it begins (a wrapper)."
        return hookimpl(wrapper=True, trylast=True)(record_around)

    def record(self: HookRecorder, payload: HookPayload) -> None:
        self._record(hook, payload)

    record.__name__ = record.__qualname__ = hook.value
    record.__doc__ = "Record the event."
    return hookimpl(trylast=True)(record)


for _hook in HookName.fired():  # every hook fired with a payload: a new hook needs no edit here
    setattr(HookRecorder, _hook.value, _recording(_hook))


def _copy_one_level(value: Any) -> Any:
    if isinstance(value, list):
        return [dict(item) if isinstance(item, dict) else item for item in value]
    if isinstance(value, dict):
        return dict(value)
    return value


# -- backends and samplers --------------------------------------------------------------

Replies = Sequence[str] | Callable[[GenerationRequest], Any] | Mapping[int, Sequence[str]]
Latency = float | Callable[[GenerationRequest], float] | Mapping[int, float]


def make_scripted_backend(
    replies: Replies, *, latency: Latency = 0.0, **kwargs: Any
) -> ScriptedBackend:
    """A :class:`ScriptedBackend`, with two conveniences for concurrency tests.

    ``replies`` may be a mapping from ``subsample_index`` to that subsample's replies, served
    by attempt number (the last one repeats); ``latency`` may be a mapping from
    ``subsample_index`` to seconds (missing subsamples: 0). Anything else is passed to
    ``ScriptedBackend`` as it is.
    """
    if isinstance(replies, Mapping):
        replies = _per_subsample(replies)
    if isinstance(latency, Mapping):
        latency = _latency_per_subsample(latency)
    return ScriptedBackend(replies, latency=latency, **kwargs)


def _per_subsample(table: Mapping[int, Sequence[str]]) -> Callable[[GenerationRequest], str]:
    def reply(request: GenerationRequest) -> str:
        info = request.iteration
        if info is None or info.subsample_index not in table:
            raise LookupError(f"scripted_backend has no replies for {info!r}")
        script = table[info.subsample_index]
        return script[min(info.attempt, len(script)) - 1]

    return reply


def _latency_per_subsample(table: Mapping[int, float]) -> Callable[[GenerationRequest], float]:
    def latency(request: GenerationRequest) -> float:
        info = request.iteration
        return table.get(info.subsample_index, 0.0) if info is not None else 0.0

    return latency


@dataclass(slots=True)
class PluginEnv:
    """The ``SAMPLEHOOKS_*`` plugin variables of one test (cleared at its start).

    They are read when a ``Sampler`` is created, so set them before creating one.
    """

    monkeypatch: pytest.MonkeyPatch
    values: dict[str, str] = field(default_factory=dict)

    def only(self, *names: str) -> None:
        """``SAMPLEHOOKS_PLUGINS``: load only these entry points (none: load none)."""
        self._set("SAMPLEHOOKS_PLUGINS", ",".join(names))

    def disable(self, *names: str) -> None:
        """``SAMPLEHOOKS_DISABLE_PLUGINS``: block these plugins by name."""
        self._set("SAMPLEHOOKS_DISABLE_PLUGINS", ",".join(names))

    def trace_hooks(self, on: bool = True) -> None:
        """``SAMPLEHOOKS_TRACE_HOOKS``: print every hook call to stderr."""
        self._set("SAMPLEHOOKS_TRACE_HOOKS", "1" if on else "0")

    def _set(self, name: str, value: str) -> None:
        self.values[name] = value
        self.monkeypatch.setenv(name, value)


# -- what the fixtures give (registered by sampling_core.pytest_plugin) ---------------


def make_plugin_env(monkeypatch: pytest.MonkeyPatch) -> PluginEnv:
    """The ``plugin_env`` fixture: the ``SAMPLEHOOKS_*`` variables cleared, with setters."""
    for name in PLUGIN_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    return PluginEnv(monkeypatch)


def make_sampler_factory(
    hook_recorder: HookRecorder, strict_plugins: bool = False
) -> Callable[..., Sampler]:
    """The ``sampler`` fixture: a factory of samplers for tests.

    ``sampler(backend=None, *, plugins=(), record=True, load_entrypoints=False, **kwargs)``
    builds ``Sampler(backend, plugins=..., load_entrypoints=False, **kwargs)``: no installed
    plugin is loaded unless asked, so a test sees only its own plugins. With ``record`` the
    test's ``hook_recorder`` is registered after ``plugins``. Without a backend, a scripted
    one answers ``"ok"``. ``strict_plugins`` defaults to the ``strict_plugins`` fixture.
    """

    def build(
        backend: Any = None,
        *,
        plugins: Iterable[PluginSpec] = (),
        record: bool = True,
        load_entrypoints: bool = False,
        **kwargs: Any,
    ) -> Sampler:
        chosen = backend if backend is not None else ScriptedBackend(["ok"])
        given = [*plugins, hook_recorder] if record else list(plugins)
        kwargs.setdefault("strict_plugins", strict_plugins)
        return Sampler(chosen, plugins=given, load_entrypoints=load_entrypoints, **kwargs)

    return build
