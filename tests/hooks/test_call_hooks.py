"""The call hooks (``sampling_call``, ``generation_call``): wrappers, sync and async, around
plain implementations around the engine's work; a plugin answering for the backend."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from typing import Any

import anyio
import pytest

from hook_specs import CALL_HOOKS, Generation, HookName, StopSampling, hookimpl
from sampling_core import GenerationRequest, PluginError, Sampler, ScriptedBackend
from sampling_core.backends import Chunk

pytestmark = pytest.mark.anyio


class SyncAround:
    """Sync wrappers on both call hooks, counting entries and exits (``finally``)."""

    def __init__(self) -> None:
        self.entered: Counter[str] = Counter()
        self.exited: Counter[str] = Counter()
        self.seen: list[Any] = []

    @hookimpl(wrapper=True)
    def sampling_call(self, payload: Any) -> Any:
        self.entered["sampling_call"] += 1
        try:
            result = yield
            self.seen.append(result)
            return result
        finally:
            self.exited["sampling_call"] += 1

    @hookimpl(wrapper=True)
    def generation_call(self, payload: Any) -> Any:
        self.entered["generation_call"] += 1
        try:
            return (yield)
        finally:
            self.exited["generation_call"] += 1


class AsyncAround:
    """Async wrappers on both call hooks, leaving through ``async with`` and ``finally``."""

    def __init__(self) -> None:
        self.entered: Counter[str] = Counter()
        self.exited: Counter[str] = Counter()
        self.closed: Counter[str] = Counter()

    def _context(self, hook: str) -> Any:
        owner = self

        class Closing:
            async def __aenter__(self) -> None:
                owner.entered[hook] += 1

            async def __aexit__(self, *exc: object) -> None:
                owner.closed[hook] += 1

        return Closing()

    @hookimpl(wrapper=True)
    async def sampling_call(self, payload: Any) -> Any:
        async with self._context("sampling_call"):
            try:
                yield
            finally:
                self.exited["sampling_call"] += 1

    @hookimpl(wrapper=True)
    async def generation_call(self, payload: Any) -> Any:
        async with self._context("generation_call"):
            try:
                yield
            finally:
                self.exited["generation_call"] += 1


class InFlight:
    """Backend calls that wait until ``count`` of them have begun."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.begun = 0
        self.all_begun = anyio.Event()

    async def begin(self) -> None:
        self.begun += 1
        if self.begun == self.count:
            self.all_begun.set()
        await self.all_begun.wait()


def balanced(*plugins: Any) -> None:
    for plugin in plugins:
        assert plugin.entered == plugin.exited, type(plugin).__name__
        if isinstance(plugin, AsyncAround):
            assert plugin.closed == plugin.entered


# -- outcomes ------------------------------------------------------------------------------


async def test_a_sync_wrapper_gets_the_result_at_its_yield_and_may_replace_it() -> None:
    class Upper:
        @hookimpl(wrapper=True)
        def generation_call(self, payload: Any) -> Any:
            generation = yield
            return Generation(generation.text.upper(), generation.usage)

    around = SyncAround()
    sampler = Sampler(ScriptedBackend(["yes"]), plugins=[Upper(), around], load_entrypoints=False)
    result = await sampler.sample("q", requirements=[lambda t: t == "YES"])
    assert result.success and result.text == "YES"
    assert around.seen == [result]  # the sampling_call wrapper saw the very result
    balanced(around)


async def test_an_async_wrapper_replaces_the_outcome_with_force_result() -> None:
    class Replace:
        @hookimpl(wrapper=True)
        async def generation_call(self, payload: Any) -> Any:
            outcome = yield
            await anyio.sleep(0)
            outcome.force_result(Generation(outcome.get_result().text + "!"))

    sampler = Sampler(ScriptedBackend(["yes"]), plugins=[Replace()], load_entrypoints=False)
    result = await sampler.sample("q")
    assert result.text == "yes!"


async def test_wrappers_nest_in_pluggys_order_outermost_first() -> None:
    order: list[str] = []

    def wrapper(name: str, **opts: Any) -> Any:
        class Named:
            @hookimpl(wrapper=True, **opts)
            def generation_call(self, payload: Any) -> Any:
                order.append(f"enter {name}")
                result = yield
                order.append(f"leave {name}")
                return result

        Named.__name__ = name
        return Named()

    plugins = [wrapper("first", tryfirst=True), wrapper("a"), wrapper("b")]
    plugins.append(wrapper("last", trylast=True))
    sampler = Sampler(ScriptedBackend(["x"]), plugins=plugins, load_entrypoints=False)
    await sampler.sample("q")
    assert order == [
        "enter first", "enter b", "enter a", "enter last",
        "leave last", "leave a", "leave b", "leave first",
    ]  # fmt: skip


