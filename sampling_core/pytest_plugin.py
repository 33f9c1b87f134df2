"""samplehooks' pytest plugin (the ``pytest11`` entry point): fixtures, imported lazily.

pytest imports every installed plugin at the start of every session, in every project
where samplehooks is installed. This module imports pytest alone; a fixture's body
imports the engine (:mod:`sampling_core.testing`) the first time a test asks for it, so
sessions that use none of these fixtures pay nothing for them.

The fixtures are plain (synchronous) ones: they work in async tests run by anyio's pytest
plugin and by pytest-asyncio, in its strict and its auto mode alike. See
:mod:`sampling_core.testing` for what each one gives.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["hook_recorder", "plugin_env", "sampler", "scripted_backend", "strict_plugins"]

STRICT_INI = "samplehooks_strict_plugins"


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ``samplehooks_strict_plugins`` ini option (see the ``strict_plugins`` fixture)."""
    parser.addini(
        STRICT_INI,
        "samplehooks' sampler fixture builds strict samplers: a plugin fault fails the test",
        type="bool",
        default=False,
    )


@pytest.fixture
def strict_plugins(pytestconfig: pytest.Config) -> bool:
    """Whether the ``sampler`` fixture's samplers are strict (the ini option; override to set).

    A strict sampler raises :class:`~sampling_core.PluginError` out of ``sample()`` when a
    plugin raises in any hook, so a plugin that fails on every event fails its tests.
    """
    return bool(pytestconfig.getini(STRICT_INI))


@pytest.fixture
def hook_recorder() -> Any:
    """A fresh :class:`~sampling_core.testing.HookRecorder` (``sampler`` registers it)."""
    from sampling_core.testing import HookRecorder

    return HookRecorder()


@pytest.fixture
def scripted_backend() -> Any:
    """A factory of scripted backends: :func:`~sampling_core.testing.make_scripted_backend`."""
    from sampling_core.testing import make_scripted_backend

    return make_scripted_backend


@pytest.fixture
def plugin_env(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The ``SAMPLEHOOKS_*`` variables cleared for this test, with setters."""
    from sampling_core.testing import make_plugin_env

    return make_plugin_env(monkeypatch)


@pytest.fixture
def sampler(hook_recorder: Any, strict_plugins: bool) -> Any:
    """A factory of samplers for tests: :func:`~sampling_core.testing.make_sampler_factory`."""
    from sampling_core.testing import make_sampler_factory

    return make_sampler_factory(hook_recorder, strict_plugins)
