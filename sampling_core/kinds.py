"""Kinds: the requirements, backends and strategies that plugins provide, by name.

Every installed plugin that is not disabled (``SAMPLEHOOKS_DISABLE_PLUGINS``) is asked,
through the provider hooks ``register_requirements``, ``register_backends`` and
``register_strategies``, what it adds; samplehooks' own kinds arrive the same way, from the
built-in plugin ``kinds``. What they register is usable from Python, ``samplehooks sample``
and a run's YAML alike::

    from sampling_core import kinds

    check = kinds.requirement("max_words", 40)
    backend = kinds.backend("scripted", replies=["Paris"])
    strategy = kinds.strategy("repair", keep_failures=2)

A requirement kind's factory returns a ``Requirement`` (which may carry a prefix check for
early stop: ``Requirement(..., prefix=...)``) or a check callable (its ``prefix`` attribute,
if it has one, is the prefix check). A kind's options are validated by the pydantic model
given to ``register(..., options=Model)``, or else by a model derived from the factory's
signature. A field labelled ``json_schema_extra={"resume": "throughput"}`` (or
``"location"``) may change when a run is resumed; every other option must match.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pluggy
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from hook_specs import specs
from hook_specs.markers import PROJECT_NAME
from sampling_core.errors import SamplehooksError, exception_text
from sampling_core.hooks.accepting import async_wrapper_opts
from sampling_core.hooks.entry_points import PluginSettings, installed_plugins, warn_skipped
from sampling_core.hooks.options import (
    as_kwargs,
    first_problem,
    options_model,
    problem_option,
    signature_of,
)
from sampling_core.requirements.checks import Requirement, as_requirements

__all__ = [
    "AREAS",
    "Kind",
    "KindError",
    "KindRegistry",
    "LOCATION",
    "THROUGHPUT",
    "backend",
    "collect_kinds",
    "default_kinds",
    "requirement",
    "scorer",
    "strategy",
]

Area = Literal["requirement", "backend", "strategy", "scorer"]
AREAS: tuple[Area, ...] = ("requirement", "backend", "strategy", "scorer")
_HOOKS: dict[Area, str] = {
    "requirement": "register_requirements",
    "backend": "register_backends",
    "strategy": "register_strategies",
    "scorer": "register_scorers",
}
_NO_VALUE: Any = object()

THROUGHPUT: Any = Field(json_schema_extra={"resume": "throughput"})
"""Mark an option ``Annotated[int, THROUGHPUT]``: it may change when a run is resumed."""
LOCATION: Any = Field(json_schema_extra={"resume": "location"})
"""Mark an option ``Annotated[str, LOCATION]``: where something is; not compared on resume."""


class KindError(SamplehooksError, ValueError):
    """An unknown kind, a bad option, a factory that raised, a clash: one line to fix.

    ``key`` names what is wrong inside the kind's mapping (an option, ``kind``, the value).
    """

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True)
class Kind:
    """One registered kind: its area, name, factory, the plugin that gave it, its options."""

    area: Area
    name: str
    factory: Callable[..., Any]
    plugin: str
    options: type[BaseModel]
    value: TypeAdapter[Any] | None = None
    """How a requirement's VALUE is validated (``None``: the kind takes no value)."""

    def where(self) -> str:
        """``requirement 'max_words' (plugin 'kinds')``, for messages."""
        return f"{self.area} {self.name!r} (plugin {self.plugin!r})"

    def check_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` validated by the options model, as keyword arguments; or KindError."""
        try:
            validated = self.options.model_validate(dict(options))
        except ValidationError as exc:
            problem = first_problem(exc, self.options)
            raise KindError(f"{self.where()}: {problem}", problem_option(exc)) from None
        return as_kwargs(validated)

    def check_value(self, value: Any) -> Any:
        """A requirement's VALUE validated by the factory's first parameter; or KindError."""
        if self.value is None:
            if value not in (None, True, _NO_VALUE):
                raise KindError(
                    f"{self.where()} takes no value (write `- {self.name}: true`), got {value!r}",
                    self.name,
                )
            return _NO_VALUE
        if value is _NO_VALUE or value is None:
            raise KindError(f"{self.where()} needs a value: `{self.name}: VALUE`", self.name)
        try:
            return self.value.validate_python(value)
        except ValidationError as exc:
            message = exc.errors()[0]["msg"]
            raise KindError(f"{self.where()}: value {value!r}: {message}", self.name) from None

    def label(self, option: str) -> str:
        """How a resume treats ``option``: ``result`` unless the model labels it."""
        info = self.options.model_fields.get(option)
        extra = info.json_schema_extra if info is not None else None
        if isinstance(extra, dict) and extra.get("resume") in ("throughput", "location"):
            return str(extra["resume"])
        return "result"

    def build(self, value: Any = _NO_VALUE, options: Mapping[str, Any] | None = None) -> Any:
        """Validate, then call the factory; what it raises becomes one KindError line."""
        kwargs = self.check_options(options or {})
        args: tuple[Any, ...] = ()
        if self.area == "requirement":
            checked = self.check_value(value)
            args = () if checked is _NO_VALUE else (checked,)
        try:
            built = self.factory(*args, **kwargs)
        except KindError:
            raise
        except Exception as exc:
            raise KindError(
                f"{self.where()}: cannot be set up: {type(exc).__name__}: {exception_text(exc)}"
            ) from exc
        if self.area == "requirement" and not isinstance(built, Requirement):
            if not callable(built):
                raise KindError(
                    f"{self.where()}: the factory returned {built!r}, "
                    "not a Requirement or a check callable"
                )
            shown = self.name if not args else f"{self.name}: {args[0]}"
            # a check callable may carry its prefix check as its ``prefix`` attribute
            built = as_requirements([Requirement(shown, built, getattr(built, "prefix", None))])[0]
        return built


def _value_adapter(factory: Callable[..., Any]) -> TypeAdapter[Any] | None:
    params = list(signature_of(factory).parameters.values())
    if not params or params[0].kind in (params[0].KEYWORD_ONLY, params[0].VAR_KEYWORD):
        return None
    first = params[0]
    annotation = Any if first.annotation is first.empty else first.annotation
    return TypeAdapter(annotation, config=ConfigDict(arbitrary_types_allowed=True))


class _ProviderManager(pluggy.PluginManager):
    """pluggy's manager reading a plugin as the sampler's registry reads it: an async
    ``wrapper=True`` implementation (of a call hook) is no reason to refuse the plugin's
    provider hooks."""

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        """pluggy's reading, an async wrapper handed over as the registry hands it."""
        return async_wrapper_opts(plugin, name, super().parse_hookimpl_opts(plugin, name))


@dataclass(slots=True)
class KindRegistry:
    """The kinds of every area, and what each plugin registered (or why it could not)."""

    kinds: dict[Area, dict[str, Kind]] = field(default_factory=lambda: {a: {} for a in AREAS})
    provided: dict[str, list[tuple[Area, str]]] = field(default_factory=dict)

    def register(
        self,
        area: Area,
        name: str,
        factory: Any,
        *,
        plugin: str,
        options: type[BaseModel] | None = None,
    ) -> None:
        """Add one kind; a clash, a bad name or a non-callable factory is a KindError."""
        if not isinstance(name, str) or not name.strip() or ":" in name:
            raise KindError(f"plugin {plugin!r} registered a {area} with a bad name {name!r}")
        if not callable(factory):
            raise KindError(
                f"plugin {plugin!r} registered {area} {name!r} with {factory!r}, "
                "which is not callable (a factory is a function or a class)"
            )
        if options is not None and not (
            isinstance(options, type) and issubclass(options, BaseModel)
        ):
            raise KindError(
                f"plugin {plugin!r} registered {area} {name!r} with options={options!r}; "
                "options must be a pydantic model class"
            )
        taken = self.kinds[area].get(name)
        if taken is not None:
            raise KindError(
                f"{area} kind {name!r} is registered by two plugins, {taken.plugin!r} and "
                f"{plugin!r}; disable one with SAMPLEHOOKS_DISABLE_PLUGINS={plugin}"
            )
        self.kinds[area][name] = Kind(
            area,
            name,
            factory,
            plugin,
            options or options_model(name, factory, area),
            _value_adapter(factory) if area == "requirement" else None,
        )
        self.provided.setdefault(plugin, []).append((area, name))

    def add_plugin(self, name: str, plugin: Any) -> None:
        """Call ``plugin``'s provider hooks with a ``register`` that knows its ``name``.

        A class is asked as it is (not instantiated), so its provider hooks are
        ``@staticmethod``s; it is built with options only when it is enabled.
        """
        manager = _ProviderManager(PROJECT_NAME)
        manager.add_hookspecs(specs)
        try:
            manager.register(plugin, name)
        except (pluggy.PluginValidationError, ValueError) as exc:
            raise KindError(f"plugin {name!r} cannot be registered: {exception_text(exc)}") from exc
        for area, hook_name in _HOOKS.items():
            caller = getattr(manager.hook, hook_name)
            impls = caller.get_hookimpls()
            if not impls:
                continue
            if isinstance(plugin, type) and any(
                "self" in signature_of(impl.function).parameters for impl in impls
            ):
                raise KindError(
                    f"plugin {name!r}: {hook_name} is an instance method of a class entry "
                    "point; make it a @staticmethod (provider hooks are called on the class)"
                )

            def register(
                kind: str,
                factory: Any,
                options: type[BaseModel] | None = None,
                _area: Area = area,
            ) -> None:
                self.register(_area, kind, factory, plugin=name, options=options)

            try:
                caller(register=register)
            except KindError:
                raise
            except Exception as exc:
                raise KindError(
                    f"plugin {name!r}: {hook_name} raised "
                    f"{type(exc).__name__}: {exception_text(exc)}"
                ) from exc

    # -- reading -------------------------------------------------------------------------

    def names(self, area: Area) -> list[str]:
        """The kinds of ``area``, sorted."""
        return sorted(self.kinds[area])

    def get(self, area: Area, name: str) -> Kind:
        """The kind ``name`` of ``area``; unknown: KindError with the known ones."""
        found = self.kinds[area].get(name)
        if found is not None:
            return found
        known = self.names(area)
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise KindError(
            f"unknown {area} kind {name!r} ({hint}known: {', '.join(known) or 'none'}; "
            "an installed plugin can add more)",
            {"requirement": name, "backend": "kind", "strategy": "name", "scorer": "kind"}[area],
        )

    def requirement(self, kind: str, value: Any = _NO_VALUE, **options: Any) -> Requirement:
        """Build the requirement ``kind`` with ``value`` and options."""
        built: Requirement = self.get("requirement", kind).build(value, options)
        return built

    def backend(self, kind: str, **options: Any) -> Any:
        """Build the backend ``kind`` with options."""
        return self.get("backend", kind).build(options=options)

    def strategy(self, name: str, **options: Any) -> Any:
        """Build the strategy ``name`` with options."""
        from sampling_core.strategies import Strategy

        built = self.get("strategy", name).build(options=options)
        if not isinstance(built, Strategy):
            raise KindError(f"strategy {name!r}: the factory returned {built!r}, not a Strategy")
        return built

    def scorer(self, kind: str, **options: Any) -> Any:
        """Build the scorer ``kind`` with options (a callable of the text, or of the text
        and a ``CheckContext``, returning a number)."""
        built = self.get("scorer", kind).build(options=options)
        if not callable(built):
            raise KindError(f"scorer {kind!r}: the factory returned {built!r}, not a callable")
        return built

    def scorer_spec(self, spec: Any) -> Any:
        """A scorer from a config: ``KIND`` or ``{"kind": KIND, ...options}``."""
        if isinstance(spec, str):
            return self.scorer(spec)
        if isinstance(spec, Mapping) and isinstance(spec.get("kind"), str):
            options = {k: v for k, v in spec.items() if k != "kind"}
            return self.scorer(spec["kind"], **options)
        raise KindError(f"a scorer is KIND or {{kind: KIND, ...options}}, not {spec!r}", "scorer")


def collect_kinds(
    settings: PluginSettings | None = None, extra: Iterable[tuple[str, Any]] = ()
) -> KindRegistry:
    """Ask every installed plugin that is not disabled (built-ins included) for its kinds.

    ``extra`` are ``(name, plugin)`` pairs asked too (plugin objects given in code). An
    entry point that cannot be imported is skipped with a warning, as everywhere; a provider
    hook that misbehaves (raises, registers a non-callable, clashes) is a KindError.
    """
    settings = settings or PluginSettings.from_env()
    registry = KindRegistry()
    # Built-ins first: a clash then names the third-party plugin.
    for entry in sorted(installed_plugins(), key=lambda found: (not found.builtin, found.name)):
        if entry.name in settings.disabled:
            continue
        try:  # the built-in's object when a name clashes; SystemExit & co. isolated too
            plugin = entry.load()
        except Exception as exc:
            warn_skipped(entry.name, exc)
            continue
        if _provides(plugin):
            registry.add_plugin(entry.name, plugin)
    for name, plugin in extra:
        if _provides(plugin):
            registry.add_plugin(name, plugin)
    return registry


def _provides(plugin: Any) -> bool:
    return any(callable(getattr(plugin, hook, None)) for hook in _HOOKS.values())


_default: KindRegistry | None = None
_lock = threading.Lock()


def default_kinds() -> KindRegistry:
    """The kinds of the installed plugins, collected on first use (per process)."""
    global _default
    with _lock:
        if _default is None:
            _default = collect_kinds()
        return _default


def requirement(kind: str, value: Any = _NO_VALUE, **options: Any) -> Requirement:
    """The requirement ``kind`` of the installed plugins: ``requirement("max_words", 40)``."""
    return default_kinds().requirement(kind, value, **options)


def backend(kind: str, **options: Any) -> Any:
    """The backend ``kind`` of the installed plugins: ``backend("openai", model="gpt-4o")``."""
    return default_kinds().backend(kind, **options)


def strategy(name: str, **options: Any) -> Any:
    """The strategy ``name`` of the installed plugins: ``strategy("repair")``."""
    return default_kinds().strategy(name, **options)


def scorer(kind: str, **options: Any) -> Any:
    """The scorer ``kind`` of the installed plugins: ``scorer("mean_confidence")``."""
    return default_kinds().scorer(kind, **options)
