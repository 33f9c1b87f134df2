"""The response cache is the built-in plugin ``cache`` on ``generation_call``, and the call's
payload says what a plugin answering for the backend needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hook_specs import ReadOnlyFieldError, hookimpl
from hook_specs.records import STOPPED_EARLY, Generation
from sampling_core import Sampler, ScriptedBackend
from sampling_core.backends import CacheError, GenerationRequest
from sampling_core.requirements import Requirement, max_words

pytestmark = pytest.mark.anyio


async def test_the_cache_is_the_builtin_plugin_cache_and_names_itself_on_a_hit(
    tmp_path: Path,
) -> None:
    backend = ScriptedBackend(["an answer"])
    async with Sampler(backend, cache=tmp_path / "c.sqlite", load_entrypoints=False) as sampler:
        assert sampler.plugins.names() == ["cache"]
        assert sampler.plugins.hooks_of("cache") == ["generation_call"]
        first = await sampler.sample("q", seed=1)
        hit = (await sampler.sample("q", seed=1)).attempts[0]
    assert first.attempts[0].generation.answered_by is None  # the backend answered
    assert backend.calls == 1 and hit.cached and hit.generation.answered_by == "cache"
    assert hit.generation.entry and hit.text == "an answer"

    # an ordinary plugin: named like any other, on a sampler given no cache
    other = ScriptedBackend(["an answer"])
    spec = ("cache", {"path": tmp_path / "c.sqlite"})
    async with Sampler(other, plugins=[spec], load_entrypoints=False) as by_name:
        again = await by_name.sample("q", seed=1)
        by_name.plugins.get("cache").close()
    assert (other.calls, again.cached_calls, again.attempts[0].generation.answered_by) == (
        0,
        1,
        "cache",
    )


class Answers:
    """Answers every call instead of the backend."""

    @hookimpl
    def generation_call(self, payload: Any) -> str:
        return "from the plugin"


class Replaces:
    """An outer wrapper that replaces every generation it is given."""

    @hookimpl(wrapper=True, tryfirst=True)
    def generation_call(self, payload: Any) -> Any:
        generation = yield
        return Generation(f"replaced {generation.text}")


async def test_the_cache_keeps_only_what_the_backend_answered(tmp_path: Path) -> None:
    """It stands in for the backend, innermost: a plugin that answers first is not
    overruled, and neither its answer nor an outer wrapper's replacement is kept."""
    backend = ScriptedBackend(["the model's"])
    async with Sampler(backend, cache=tmp_path / "c.sqlite", load_entrypoints=False) as sampler:
        answered = await sampler.sample("q", seed=1, plugins=[Answers()])
        assert answered.text == "from the plugin" and backend.calls == 0
        replaced = await sampler.sample("q", seed=1, plugins=[Replaces()])
        assert replaced.text == "replaced the model's" and backend.calls == 1
        plain = await sampler.sample("q", seed=1)
    assert (plain.text, plain.cached_calls, backend.calls) == ("the model's", 1, 1)


class Sees:
    """Keeps each ``generation_call`` payload."""

    def __init__(self) -> None:
        self.payloads: list[Any] = []

    @hookimpl
    def generation_call(self, payload: Any) -> None:
        self.payloads.append(payload)


async def test_the_payload_says_what_a_plugin_answering_for_the_backend_needs() -> None:
    backend, seen = ScriptedBackend(["one two"]), Sees()
    sampler = Sampler(backend, plugins=[seen], load_entrypoints=False)
    short = max_words(5)
    await sampler.sample("q", requirements=[short, Requirement("any", bool)], seed=4)
    await sampler.sample("q", early_stop=False, requirements=[short], ask_again=True)
    streamed, whole = seen.payloads
    assert streamed.backend is backend and streamed.json_schema is None
    assert streamed.messages == [{"role": "user", "content": "q"}]
    assert streamed.prefix_checks == {short} and not streamed.ask_again
    with pytest.raises(ReadOnlyFieldError, match=r"messages\[0\]"):
        streamed.messages[0]["content"] = "changed"
    dumped = streamed.model_dump()
    assert "backend" not in dumped and "prefix_checks" not in dumped and "ask_again" in dumped
    assert whole.prefix_checks == frozenset() and whole.ask_again  # not streamed: none judge it
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    await sampler.sample("q", format=schema)
    assert seen.payloads[-1].json_schema == schema


