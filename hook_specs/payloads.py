"""The payload of every hook: one pydantic model per hook.

Every hook takes a single argument, ``payload``, so fields can be added later without
breaking plugins. Writing a field the hook does not allow raises
:class:`~hook_specs.errors.ReadOnlyFieldError` at once, naming the field and the hook.
Writable fields accept whatever a plugin writes; the engine validates the values after the
hook ran and names the plugin that wrote a bad one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_serializer

from hook_specs.errors import ReadOnlyFieldError
from hook_specs.names import HookName
from hook_specs.records import Generation, Message, Usage, ValidationResult

_RETRY_DOC = "0 for the first backend call of the attempt, n for its n-th transport retry."

StopReason = Literal["success", "budget_exhausted", "stopped_by_plugin", "error"]


class HookPayload(BaseModel):
    """Fields every payload carries."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    hook: ClassVar[HookName]
    writable: ClassVar[frozenset[str]] = frozenset()

    sampling_id: str = Field(
        description="Identifies the `sample()` call; shared by all its events."
    )
    strategy_name: str = Field(description="The strategy's name, e.g. `RejectionSampling`.")

    # Which plugin is running now, and which plugin last wrote each writable field:
    # set by the dispatcher so the engine can name the plugin behind a bad value.
    _active_plugin: str | None = PrivateAttr(default=None)
    _writers: dict[str, str] | None = PrivateAttr(default=None)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            if self.__pydantic_private__ is _READ_ONLY_PRIVATE:  # never write the shared one
                _set(self, "__pydantic_private__", dict(_READ_ONLY_PRIVATE))
            super().__setattr__(name, value)
            return
        if name not in self.writable:
            raise ReadOnlyFieldError(name, self.hook.value, self.writable)
        if self._active_plugin is not None:
            if self._writers is None:
                self._writers = {}
            self._writers[name] = self._active_plugin
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        # A payload's fields are what the hook promises, and its private state may be
        # shared with other payloads: nothing is deleted.
        raise AttributeError(f"{name!r} cannot be deleted from a hook payload")

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
        itself (it becomes the payload's), with everything it needs to know about the class
        looked up in advance. A host that builds payloads in a hot loop keeps it.
        """
        build = _BUILDERS.get(cls)
        if build is None:
            build = _BUILDERS[cls] = _make_builder(cls)
        return build

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        _share_bookkeeping(cls)

    def written_by(self, field: str) -> str | None:
        """The name of the last plugin that wrote ``field`` during this hook, if any."""
        return (self._writers or {}).get(field)


_new = object.__new__
_set = object.__setattr__


# pydantic's per-instance slots, set through their descriptors (faster than setattr).
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_READ_ONLY_PRIVATE: dict[str, Any] = {"_active_plugin": None, "_writers": None}
_BUILDERS: dict[type[HookPayload], Callable[[dict[str, Any]], Any]] = {}


class _SharedUntilSet:
    """One of pydantic's per-instance slots, read as a value shared by the class until set.

    Setting pydantic's three bookkeeping slots is most of the cost of building a payload,
    and for a payload built by its builder they would hold the same values every time: no
    extra fields (payloads forbid them), every field set (the builder is given them all:
    pydantic adds a written field to the set, which already holds it) and, in a read-only
    payload, no private attribute written. So the builder leaves them unset, and reads
    fall back to those shared values. A payload built by validation, copied or unpickled
    has them set, as pydantic does, and reads return its own.
    """

    __slots__ = ("_shared", "_slot")

    def __init__(self, slot: Any, shared: Any) -> None:
        self._slot = slot
        self._shared = shared

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        try:
            return self._slot.__get__(obj, owner)
        except AttributeError:
            return self._unset(obj)

    def _unset(self, obj: Any) -> Any:
        return self._shared

    def __set__(self, obj: Any, value: Any) -> None:
        self._slot.__set__(obj, value)

    def __delete__(self, obj: Any) -> None:
        self._slot.__delete__(obj)


class _CopiedOnFirstRead(_SharedUntilSet):
    """A :class:`_SharedUntilSet` whose shared value a payload copies for itself when first
    read: the set of fields set, which a plugin could change in place through
    ``model_fields_set`` (and pydantic adds to when a field is written).
    """

    __slots__ = ()

    def _unset(self, obj: Any) -> Any:
        own = set(self._shared)
        self._slot.__set__(obj, own)
        return own


def _share_bookkeeping(cls: type[HookPayload]) -> None:
    """Give a payload class's instances shared bookkeeping (see ``_SharedUntilSet``).

    A writable payload keeps its own private attributes (who wrote what).
    """
    shared: dict[str, Any] = {
        "__pydantic_extra__": None,
        "__pydantic_fields_set__": set(cls.model_fields),
    }
    if cls.writable:  # its own, read at slot speed (also under a read-only parent class)
        cls.__pydantic_private__ = BaseModel.__dict__["__pydantic_private__"]
    else:
        shared["__pydantic_private__"] = _READ_ONLY_PRIVATE
    for name, value in shared.items():
        kind = _CopiedOnFirstRead if name == "__pydantic_fields_set__" else _SharedUntilSet
        setattr(cls, name, kind(BaseModel.__dict__[name], value))


def _make_builder(cls: type[HookPayload]) -> Callable[[dict[str, Any]], Any]:
    """``cls``'s :meth:`HookPayload.builder`: what validation would set, set directly.

    Every payload gets all its fields in ``__dict__``; pydantic's bookkeeping is shared by
    the class (see ``_SharedUntilSet``), except a writable payload's private attributes.
    """
    count = len(cls.model_fields)
    defaults = {
        name: info.get_default(call_default_factory=True)
        for name, info in cls.model_fields.items()
        if not info.is_required()
    }
    new, set_dict, set_private, writable = _new, _set_dict, _set_private, bool(cls.writable)

    def build(fields: dict[str, Any]) -> Any:
        if len(fields) != count:
            for name, value in defaults.items():
                fields.setdefault(name, value)
        payload = new(cls)
        set_dict(payload, fields)
        if writable:
            set_private(payload, {"_active_plugin": None, "_writers": None})
        return payload

    return build


class AttemptPayload(HookPayload):
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


class SamplingLoopStartPayload(HookPayload):
    """Payload of ``sampling_loop_start``."""

    hook: ClassVar[HookName] = HookName.SAMPLING_LOOP_START
    writable: ClassVar[frozenset[str]] = frozenset({"loop_budget", "concurrency_budget"})

    loop_budget: int = Field(description="Attempts per subsample. Writable.")
    concurrency_budget: int = Field(description="Subsamples run at once. Writable.")
    messages: list[Message] = Field(description="The prompt, as chat messages.")
    requirements: list[str] = Field(description="The description of every requirement.")
    selection: str = Field(description='How the answer is picked: "first" or "ordered".')
    seed: int | None = Field(default=None, description="The call's base seed, if any.")
    options: dict[str, Any] = Field(description="Generation options of the call.")
    provider_name: str | None = Field(
        default=None,
        description="The backend's `provider_name` (e.g. `openai`, `llama.cpp`), if it has one.",
    )


class SamplingIterationPayload(AttemptPayload):
    """Payload of ``sampling_iteration``."""

    hook: ClassVar[HookName] = HookName.SAMPLING_ITERATION

    generation: Generation = Field(description="What the backend returned.")
    text: str = Field(description="The generated text (`generation.text`).")
    validations: list[ValidationResult] = Field(description="One result per requirement.")
    passed: bool = Field(description="Whether every requirement passed.")
    valid_count: int = Field(description="How many requirements passed.")
    total_count: int = Field(description="How many requirements were checked.")
    latency_s: float = Field(description="Backend latency of this attempt, in seconds.")
    usage: Usage = Field(description="Tokens spent by this attempt's generation.")


class SamplingRepairPayload(AttemptPayload):
    """Payload of ``sampling_repair``: the failed attempt, and the next attempt's messages."""

    hook: ClassVar[HookName] = HookName.SAMPLING_REPAIR
    writable: ClassVar[frozenset[str]] = frozenset({"messages"})

    text: str = Field(description="The failed attempt's text.")
    validations: list[ValidationResult] = Field(description="The failed attempt's checks.")
    failure_reasons: list[str] = Field(description="Why it failed, one line per failed check.")
    next_attempt: int = Field(description="The attempt number the repaired messages are for.")
    messages: list[Message] = Field(
        description="The strategy's messages for the next attempt. Writable."
    )


class SamplingLoopEndPayload(HookPayload):
    """Payload of ``sampling_loop_end``."""

    hook: ClassVar[HookName] = HookName.SAMPLING_LOOP_END

    success: bool = Field(description="Whether the picked attempt passed every requirement.")
    stop_reason: StopReason = Field(
        description='"success", "budget_exhausted", "stopped_by_plugin" or "error".'
    )
    iterations_used: int = Field(description="Completed attempts (generated and validated).")
    cancelled: int = Field(description="Attempts in flight when the loop ended.")
    text: str | None = Field(default=None, description="The picked text, or `None`.")
    usage: Usage = Field(description="Tokens spent by the call, cancelled attempts included.")
    loop_budget: int = Field(description="The loop budget the call ran with.")
    concurrency_budget: int = Field(description="The concurrency budget the call ran with.")
    elapsed_s: float = Field(description="Wall time of the call, in seconds.")
    error_count: int = Field(default=0, description="Attempts that ended in a backend error.")
    exception: BaseException | None = Field(
        default=None, description="On the error path: the exception `sample()` raises."
    )

    @field_serializer("exception")
    def _exception_as_text(self, exc: BaseException | None) -> str | None:
        return None if exc is None else f"{type(exc).__name__}: {exc}"


class GenerationPreCallPayload(AttemptPayload):
    """Payload of ``generation_pre_call``."""

    hook: ClassVar[HookName] = HookName.GENERATION_PRE_CALL
    writable: ClassVar[frozenset[str]] = frozenset({"messages", "options"})

    messages: list[Message] = Field(description="The messages to send. Writable.")
    options: dict[str, Any] = Field(
        description="Generation options (temperature, max_tokens, seed, stop, ...). Writable."
    )
    retry: int = Field(default=0, description=_RETRY_DOC)


class GenerationPostCallPayload(AttemptPayload):
    """Payload of ``generation_post_call``."""

    hook: ClassVar[HookName] = HookName.GENERATION_POST_CALL

    generation: Generation = Field(description="What the backend returned.")
    latency_s: float = Field(description="Backend latency, in seconds.")
    retry: int = Field(default=0, description=_RETRY_DOC)


class GenerationErrorPayload(AttemptPayload):
    """Payload of ``generation_error``."""

    hook: ClassVar[HookName] = HookName.GENERATION_ERROR

    exception: BaseException = Field(description="What the backend call raised.")
    error_type: str = Field(description="The exception's class name.")
    will_retry: bool = Field(description="Whether the transport layer retries this call.")
    retry_in_s: float | None = Field(
        default=None, description="When `will_retry`: the wait before the retry, in seconds."
    )
    retry: int = Field(default=0, description=_RETRY_DOC)

    @field_serializer("exception")
    def _exception_as_text(self, exc: BaseException) -> str:
        return f"{type(exc).__name__}: {exc}"


PAYLOAD_TYPES: dict[HookName, type[HookPayload]] = {
    cls.hook: cls
    for cls in (
        SamplingLoopStartPayload,
        SamplingIterationPayload,
        SamplingRepairPayload,
        SamplingLoopEndPayload,
        GenerationPreCallPayload,
        GenerationPostCallPayload,
        GenerationErrorPayload,
    )
}
"""The payload model of every hook."""
