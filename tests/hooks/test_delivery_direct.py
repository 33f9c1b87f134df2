"""Direct and awaited delivery behave alike: what is awaited is decided at registration.

A hook whose implementations are all plain functions (no monitor, no background observer)
is delivered in a plain loop; as soon as one implementation is ``async def`` (or a monitor
watches) the awaiting path runs. A plugin must not be able to tell which one ran.
"""

from __future__ import annotations

import functools
import gc
import warnings

import anyio
import pytest

from hook_specs import hookimpl
from sampling_core import PluginError, Sampler, ScriptedBackend
from sampling_core.hooks.table import is_async_function
from tests.support.engine_helpers import never

pytestmark = pytest.mark.anyio


async def _later(seen: list[str], label: str) -> None:
    await anyio.sleep(0)
    seen.append(label)


class ReturnsAwaitable:
    """A plain function that hands back a coroutine: a plugin bug, reported as a fault."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def sampling_iteration(self, payload):
        return _later(self.seen, "ran")

    @hookimpl
    def generation_pre_call(self, payload):
        return None


class AsyncIteration:
    def __init__(self) -> None:
        self.seen: list[int] = []

    @hookimpl
    async def sampling_iteration(self, payload):
        await anyio.sleep(0)
        self.seen.append(payload.iteration)


@pytest.mark.parametrize("awaited_path", [False, True], ids=["direct", "awaiting"])
async def test_a_plain_function_returning_an_awaitable_is_a_fault_on_both_paths(awaited_path):
    bad = ReturnsAwaitable()
    plugins = [bad, AsyncIteration()] if awaited_path else [bad]
    sampler = Sampler(ScriptedBackend(["x"]), plugins=plugins, load_entrypoints=False)
    table = sampler.plugins.hooks()
    assert table.routes.sampling_iteration.direct is not awaited_path
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a coroutine never awaited would warn when collected
        result = await sampler.sample("q", requirements=[never], loop_budget=2)
        gc.collect()
    assert bad.seen == []  # closed, never run
    assert [(f.plugin_name, f.hook) for f in result.plugin_errors] == [
        ("ReturnsAwaitable", "sampling_iteration"),
        ("ReturnsAwaitable", "sampling_iteration"),
    ]
    message = str(result.plugin_errors[0].exception)
    assert message == (
        "returned coroutine from a plain function; an implementation whose work must be "
        "awaited is declared `async def`"
    )
    assert isinstance(result.plugin_errors[0].exception, TypeError)


async def test_a_plain_function_returning_an_awaitable_fails_closed_where_it_may_write():
    class WritesLater:
        @hookimpl
        def generation_pre_call(self, payload):
            return _later([], "ran")

    sampler = Sampler(ScriptedBackend(["x"]), plugins=[WritesLater()], load_entrypoints=False)
    with pytest.raises(PluginError) as raised:
        await sampler.sample("q")
    assert str(raised.value) == (
        "plugin 'WritesLater' failed in generation_pre_call: TypeError: returned coroutine "
        "from a plain function; an implementation whose work must be awaited is declared "
        "`async def`"
    )


def _logged(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)

    return wrapper


async def test_an_async_implementation_behind_a_wrapping_decorator_is_awaited():
    seen: list[tuple[int, str]] = []

    class Decorated:
        @hookimpl
        @_logged
        async def sampling_iteration(self, payload):
            await anyio.sleep(0)
            seen.append((payload.sequence, payload.text))

    sampler = Sampler(ScriptedBackend(["a", "b"]), plugins=[Decorated()], load_entrypoints=False)
    assert sampler.plugins.hooks().routes.sampling_iteration.direct is False
    result = await sampler.sample("q", requirements=[never], loop_budget=2)
    assert result.plugin_errors == []
    assert seen == [(1, "a"), (2, "b")]


def test_what_counts_as_async():
    async def coroutine_function():
        pass

    def plain():
        pass

    class AsyncCallable:
        async def __call__(self):
            pass

    class PlainCallable:
        def __call__(self):
            pass

    assert is_async_function(coroutine_function)
    assert is_async_function(_logged(coroutine_function))
    assert is_async_function(functools.partial(coroutine_function))
    assert is_async_function(AsyncCallable())
    assert not is_async_function(plain)
    assert not is_async_function(_logged(plain))
    assert not is_async_function(PlainCallable())
    assert not is_async_function(print)


def test_a_route_is_direct_only_when_nothing_can_suspend_it():
    class Plain:
        @hookimpl
        def generation_post_call(self, payload):
            pass

    sampler = Sampler(ScriptedBackend(["x"]), plugins=[Plain()], load_entrypoints=False)
    routes = sampler.plugins.hooks().routes
    assert (
        routes.generation_post_call.direct
        and routes.generation_post_call.inline[0].plugin_name == "Plain"
    )
    assert routes.generation_pre_call.direct and routes.generation_pre_call.inline == ()
    undo = sampler.plugins.add_hookcall_monitoring(lambda *a: None, lambda *a: None)
    assert not sampler.plugins.hooks().routes.generation_post_call.direct  # a monitor watches now
    undo()
    assert sampler.plugins.hooks().routes.generation_post_call.direct


class Bump:
    """An async writer, so its hook is delivered on the awaiting path."""

    @hookimpl
    async def sampling_loop_start(self, payload):
        await anyio.sleep(0)
        payload.loop_budget = 0


async def test_a_write_on_the_awaiting_path_is_credited_to_its_plugin():
    sampler = Sampler(ScriptedBackend(["x"]), plugins=[Bump()], load_entrypoints=False)
    assert not sampler.plugins.hooks().routes.sampling_loop_start.direct
    with pytest.raises(ValueError) as raised:
        await sampler.sample("q")
    assert str(raised.value) == "loop_budget=0 set by plugin 'Bump' is invalid: must be >= 1"


async def test_on_the_awaiting_path_an_implementation_without_payload_and_a_returned_value():
    seen: list[str] = []

    class NoPayload:
        @hookimpl
        def sampling_iteration(self):
            seen.append("no payload")
            return 42  # a value, not an awaitable: nothing to refuse

    plugins = [NoPayload(), AsyncIteration()]
    sampler = Sampler(ScriptedBackend(["x"]), plugins=plugins, load_entrypoints=False)
    assert not sampler.plugins.hooks().routes.sampling_iteration.direct
    result = await sampler.sample("q", requirements=[never], loop_budget=2)
    assert result.plugin_errors == []
    assert seen == ["no payload", "no payload"] and plugins[1].seen == [1, 2]


class Pending:
    """An awaitable without ``close`` (not a coroutine)."""

    def __await__(self):
        yield from ()


@pytest.mark.parametrize("awaited_path", [False, True], ids=["direct", "awaiting"])
async def test_a_returned_awaitable_without_close_is_refused_the_same_way(awaited_path):
    class ReturnsPending:
        @hookimpl
        def sampling_iteration(self, payload):
            return Pending()

    plugins = [ReturnsPending(), AsyncIteration()] if awaited_path else [ReturnsPending()]
    sampler = Sampler(ScriptedBackend(["x"]), plugins=plugins, load_entrypoints=False)
    result = await sampler.sample("q", requirements=[never])
    [fault] = result.plugin_errors
    assert str(fault.exception) == (
        "returned Pending from a plain function; an implementation whose work must be "
        "awaited is declared `async def`"
    )


def test_a_background_plain_function_returning_an_awaitable_is_refused_the_same_way():
    from hook_specs import background

    ran: list[str] = []

    class Later:
        @hookimpl
        @background
        def sampling_iteration(self, payload):
            return _later(ran, "ran")

    sampler = Sampler(ScriptedBackend(["x"]), plugins=[Later()], load_entrypoints=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a coroutine never awaited would warn when collected
        result = sampler.sample_sync("q", requirements=[never])
        gc.collect()
    assert result.plugin_errors == [] and ran == []
    [fault] = sampler.background_faults
    assert (fault.plugin_name, fault.hook) == ("Later", "sampling_iteration")
    assert str(fault.exception) == (
        "returned coroutine from a plain function; an implementation whose work must be "
        "awaited is declared `async def`"
    )


class _Messages(list):
    """A list of messages of a plugin's own kind."""


