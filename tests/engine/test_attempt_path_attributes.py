"""The objects the attempt path reads keep their state on the instance.

CPython reads an attribute found in an instance's slots (or its own ``__dict__``) quickly;
a default left on the class, or a ``property``, takes its slow lookup on every read. Two
such reads per attempt (``Tally.over`` as a property, ``SamplingCall``'s defaults as class
attributes) once cost about 3 k of the engine's 75 k instructions per attempt
(``python -m benchmarks.instructions``). These tests keep the class of mistake out.
"""

from __future__ import annotations

import inspect
import types

import pytest

from hook_specs.records import Attempt, IterationInfo, Usage, ValidationResult
from sampling_core.engine.loop import SamplingCall
from sampling_core.engine.settings import CallSettings, TokenSettings
from sampling_core.engine.tally import Tally
from sampling_core.hooks.call_hooks import CallHooks
from sampling_core.hooks.table import HookImplementation, Route
from sampling_core.requirements.checks import Requirement

ATTEMPT_PATH = (
    SamplingCall,
    Tally,
    CallHooks,
    CallSettings,
    TokenSettings,
    Route,
    HookImplementation,
    Requirement,
    IterationInfo,
    Attempt,
    Usage,
    ValidationResult,
)


@pytest.mark.parametrize("cls", ATTEMPT_PATH, ids=lambda cls: cls.__name__)
def test_it_has_slots(cls: type) -> None:
    assert "__slots__" in vars(cls), f"{cls.__name__} keeps its state in a __dict__"


def _class_data(cls: type) -> dict[str, object]:
    """What the class itself holds that an instance read would find on the class: values
    that are neither functions, slots, nor the class's own machinery."""
    found = {}
    for klass in cls.__mro__[:-1]:  # object's own attributes are not ours
        for name, value in vars(klass).items():
            if name.startswith("__") and name.endswith("__"):
                continue
            if isinstance(
                value,
                types.FunctionType | types.MemberDescriptorType | classmethod | staticmethod,
            ):
                continue
            found.setdefault(name, value)
    return found


@pytest.mark.parametrize("cls", [SamplingCall, Tally, CallHooks], ids=lambda cls: cls.__name__)
def test_the_engine_reads_no_default_or_property_from_the_class(cls: type) -> None:
    """The engine's own per-call objects: every attribute is set in ``__init__``, and what
    is computed once is computed there (no ``property`` read per attempt)."""
    allowed = {"usage", "not_started"}  # Tally: read once per call, at its end
    found = {
        name: value
        for name, value in _class_data(cls).items()
        if name not in allowed and not inspect.isroutine(value)
    }
    assert found == {}, f"{cls.__name__} has class-level data read through instances: {found}"