async def test_a_sync_wrapper_may_turn_a_backend_error_into_an_answer() -> None:
    class Fallback:
        @hookimpl(wrapper=True)
        def generation_call(self, payload: Any) -> Any:
            try:
                return (yield)
            except ValueError:
                return Generation("fallback")

    def broken(request: GenerationRequest) -> str:
        raise ValueError("down")

    sampler = Sampler(ScriptedBackend(broken), plugins=[Fallback()], load_entrypoints=False)
    result = await sampler.sample("q")
    assert result.text == "fallback" and result.errors == []


async def test_a_wrapper_that_returns_nothing_fails_closed_naming_it() -> None:
    class Forgot:
        @hookimpl(wrapper=True)
        def generation_call(self, payload: Any) -> Any:
            yield  # no `return`: the outcome would be None

    sampler = Sampler(ScriptedBackend(["x"]), plugins=[Forgot()], load_entrypoints=False)
    left = "'Forgot' failed in generation_call: the wrapper left NoneType"
    with pytest.raises(PluginError, match=left):
        await sampler.sample("q")


# -- answering for the backend ------------------------------------------------------------


class Replay:
    """Answers the prompts it knows (plain, firstresult); the backend answers the rest."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    @hookimpl
    def generation_call(self, payload: Any) -> Generation | None:
        known = self.answers.get(payload.messages[-1]["content"])
        return None if known is None else Generation(known)


async def test_a_plugin_that_returns_a_generation_answers_instead_of_the_backend() -> None:
    calls: list[str] = []

    def backend(request: GenerationRequest) -> str:
        calls.append(request.prompt)
        return "from the model"

    around = AsyncAround()
    sampler = Sampler(
        ScriptedBackend(backend), plugins=[Replay({"known": "replayed"}), around],
        load_entrypoints=False,
    )  # fmt: skip
    known = await sampler.sample("known")
    unknown = await sampler.sample("new")
    assert (known.text, known.attempts[0].generation.answered_by) == ("replayed", "Replay")
    assert (unknown.text, unknown.attempts[0].generation.answered_by) == ("from the model", None)
    assert calls == ["new"]  # the backend was called only for what the plugin did not know
    balanced(around)  # the wrappers wrap the answering plugin too


async def test_a_streamed_call_may_be_answered_with_chunks_that_prefix_checks_read() -> None:
    from sampling_core import Requirement

    class Chunks:
        @hookimpl
        async def generation_call(self, payload: Any) -> Any:
            assert payload.streamed

            async def pieces() -> Any:
                for word in ["one ", "two ", "three ", "four"]:
                    yield Chunk(word)
                yield Generation("one two three four")

            return pieces()

    seen: list[str] = []

    class Listen:
        @hookimpl
        def generation_chunk(self, payload: Any) -> None:
            seen.append(payload.delta)

    short = Requirement("two words at most", lambda t: len(t.split()) <= 2,
                        prefix=lambda t: len(t.split()) <= 2)  # fmt: skip
    sampler = Sampler(ScriptedBackend(["never"]), plugins=[Chunks(), Listen()],
                      load_entrypoints=False)  # fmt: skip
    result = await sampler.sample("q", requirements=[short])
    (attempt,) = result.attempts
    assert attempt.stopped_early and attempt.text == "one two three "
    assert attempt.generation.answered_by == "Chunks" and seen == ["one ", "two ", "three "]


async def test_a_per_call_plugin_may_wrap_and_answer() -> None:
    around = AsyncAround()
    sampler = Sampler(ScriptedBackend(["model"]), load_entrypoints=False)
    result = await sampler.sample("known", plugins=[around, Replay({"known": "replayed"})])
    assert result.text == "replayed" and result.attempts[0].generation.answered_by == "Replay"
    assert around.entered == {"sampling_call": 1, "generation_call": 1}
    balanced(around)


# -- registration -------------------------------------------------------------------------


@pytest.mark.parametrize("hook", sorted(set(HookName.per_call()) - CALL_HOOKS))
@pytest.mark.parametrize("kind", ["wrapper", "hookwrapper"])
async def test_wrappers_are_refused_on_every_other_hook_naming_the_call_hooks(
    hook: HookName, kind: str
) -> None:
    def impl(self: Any, payload: Any) -> Any:
        yield

    impl.__name__ = hook.value
    plugin = type("Wraps", (), {hook.value: hookimpl(**{kind: True})(impl)})()
    with pytest.raises(PluginError, match="generation_call and sampling_call") as refused:
        Sampler(ScriptedBackend(["x"]), plugins=[plugin], load_entrypoints=False)
    assert f"plugin 'Wraps' failed in {hook.value}" in str(refused.value)
    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False)
    with pytest.raises(PluginError, match="generation_call and sampling_call"):
        await sampler.sample("q", plugins=[plugin])


def test_a_call_hook_refuses_old_style_wrappers_background_and_unmarked_async_generators() -> None:
    from hook_specs import background

    class OldStyle:
        @hookimpl(hookwrapper=True)
        def generation_call(self, payload: Any) -> Any:
            yield

    class Background:
        @hookimpl
        @background
        def generation_call(self, payload: Any) -> None:
            pass

    class Unmarked:
        @hookimpl
        async def sampling_call(self, payload: Any) -> Any:
            yield

    class NotAGenerator:
        @hookimpl(wrapper=True)
        def sampling_call(self, payload: Any) -> None:
            pass

    for plugin, says in [
        (OldStyle(), "use @hookimpl(wrapper=True)"),
        (Background(), "@background is refused on a call hook"),
        (Unmarked(), "mark it @hookimpl(wrapper=True)"),
        (NotAGenerator(), "generator function"),
    ]:
        with pytest.raises(PluginError, match=said(says)):
            Sampler(ScriptedBackend(["x"]), plugins=[plugin], load_entrypoints=False)


def said(text: str) -> str:
    import re

    return re.escape(text)


# -- every wrapper leaves once, whatever ends the call -------------------------------------


async def test_wrappers_leave_once_on_a_backend_error() -> None:
    def broken(request: GenerationRequest) -> str:
        raise ValueError("down")

    plugins = SyncAround(), AsyncAround()
    sampler = Sampler(ScriptedBackend(broken), plugins=list(plugins), load_entrypoints=False)
    with pytest.raises(ValueError, match="down"):
        await sampler.sample("q", concurrency_budget=3)
    assert plugins[0].entered == {"sampling_call": 1, "generation_call": 3}
    balanced(*plugins)


@pytest.mark.parametrize("stop", [False, True], ids=["sibling succeeds", "plugin stops"])
async def test_wrappers_leave_once_when_a_sibling_succeeds_or_a_plugin_stops(stop: bool) -> None:
    class Stopper:
        @hookimpl
        def generation_post_call(self, payload: Any) -> None:
            if stop:
                raise StopSampling("enough")

    calls = InFlight(4)

    async def reply(request: GenerationRequest) -> str:
        await calls.begin()  # every call is in flight before the first answers
        if request.iteration.subsample_index > 0:
            await anyio.sleep_forever()
        return "yes"

    plugins = SyncAround(), AsyncAround()
    sampler = Sampler(ScriptedBackend(reply), plugins=[*plugins, Stopper()], load_entrypoints=False)
    with anyio.fail_after(10):
        result = await sampler.sample(
            "q", requirements=[lambda t: t == "yes"], concurrency_budget=4
        )
    assert result.stop_reason == ("stopped_by_plugin" if stop else "success")
    assert plugins[0].entered == {"sampling_call": 1, "generation_call": 4}
    balanced(*plugins)


async def test_wrappers_leave_once_when_the_caller_cancels() -> None:
    calls = InFlight(2)

    async def reply(request: GenerationRequest) -> str:
        await calls.begin()
        await anyio.sleep_forever()
        return "never"

    plugins = SyncAround(), AsyncAround()
    sampler = Sampler(ScriptedBackend(reply), plugins=list(plugins), load_entrypoints=False)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: sampler.sample("q", concurrency_budget=2))
            await calls.all_begun.wait()  # both subsamples' calls began
            group.cancel_scope.cancel()
    assert plugins[0].entered == {"sampling_call": 1, "generation_call": 2}
    balanced(*plugins)


CHILD = """
import sys, anyio
from hook_specs import hookimpl
from sampling_core import Sampler, ScriptedBackend