class _SyncRewrap:
    @hookimpl
    def sampling_repair(self, payload):
        payload.messages = _Messages(payload.messages)


class _AsyncRewrap:
    @hookimpl
    async def sampling_repair(self, payload):
        payload.messages = _Messages(payload.messages)


@pytest.mark.parametrize("plugin", [_SyncRewrap, _AsyncRewrap], ids=["plain", "async"])
async def test_a_repair_may_write_a_list_of_its_own_kind(plugin):
    """The answer of a hook is told from an awaitable by its kind, not its exact type: a
    list subclass written by a plain implementation is the next attempt's messages."""

    def starts_ok(text: str) -> bool:
        """starts with ok"""
        return text.startswith("ok")

    sampler = Sampler(ScriptedBackend(["no", "ok"]), plugins=[plugin()], load_entrypoints=False)
    result = await sampler.sample("q", requirements=[starts_ok], loop_budget=2)
    assert result.success and len(result.attempts) == 2
    assert type(result.attempts[1].messages) is _Messages


def _step(label: str, awaits: bool, bad: bool = False) -> object:
    """A plugin on ``generation_pre_call`` that adds ``label`` to the options it sends
    (after an ``await`` when ``awaits``), or writes a bad ``messages`` when ``bad``."""

    def write(payload) -> None:
        if bad:
            payload.messages = "not a list"
        else:
            payload.options = {**payload.options, "seen": [*payload.options["seen"], label]}

    if awaits:

        async def generation_pre_call(self, payload):
            await anyio.sleep(0)
            write(payload)

    else:

        def generation_pre_call(self, payload):
            write(payload)

    return type(label, (), {"generation_pre_call": hookimpl(generation_pre_call)})()


