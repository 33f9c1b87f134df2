"""What every hook payload is: :class:`HookPayload` (writes refused where the hook allows
none, writes credited to the plugin that made them, built without validation by
:meth:`HookPayload.builder`), :class:`ObserveOnlyPayload` (read-only all the way down), and
the identity fields of the per-call payloads (:class:`CallPayload`, :class:`AttemptPayload`).

Every hook takes a single argument, ``payload``, so fields can be added later without
breaking plugins. Writing a field the hook does not allow raises
:class:`~hook_specs.errors.ReadOnlyFieldError` at once, naming the field and the hook.
Writable fields accept whatever a plugin writes; the engine validates the values after the
hook ran and names the plugin that wrote a bad one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from hook_specs.errors import ReadOnlyFieldError
from hook_specs.frozen import read_only
from hook_specs.names import HookName
from hook_specs.records import CachedGeneration, Generation, Usage

__all__ = ["AttemptPayload", "CallPayload", "HookPayload", "ObserveOnlyPayload", "credit_writes"]


class HookPayload(BaseModel):
    """What every payload is: a pydantic model that refuses writes to the fields its hook
    does not let plugins change. Per-call payloads add the call's identity
    (:class:`CallPayload`); run payloads the run's (:class:`RunPayload`)."""

    # Who is writing now, and who last wrote each writable field: the payload's own slots
    # (plain Python attributes, not pydantic fields or private attributes), set through
    # :meth:`track_writes` by whoever calls the implementations.
    __slots__ = ("_writer_now", "_writers")

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    hook: ClassVar[HookName]
    writable: ClassVar[frozenset[str]] = frozenset()
    around: ClassVar[bool] = False
    """Whether the hook is fired *around* a piece of work (a call hook: ``sampling_call``,
    ``generation_call``), so ``@hookimpl(wrapper=True)`` implementations are accepted."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self.writable:
            raise ReadOnlyFieldError(name, self.hook.value, self.writable)
        writer = getattr(self, "_writer_now", None)
        if writer is not None:
            writers = getattr(self, "_writers", None)
            if writers is None:
                writers = {}
                _set(self, "_writers", writers)
            writers[name] = writer
        super().__setattr__(name, value)

    @property
    def model_fields_set(self) -> set[str]:
        """The names of the fields set (every field, for a payload the engine built): this
        payload's own set, which a caller may change without changing any other payload's.

        Payloads built by :meth:`builder` share one set until it is read here (pydantic
        itself only ever adds a name to it, a name it holds): the first read gives this
        payload a copy of its own, through the pickle protocol as the builder does.
        """
        fields_set = super().model_fields_set
        if fields_set is _SHARED_FIELDS_SETS.get(type(self)):
            state = self.__getstate__()
            for key, value in state.items():
                if value is fields_set:
                    state[key] = set(fields_set)
            self.__setstate__(state)
            fields_set = super().model_fields_set
        return fields_set

    def __delattr__(self, name: str) -> None:
        # A payload's fields are what the hook promises: nothing is deleted.
        raise AttributeError(f"{name!r} cannot be deleted from a hook payload")

    def track_writes(self, plugin_name: str | None) -> None:
        """Credit the writes made from now on to ``plugin_name`` (``None``: to nobody).

        The engine calls this before each implementation of a hook that may write, so that
        :meth:`written_by` can name the plugin behind a bad value.
        """
        _set(self, "_writer_now", plugin_name)

    def written_by(self, field: str) -> str | None:
        """The name of the last plugin that wrote ``field`` during this hook, if any."""
        writers = getattr(self, "_writers", None)
        return None if writers is None else writers.get(field)

    @classmethod
    def trusted(cls, **fields: Any) -> Any:
        """Build a payload from values the host already trusts, skipping validation.

        The engine builds several payloads per attempt; validating values it made itself
        would cost more than everything else it does. Plugins never need this.
        """
        return cls.builder()(fields)

    @classmethod
    def builder(cls) -> Callable[[dict[str, Any]], Any]:
        """The fastest way to build many payloads of this class: ``build(fields)``.

        ``build`` is :meth:`trusted` made once for this class, taking the dict of fields
        itself (it becomes the payload's). It uses pydantic's pickle protocol only: a
        template payload made by :meth:`model_construct` gives its state
        (``__getstate__``), and each payload is a new instance restored from a copy of that
        state (``__setstate__``) with the given fields as its ``__dict__``. That costs
        about a tenth of :meth:`model_construct` (see ``docs/benchmarks.md``).
        """
        build = _BUILDERS.get(cls)
        if build is None:
            build = _BUILDERS[cls] = _make_builder(cls)
        return build


_new = object.__new__
_set = object.__setattr__

credit_writes: Callable[[HookPayload, str | None], None] = HookPayload.__dict__[
    "_writer_now"
].__set__
"""``credit_writes(payload, plugin_name)``: :meth:`HookPayload.track_writes` without a Python
call (the slot's own setter), for hosts that deliver several payloads per attempt."""
_BUILDERS: dict[type[HookPayload], Callable[[dict[str, Any]], Any]] = {}
_SHARED_FIELDS_SETS: dict[type[HookPayload], set[str]] = {}
"""The set of the fields set that the payloads a class's builder made share, by class."""


def _make_builder(cls: type[HookPayload]) -> Callable[[dict[str, Any]], Any]:
    """``cls``'s :meth:`HookPayload.builder` (see there)."""
    count = len(cls.model_fields)
    defaults = {
        name: info.get_default(call_default_factory=True)
        for name, info in cls.model_fields.items()
        if not info.is_required()
    }
    template = cls.model_construct(**{name: None for name in cls.model_fields})
    state = template.__getstate__()
    # The one key we fill is Python's own ``__dict__``. The set of the fields set (the
    # state's one set) names every field, as every payload gives every field: the payloads
    # of the class share it (pydantic only ever adds a field's name to it) until
    # ``model_fields_set`` is read, which gives the payload read a set of its own. Copying it
    # for every payload cost 2 k instructions a payload, 13 k an attempt with a plugin.
    for value in state.values():
        if isinstance(value, set):
            _SHARED_FIELDS_SETS[cls] = value
    restore = cls.__setstate__
    new = _new

    order = tuple(cls.model_fields)

    def build(fields: dict[str, Any]) -> Any:
        if len(fields) != count:  # defaults filled in, in the fields' declared order
            given = fields
            for name, value in defaults.items():
                given.setdefault(name, value)
            fields = {name: given[name] for name in order if name in given}
        own = state.copy()
        own["__dict__"] = fields
        payload = new(cls)
        restore(payload, own)
        return payload

    return build


class ObserveOnlyPayload(HookPayload):
    """The payload of a hook that may change nothing: read-only all the way down.

    Reading a field whose value could be changed in place (a list, a dict, a dataclass such
    as ``Generation``) returns a read-only view of it (see :mod:`hook_specs.frozen`), made
    on the first read; a write through it raises ``ReadOnlyFieldError`` naming the path and
    the hook. These payloads are snapshots: the engine never changes them once built, so
    they can be delivered later (background observers) as they are.
    """

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if type(value) in _NESTED:
            cls = type(self)
            names = _FIELD_NAMES.get(cls)
            if names is None:  # read once per class (``model_fields`` is a descriptor)
                names = _FIELD_NAMES[cls] = frozenset(cls.model_fields)
            if name in names:
                value = read_only(value, name, cls.hook.value)
                object.__getattribute__(self, "__dict__")[name] = value
        return value


_NESTED = frozenset({list, dict, tuple, Generation, CachedGeneration, Usage})
"""Types of field values that a plain read would let a plugin change in place."""

_FIELD_NAMES: dict[type, frozenset[str]] = {}
"""Each observe-only payload class's field names."""


class CallPayload(HookPayload):
    """Fields every per-call payload carries: which ``sample()`` call, with which strategy,
    for which dataset prompt."""

    sampling_id: str = Field(
        description="Identifies the `sample()` call; shared by all its events."
    )
    strategy_name: str = Field(description="The strategy's name, e.g. `RejectionSampling`.")
    prompt_key: str | None = Field(
        default=None,
        description="Inside a batch run, the key of the dataset prompt the call samples; "
        "`None` outside a run.",
    )


class AttemptPayload(CallPayload):
    """Fields of every payload fired for one attempt."""

    subsample_index: int = Field(description="0-based index of the subsample.")
    attempt: int = Field(description="1-based attempt number within its subsample.")
    iteration: int = Field(
        description="`subsample_index * loop_budget + attempt`: unique within the call; "
        "not monotonic in event order under concurrency."
    )
    sequence: int | None = Field(
        default=None,
        description="1-based order in which attempts completed within the call "
        "(set once the attempt has completed; `None` before).",
    )