log, begun = [], []

class Around:
    @hookimpl(wrapper=True)
    def sampling_call(self, payload):
        try:
            return (yield)
        finally:
            log.append("sampling_call")

    @hookimpl(wrapper=True)
    async def generation_call(self, payload):
        try:
            yield
        finally:
            log.append("generation_call")

async def reply(request):
    begun.append(1)
    if request.iteration.subsample_index == 1:
        while len(begun) < 3:  # every call began
            await anyio.sleep(0)
        raise KeyboardInterrupt
    await anyio.sleep_forever()

async def main():
    sampler = Sampler(ScriptedBackend(reply), plugins=[Around()], load_entrypoints=False)
    await sampler.sample("q", concurrency_budget=3)

try:
    anyio.run(main, backend=sys.argv[1])
except KeyboardInterrupt:
    print(sorted(log))
"""


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_wrappers_leave_once_on_ctrl_c(loop: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, loop], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(["generation_call"] * 3 + ["sampling_call"])


# -- generation_cancelled ------------------------------------------------------------------


class Cancellations:
    def __init__(self) -> None:
        self.payloads: list[Any] = []

    @hookimpl
    def generation_cancelled(self, payload: Any) -> None:
        self.payloads.append(payload)


class StreamedCancellations(Cancellations):
    @hookimpl
    def generation_chunk(self, payload: Any) -> None:
        """Listening to chunks makes the calls stream."""


class HalfStreamed:
    """Subsample 1 streams two words, then hangs; subsample 0 answers once it has."""

    def __init__(self) -> None:
        self.streamed_two = anyio.Event()

    async def generate(self, request: GenerationRequest) -> Generation:
        raise AssertionError("the calls stream")

    async def stream(self, request: GenerationRequest) -> Any:
        from hook_specs import Usage

        if request.iteration.subsample_index == 0:
            await self.streamed_two.wait()
            yield Generation("yes")
            return
        yield Chunk("one ", Usage(5, 1))
        yield Chunk("two", Usage(5, 2))
        self.streamed_two.set()
        await anyio.sleep_forever()


async def test_a_call_cut_short_by_a_sibling_says_why_and_what_it_had_generated() -> None:
    seen = StreamedCancellations()
    sampler = Sampler(HalfStreamed(), plugins=[seen], load_entrypoints=False)
    with anyio.fail_after(10):
        result = await sampler.sample("q", requirements=[lambda t: t == "yes"],
                                      concurrency_budget=2)  # fmt: skip
    assert result.success and result.cancelled == 1
    (payload,) = seen.payloads
    assert (payload.subsample_index, payload.reason, payload.text) == (
        1,
        "sibling_succeeded",
        "one two",
    )
    assert (payload.usage.input_tokens, payload.usage.output_tokens) == (5, 2)
    assert payload.latency_s > 0


@pytest.mark.parametrize("how", ["stopped_by_plugin", "caller_cancelled"])
async def test_a_call_cut_short_by_a_stop_or_the_caller_says_so(how: str) -> None:
    calls = InFlight(3)

    async def reply(request: GenerationRequest) -> str:
        await calls.begin()
        if request.iteration.subsample_index == 0 and how == "stopped_by_plugin":
            return "answered"
        await anyio.sleep_forever()
        return "never"

    class Stop:
        @hookimpl
        def generation_post_call(self, payload: Any) -> None:
            raise StopSampling("enough")

    seen = Cancellations()
    sampler = Sampler(ScriptedBackend(reply), plugins=[seen, Stop()], load_entrypoints=False)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: sampler.sample("q", concurrency_budget=3))
            if how == "caller_cancelled":
                await calls.all_begun.wait()
                group.cancel_scope.cancel()
    expected = 2 if how == "stopped_by_plugin" else 3
    assert [p.reason for p in seen.payloads] == [how] * expected
    # not streamed: what was generated is unknown, never zero
    assert all(p.text is None and p.usage.output_tokens is None for p in seen.payloads)


async def test_a_wrapper_that_swallows_an_error_without_an_answer_fails_closed() -> None:
    class Swallow:
        @hookimpl(wrapper=True)
        def generation_call(self, payload: Any) -> Any:
            try:
                return (yield)
            except ValueError:
                return None  # neither an answer nor the error

    def broken(request: GenerationRequest) -> str:
        raise ValueError("down")

    sampler = Sampler(ScriptedBackend(broken), plugins=[Swallow()], load_entrypoints=False)
    with pytest.raises(PluginError, match="'Swallow' failed in generation_call"):
        await sampler.sample("q")


async def test_sync_and_async_wrappers_nest_by_registration_as_pluggy_orders_them() -> None:
    order: list[str] = []

    class SyncW:
        @hookimpl(wrapper=True)
        def generation_call(self, payload: Any) -> Any:
            order.append("sync")
            return (yield)

    class AsyncW:
        @hookimpl(wrapper=True)
        async def generation_call(self, payload: Any) -> Any:
            order.append("async")
            yield

    class AsyncFirst:
        @hookimpl(wrapper=True, tryfirst=True)
        async def generation_call(self, payload: Any) -> Any:
            order.append("async tryfirst")
            yield

    # registered: async, sync, async tryfirst: called tryfirst, then last registered first
    plugins = [AsyncW(), SyncW(), AsyncFirst()]
    await Sampler(ScriptedBackend(["x"]), plugins=plugins, load_entrypoints=False).sample("q")
    assert order == ["async tryfirst", "sync", "async"]
    order.clear()
    plugins = [SyncW(), AsyncW()]
    await Sampler(ScriptedBackend(["x"]), plugins=plugins, load_entrypoints=False).sample("q")
    assert order == ["async", "sync"]


async def test_no_wrapper_machinery_runs_when_no_plugin_implements_a_call_hook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sampling_core.hooks import channel

    ran: list[str] = []

    def counted(hook: str, *args: Any) -> Any:
        ran.append(hook)
        return real(hook, *args)

    real = channel.call_around
    monkeypatch.setattr(channel, "call_around", counted)

    class PointHooksOnly:
        @hookimpl
        def generation_pre_call(self, payload: Any) -> None:
            pass

        @hookimpl
        def sampling_iteration(self, payload: Any) -> None:
            pass

    plain = Sampler(ScriptedBackend(["x"]), plugins=[PointHooksOnly()], load_entrypoints=False)
    await plain.sample("q", loop_budget=2, concurrency_budget=2)
    assert ran == []  # no call hook implemented: no payload, no call loop
    wrapped = Sampler(ScriptedBackend(["x"]), plugins=[SyncAround()], load_entrypoints=False)
    await wrapped.sample("q")
    assert ran == ["sampling_call", "generation_call"]


def test_generation_cancelled_may_be_observed_in_the_background() -> None:
    from hook_specs import background

    seen: list[str] = []

    class Later:
        @hookimpl
        @background
        def generation_cancelled(self, payload: Any) -> None:
            seen.append(payload.reason)

    async def reply(request: GenerationRequest) -> str:
        if request.iteration.subsample_index == 1:
            await anyio.sleep_forever()
        await anyio.lowlevel.checkpoint()  # subsample 1's call has begun by then
        return "yes"

    sampler = Sampler(ScriptedBackend(reply), plugins=[Later()], load_entrypoints=False)
    result = sampler.sample_sync("q", requirements=[lambda t: t == "yes"], concurrency_budget=2)
    assert result.success and seen == ["sibling_succeeded"]  # delivered before sample_sync returned


async def test_the_call_payloads_are_read_only_all_the_way_down() -> None:
    from hook_specs import ReadOnlyFieldError

    class Meddles:
        @hookimpl(wrapper=True)
        def sampling_call(self, payload: Any) -> Any:
            with pytest.raises(ReadOnlyFieldError):
                payload.messages[0]["content"] = "changed"
            with pytest.raises(ReadOnlyFieldError):
                payload.options["temperature"] = 2.0
            return (yield)

        @hookimpl(wrapper=True)
        def generation_call(self, payload: Any) -> Any:
            with pytest.raises(ReadOnlyFieldError):
                payload.messages.append({"role": "user", "content": "more"})
            return (yield)

    seen: list[Any] = []

    def reply(request: GenerationRequest) -> str:
        seen.append((request.messages, request.options))
        return "x"

    sampler = Sampler(ScriptedBackend(reply), plugins=[Meddles()], load_entrypoints=False)
    await sampler.sample("hello", options={"temperature": 0.5})
    assert seen == [([{"role": "user", "content": "hello"}], {"temperature": 0.5})]
