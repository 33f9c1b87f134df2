"""An exception whose ``str()`` raises (from a backend or a plugin) is reported as
``<unprintable Type>``: it never replaces the exception it describes, nor breaks isolation."""

from __future__ import annotations

import pytest

from hook_specs import hookimpl
from sampling_core import PluginError, Sampler, ScriptedBackend

pytestmark = pytest.mark.anyio


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for you")


async def test_a_backends_unprintable_exception_is_the_one_raised() -> None:
    backend = ScriptedBackend(["x"], failures={1: Unprintable()})
    with pytest.raises(Unprintable):
        await Sampler(backend, load_entrypoints=False).sample("q")


async def test_an_observers_unprintable_fault_is_isolated() -> None:
    class Observer:
        @hookimpl
        def sampling_iteration(self, payload: object) -> None:
            raise Unprintable

    sampler = Sampler(ScriptedBackend(["x"]), plugins=[Observer()], load_entrypoints=False)
    result = await sampler.sample("q")
    assert result.success
    [fault] = result.plugin_errors
    assert isinstance(fault.exception, Unprintable) and fault.hook == "sampling_iteration"
    assert str(fault) == "Observer, sampling_iteration: <unprintable Unprintable>"


async def test_a_writers_unprintable_fault_fails_closed_with_its_type() -> None:
    class Writer:
        @hookimpl
        def generation_pre_call(self, payload: object) -> None:
            raise Unprintable

    sampler = Sampler(ScriptedBackend(["x"]), plugins=[Writer()], load_entrypoints=False)
    with pytest.raises(PluginError, match=r"Unprintable: <unprintable Unprintable>"):
        await sampler.sample("q")