class SeenBackend:
    def __init__(self) -> None:
        self.options: list[dict] = []

    async def generate(self, request):
        self.options.append(dict(request.options))
        return "x"


async def test_the_loop_goes_on_after_each_async_implementation_in_order():
    # pluggy calls the last registered first: a, b (async), c, d (async), e
    steps = [_step("e", False), _step("d", True), _step("c", False), _step("b", True)]
    steps.append(_step("a", False))
    backend = SeenBackend()
    sampler = Sampler(backend, plugins=steps, load_entrypoints=False)
    assert not sampler.plugins.hooks().routes.generation_pre_call.direct
    result = await sampler.sample("q", options={"seen": []})
    assert result.plugin_errors == []
    assert backend.options == [{"seen": ["a", "b", "c", "d", "e"]}]


async def test_a_bad_write_after_a_second_await_names_its_plugin():
    steps = [_step("late", True, bad=True), _step("plain", False), _step("first", True)]
    sampler = Sampler(SeenBackend(), plugins=steps, load_entrypoints=False)
    with pytest.raises(PluginError) as raised:
        await sampler.sample("q", options={"seen": []})
    assert raised.value.plugin_name == "late"


@pytest.mark.parametrize("awaits", [False, True], ids=["direct", "awaiting"])
@pytest.mark.parametrize(
    ("field", "value"),
    [("messages", "not a list"), ("messages", ["hi", 3]), ("options", "not a dict")],
    ids=["messages", "message items", "options"],
)
async def test_pre_call_fields_of_the_wrong_kind_fail_closed_naming_the_writer(
    field, value, awaits
):
    class Breaks:
        @hookimpl
        def generation_pre_call(self, payload):
            setattr(payload, field, value)

    class BreaksLater:
        @hookimpl
        async def generation_pre_call(self, payload):
            await anyio.sleep(0)
            setattr(payload, field, value)

    plugin = BreaksLater() if awaits else Breaks()
    backend = SeenBackend()
    sampler = Sampler(backend, plugins=[plugin], load_entrypoints=False)
    assert sampler.plugins.hooks().routes.generation_pre_call.direct is not awaits
    with pytest.raises(PluginError) as raised:
        await sampler.sample("q")
    assert raised.value.plugin_name == type(plugin).__name__
    assert f"payload.{field} must be" in str(raised.value)
    assert backend.options == []  # nothing was sent


@pytest.mark.parametrize("awaits", [False, True], ids=["direct", "awaiting"])
async def test_repair_messages_that_are_not_dicts_fail_closed_naming_the_writer(awaits):
    class Breaks:
        @hookimpl
        def sampling_repair(self, payload):
            payload.messages = [*payload.messages, "not a message"]

    class BreaksLater:
        @hookimpl
        async def sampling_repair(self, payload):
            await anyio.sleep(0)
            payload.messages = [*payload.messages, "not a message"]

    plugin = BreaksLater() if awaits else Breaks()
    backend = SeenBackend()
    sampler = Sampler(backend, plugins=[plugin], load_entrypoints=False)
    with pytest.raises(PluginError) as raised:
        await sampler.sample("q", requirements=[never], loop_budget=2)
    assert raised.value.plugin_name == type(plugin).__name__
    assert "payload.messages must be a list of messages (dicts)" in str(raised.value)
    assert len(backend.options) == 1  # the first attempt only: the bad repair was not sent
