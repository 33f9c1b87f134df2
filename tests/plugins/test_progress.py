"""The progress plugin: bars on a terminal, silence elsewhere."""

from __future__ import annotations

from io import StringIO

import pytest
from rich.console import Console

from builtin_plugins.progress import ProgressPlugin


@pytest.fixture
def strict_plugins() -> bool:
    """The built-in under test runs strict: if it raises in any hook, its tests fail."""
    return True


def never(text: str) -> bool:
    """never passes"""
    return False


def tty() -> tuple[Console, StringIO]:
    out = StringIO()
    return Console(file=out, force_terminal=True, width=100, color_system=None), out


def test_draws_attempts_and_calls_on_a_terminal(sampler, scripted_backend):
    console, out = tty()
    plugin = ProgressPlugin(console=console)
    s = sampler(scripted_backend(["no", "no", "yes"]), plugins=[plugin])
    result = s.sample_sync("q", requirements=[lambda t: t == "yes"], loop_budget=5)
    assert result.iterations_used == 3

    assert plugin.enabled
    assert (plugin.attempts_done, plugin.calls_done, plugin.calls_succeeded) == (3, 1, 1)
    assert plugin._progress is None  # stopped once no call is running
    text = out.getvalue()
    assert "attempts" in text and "calls (1 ok)" in text
    # The unused budget (5 - 3 attempts) is taken off the total at loop end.
    assert "3/3" in text and "1/1" in text


def test_silent_when_not_a_terminal(sampler, scripted_backend):
    out = StringIO()
    plugin = ProgressPlugin(console=Console(file=out))
    assert not plugin.enabled
    s = sampler(scripted_backend(["x"]), plugins=[plugin])
    s.sample_sync("q", requirements=[never], loop_budget=2)
    assert out.getvalue() == ""
    assert plugin.attempts_done == plugin.calls_done == 0
    assert plugin._progress is None


def test_a_batch_total_counts_calls(sampler, scripted_backend):
    console, out = tty()
    plugin = ProgressPlugin(total=3, console=console, description="prompts")
    s = sampler(scripted_backend(["x"]), plugins=[plugin])
    with plugin:
        s.sample_sync("q")
        assert plugin._progress is not None  # a batch keeps the display between calls
        s.sample_sync("q")
        s.sample_sync("q", requirements=[never])
    assert (plugin.calls_done, plugin.calls_succeeded) == (3, 2)
    assert plugin._progress is None
    assert "prompts (2 ok)" in out.getvalue() and "3/3" in out.getvalue()


def test_backend_errors_advance_the_attempts_bar(sampler, scripted_backend):
    console, _ = tty()
    plugin = ProgressPlugin(console=console)
    backend = scripted_backend(["x"], failures={1: RuntimeError("down")})
    s = sampler(backend, plugins=[plugin])
    result = s.sample_sync("q", requirements=[never], concurrency_budget=2)
    assert len(result.errors) == 1 and result.iterations_used == 1
    assert plugin.attempts_done == 2


def test_enabled_by_name(sampler, scripted_backend):
    s = sampler(scripted_backend(["x"]), plugins=["progress"])
    assert isinstance(s.plugins.get("progress"), ProgressPlugin)