class AnswersCut:
    """Answers a streamed call with a whole generation that early stop cut."""

    @hookimpl
    def generation_call(self, payload: Any) -> Generation:
        assert payload.streamed
        return Generation("abc z", finish_reason=STOPPED_EARLY)


async def test_a_whole_answer_stopped_early_is_judged_by_the_prefix_checks() -> None:
    """Whoever answers (the cache replaying a cut answer, or any plugin), a generation that
    arrives stopped early in a streamed call is judged by the prefix checks in force."""
    no_z = Requirement("no z", lambda text: True, prefix=lambda text: "z" not in text)
    sampler = Sampler(ScriptedBackend(["never asked"]), load_entrypoints=False)
    result = await sampler.sample("q", requirements=[no_z], plugins=[AnswersCut()])
    (attempt,) = result.attempts
    assert attempt.stopped_early and attempt.generation.answered_by == "AnswersCut"
    assert not attempt.passed
    assert attempt.validations[0].reason == (
        "Stopped early: the answer so far can no longer meet 'no z'."
    )


async def test_named_without_options_it_opens_the_users_cache_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SAMPLEHOOKS_PLUGINS=cache`` (or listing it: ``samplehooks plugins``) makes it with no
    options: no file is made until a call uses it, then the user's cache folder holds it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("SAMPLEHOOKS_PLUGINS", "cache")
    backend = ScriptedBackend(["kept"])
    async with Sampler(backend) as sampler:
        assert sampler.plugins.names() == ["cache"] and not (tmp_path / "xdg").exists()
        await sampler.sample("q", seed=1)
        again = await sampler.sample("q", seed=1)
        sampler.plugins.get("cache").close()
    assert (tmp_path / "xdg" / "samplehooks" / "responses.sqlite").is_file()
    assert again.cached_calls == 1 and backend.calls == 1


async def test_a_backend_that_says_nothing_of_its_model_is_refused_in_one_clear_error(
    tmp_path: Path,
) -> None:
    class Anonymous:
        calls = 0

        async def generate(self, request: Any) -> str:
            self.calls += 1
            return "?"

    backend = Anonymous()
    async with Sampler(backend, cache=tmp_path / "c.sqlite", load_entrypoints=False) as sampler:
        with pytest.raises(CacheError, match=r"cannot tell the models of backend .*Anonymous"):
            await sampler.sample("q", seed=1)
    assert backend.calls == 0


async def test_a_checks_own_backend_is_cached_when_it_says_its_model_and_asked_when_not(
    tmp_path: Path,
) -> None:
    class Anonymous:
        calls = 0

        async def generate(self, request: Any) -> str:
            self.calls += 1
            return "yes"

    named, anonymous = ScriptedBackend(["yes"], model="judge"), Anonymous()

    def judged_by(judge: Any) -> Requirement:
        async def check(text: str, context: Any) -> bool:
            request = GenerationRequest([{"role": "user", "content": f"Good? {text}"}])
            verdict = await context.generate(request, judge)
            return bool(verdict.text == "yes")

        return Requirement("the judge approves", check)

    async with Sampler(
        ScriptedBackend(["an answer"]), cache=tmp_path / "c.sqlite", load_entrypoints=False
    ) as sampler:
        for _ in range(2):
            for judge in (named, anonymous):
                result = await sampler.sample("q", requirements=[judged_by(judge)], seed=1)
                assert result.success
    assert (named.calls, anonymous.calls) == (1, 2)  # the named judge's answer was kept
