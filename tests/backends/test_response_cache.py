"""The response cache: an SQLite file of generations, reused for the same model and request."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import sampling_core
from hook_specs import hookimpl
from sampling_core import Sampler, ScriptedBackend
from sampling_core.backends import CacheError, ResponseCache, cache_identity
from sampling_core.backends.base import can_stream
from sampling_core.backends.cache_store import probe_problem
from sampling_core.cli.app import app
from sampling_core.requirements import Requirement, max_words, not_contains
from sampling_core.runs import ConfigError, load_config, run_batch
from sampling_core.runs.execution.run_cache import shared_cache_problem, with_cache
from tests.support.runs_helpers import records, snapshot, write_config, write_dataset

pytestmark = pytest.mark.anyio


class SeesIterations:
    """Keeps what ``sampling_iteration`` says about each attempt."""

    def __init__(self) -> None:
        self.seen: list[tuple[bool, bool, int]] = []

    @hookimpl
    def sampling_iteration(self, payload: Any) -> None:
        usage = payload.usage
        self.seen.append((payload.cached, payload.generation.cached, usage.output_tokens))


async def test_a_hit_answers_without_a_backend_call_and_spends_no_new_tokens(
    tmp_path: Path,
) -> None:
    backend = ScriptedBackend(["one two three", "four five"])
    watcher = SeesIterations()
    sampler = Sampler(backend, cache=tmp_path / "c.sqlite", plugins=[watcher])
    ask = {"seed": 5, "concurrency_budget": 2, "early_exit": False}
    first = await sampler.sample("Name a colour.", **ask)
    second = await sampler.sample("Name a colour.", **ask)
    await sampler.aclose()

    assert backend.calls == 2  # the second call made none
    assert [a.cached for a in first.attempts] == [False, False]
    assert [a.cached for a in second.attempts] == [True, True]
    assert [a.text for a in second.attempts] == [a.text for a in first.attempts]
    assert (second.usage.input_tokens, second.usage.output_tokens) == (0, 0)
    assert second.usage.cost_usd == 0.0  # nothing was spent: known, not unknown
    assert second.cached_calls == 2 and second.cached_usage == first.usage
    assert (first.cached_calls, first.cached_usage.total_tokens) == (0, 0)
    assert sorted(watcher.seen[2:]) == [(True, True, 0), (True, True, 0)]
    assert all(not cached for cached, _, _ in watcher.seen[:2])


async def test_entries_never_cross_models_seeds_or_samples(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    model_a = ScriptedBackend(["from a"], model="a")
    model_b = ScriptedBackend(["from b"], model="b")
    async with Sampler(model_a, cache=path) as a, Sampler(model_b, cache=path) as b:
        assert (await a.sample("q", seed=1)).text == "from a"
        other_model = await b.sample("q", seed=1)
        assert (other_model.text, other_model.cached_calls) == ("from b", 0)
        other_seed = await a.sample("q", seed=2)
        assert (other_seed.cached_calls, model_a.calls) == (0, 2)
        assert (await a.sample("q", seed=1)).cached_calls == 1
        # without a seed, each sample keeps its own entry: n samples stay n samples
        numbered = ScriptedBackend(lambda request: f"sample {request.iteration.subsample_index}")
        many = {"concurrency_budget": 3, "early_exit": False}
        fresh = await a.sample("r", backend=numbered, **many)
        again = await a.sample("r", backend=numbered, **many)
        assert [x.text for x in again.attempts] == ["sample 0", "sample 1", "sample 2"]
        assert [x.text for x in fresh.attempts] == [x.text for x in again.attempts]
        assert again.cached_calls == 3 and numbered.calls == 3


def test_the_identity_is_the_model_file_or_the_model_and_server() -> None:
    class Local:
        model_path = Path(sampling_core.__file__)
        base_url = "http://127.0.0.1:40123"  # a new port each start: not part of it

    class Served:
        model = "m"
        base_url = "http://host:8000/v1"

    local = cache_identity(Local())
    assert local["model_file"] == str(Path(sampling_core.__file__).resolve())
    assert local["model_file_bytes"] == Path(sampling_core.__file__).stat().st_size
    assert "base_url" not in local
    served = cache_identity(Served())
    assert (served["model"], served["base_url"]) == ("m", "http://host:8000/v1")
    assert served["kind"].endswith("Served") and served["kind"] != cache_identity(Local())["kind"]

    class Own:
        model = "ignored"

        def cache_identity(self) -> dict[str, Any]:
            return {"model": "mine", "options": {"t": 1}}

    assert cache_identity(Own())["options"] == {"t": 1} and "ignored" not in str(
        cache_identity(Own())
    )

    class Anonymous:
        async def generate(self, request: Any) -> str:
            return "?"

    with pytest.raises(CacheError, match=r"cannot tell the models of backend .*Anonymous apart"):
        cache_identity(Anonymous())


async def test_a_damaged_or_foreign_file_is_one_clear_error_naming_it(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database, just some bytes " * 200)
    with pytest.raises(CacheError, match=f"{garbage}.*damaged or not an SQLite file"):
        Sampler(ScriptedBackend(["x"]), cache=garbage)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(CacheError, match=f"{foreign} is an SQLite database of another program"):
        ResponseCache(foreign)
    with sqlite3.connect(foreign) as db:  # and it was left as it was
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["invoices"]

    config = write_config(tmp_path / "c.yaml", write_dataset(tmp_path / "d.jsonl", 2))
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match=f"run.cache: .*{garbage}.*nothing was written"):
        await run_batch(config, tmp_path / "run", cache=garbage)
    assert snapshot(tmp_path) == before and not (tmp_path / "run").exists()
    result = CliRunner().invoke(
        app, ["sample", "q", "--backend", "scripted", "--reply", "a", "--cache", str(garbage)]
    )
    assert result.exit_code == 2 and str(garbage) in result.output
    assert result.output.count("\n") == 1


async def test_a_run_whose_every_call_is_cached_generates_no_tokens(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.yaml",
        write_dataset(tmp_path / "d.jsonl", 5),
        budgets={"loop_budget": 1, "concurrency_budget": 3, "early_exit": False},
        run={"cache": "responses.sqlite"},  # beside the config file
    )
    first = await run_batch(config, tmp_path / "first", backend=ScriptedBackend(["a b"]))
    assert (tmp_path / "responses.sqlite").is_file() and first.cached_calls == 0
    backend = ScriptedBackend(["a b"])  # the same replies: the same identity, a new object
    again = await run_batch(config, tmp_path / "again", backend=backend)
    assert backend.calls == 0
    assert (again.input_tokens, again.output_tokens) == (0, 0)
    assert (again.cached_calls, again.cached_tokens) == (15, first.input_tokens + 30)
    recs = records(tmp_path / "again")
    assert all(e["cached"] is True for r in recs for e in r["attempts"]["each"])
    assert all(r["usage"]["cached"]["calls"] == 3 for r in recs)
    assert "Cached: 15 calls answered from the response cache" in again.render()


async def test_resume_with_a_cache(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 6)
    config = write_config(tmp_path / "c.yaml", dataset)
    cache = tmp_path / "responses.sqlite"
    await run_batch(config, tmp_path / "earlier", cache=cache)  # fills the cache
    out = tmp_path / "run"
    await run_batch(config, out)  # no cache
    lines = (out / "records.jsonl").read_bytes().splitlines(keepends=True)
    (out / "records.jsonl").write_bytes(b"".join(lines[:2]))  # killed after two prompts
    backend = ScriptedBackend(["a short answer"])  # the config's replies: its identity
    summary = await run_batch(config, out, resume=True, cache=cache, backend=backend)
    assert backend.calls == 0 and summary.complete
    resumed = [r for r in records(out) if r["seq"] > 2]
    assert len(resumed) == 4 and all(r["attempts"]["each"][0]["cached"] for r in resumed)
    note = next(
        line
        for line in (out / "effective_config.yaml").read_text().splitlines()
        if "resumed" in line
    )
    assert f'run.cache: null -> "{cache}"' in note  # a throughput change, noted
    assert "cache: " + str(cache) in (out / "effective_config.yaml").read_text()


def test_a_worker_that_does_not_see_the_drivers_file_refuses_the_run(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    token = cache.new_probe()
    assert probe_problem(tmp_path / "c.sqlite", token) is None
    assert probe_problem(tmp_path / "elsewhere.sqlite", token) == (
        f"there is no file {tmp_path / 'elsewhere.sqlite'}"
    )
    other = ResponseCache(tmp_path / "other.sqlite")
    other.new_probe()
    assert "is another file than the driver's" in str(
        probe_problem(tmp_path / "other.sqlite", token)
    )
    assert not (tmp_path / "elsewhere.sqlite").exists()  # looking never creates it
    config = write_config(tmp_path / "x.yaml", write_dataset(tmp_path / "d.jsonl", 1))
    remote = with_cache(load_config(config), tmp_path / "other.sqlite")
    problem = shared_cache_problem(remote, token)
    assert problem is not None and "does not see the driver's response cache" in problem
    assert shared_cache_problem(with_cache(load_config(config), cache.path), token) is None
    cache.close()
    other.close()


async def test_a_cached_answer_whose_usage_was_unknown_stays_unknown(tmp_path: Path) -> None:
    class PlainText:
        model = "plain"
        calls = 0

        async def generate(self, request: Any) -> str:
            self.calls += 1
            return "an answer without usage"  # a plain str: its tokens are unknown

    backend = PlainText()
    async with Sampler(backend, cache=tmp_path / "c.sqlite") as sampler:
        first = await sampler.sample("q", seed=3)
        again = await sampler.sample("q", seed=3)
    assert first.usage.input_tokens is None and backend.calls == 1
    assert again.cached_calls == 1 and again.text == "an answer without usage"
    assert again.cached_usage.input_tokens is None  # never stored or read back as 0
    assert again.usage.total_tokens == 0  # and the hit spent nothing


class SeesChunks:
    """Keeps the pieces ``generation_chunk`` hands out."""

    def __init__(self) -> None:
        self.deltas: list[str] = []

    @hookimpl
    def generation_chunk(self, payload: Any) -> None:
        self.deltas.append(payload.delta)


async def test_with_a_cache_a_call_still_streams_and_a_hit_arrives_whole(tmp_path: Path) -> None:
    backend = ScriptedBackend(["red green blue"])
    chunks = SeesChunks()
    sampler = Sampler(backend, cache=tmp_path / "c.sqlite", plugins=[chunks])
    first = await sampler.sample("Name three colours.", seed=1)
    assert chunks.deltas == ["red", " green", " blue"]  # streamed through the cache
    assert backend.chunks_sent == 3 and not first.attempts[0].cached

    chunks.deltas.clear()
    second = await sampler.sample("Name three colours.", seed=1)
    await sampler.aclose()
    assert backend.calls == 1  # answered from the cache: the stored answer, whole
    assert chunks.deltas == [] and second.attempts[0].cached
    assert second.text == first.text == "red green blue"


async def test_a_cut_generation_is_kept_and_replayed_where_the_checks_that_cut_it_are_in_force(
    tmp_path: Path,
) -> None:
    def counting(request: Any) -> str:
        return "one two three four five six"

    backend = ScriptedBackend(counting)
    sampler = Sampler(backend, cache=tmp_path / "c.sqlite", load_entrypoints=False)
    ask: dict[str, Any] = {"requirements": [max_words(3)], "seed": 3}
    first = await sampler.sample("Count.", **ask)
    cut = first.attempts[0]
    assert cut.stopped_early and cut.text == "one two three four" and not cut.cached
    assert backend.streams_closed_early == 1 and backend.chunks_sent == 4  # no fifth word

    again = await sampler.sample("Count.", **ask)  # the same request, the same check
    replayed = again.attempts[0]
    assert backend.calls == 1 and replayed.cached and replayed.stopped_early
    assert replayed.text == cut.text and replayed.generation.entry
    assert replayed.validations == cut.validations and not replayed.passed
    assert (again.usage.output_tokens, again.cached_usage) == (0, first.usage)

    # with another check in force beside it: still the same cut
    both = [max_words(3), not_contains("z")]
    beside = await sampler.sample("Count.", requirements=both, seed=3)
    assert (backend.calls, beside.attempts[0].generation.entry) == (1, replayed.generation.entry)
    # where the check that cut it is not in force, it is a miss that generates
    other_check = await sampler.sample("Count.", requirements=[max_words(4)], seed=3)
    assert backend.calls == 2 and not other_check.attempts[0].cached
    whole = await sampler.sample("Count.", early_stop=False, **ask)
    assert backend.calls == 3 and whole.text == "one two three four five six"
    assert not whole.attempts[0].cached and not whole.attempts[0].stopped_early
    # once the whole answer is known, it is the one replayed
    known = (await sampler.sample("Count.", **ask)).attempts[0]
    assert backend.calls == 3 and known.cached and known.text == whole.text
    await sampler.aclose()


async def test_a_cut_on_a_check_that_raised_or_a_cancelled_stream_is_not_kept(
    tmp_path: Path,
) -> None:
    def broken(text: str) -> bool:
        raise RuntimeError("no verdict")

    backend = ScriptedBackend(["one two three"])
    sampler = Sampler(backend, cache=tmp_path / "c.sqlite", load_entrypoints=False)
    raising = Requirement("a check whose prefix raises", lambda text: True, broken)
    first = await sampler.sample("q", requirements=[raising], seed=1)
    assert first.attempts[0].stopped_early
    again = await sampler.sample("q", requirements=[raising], seed=1)
    assert backend.calls == 2 and not again.attempts[0].cached
    assert sampler.cache is not None and len(sampler.cache) == 0
    await sampler.aclose()


async def test_only_a_backend_that_streams_streams_through_the_cache(tmp_path: Path) -> None:
    class Plain:
        model = "plain"
        calls = 0

        async def generate(self, request: Any) -> str:
            self.calls += 1
            return "x"

    plain, chunks = Plain(), SeesChunks()
    async with Sampler(plain, cache=tmp_path / "c.sqlite", plugins=[chunks]) as sampler:
        first = await sampler.sample("q", requirements=[max_words(3)], seed=1)
        again = await sampler.sample("q", requirements=[max_words(3)], seed=1)
        assert (first.text, plain.calls, again.cached_calls) == ("x", 1, 1)
        assert chunks.deltas == [] and not can_stream(plain)  # asked whole, answered whole
        streamed = await sampler.sample("q", backend=ScriptedBackend(["y z"]), seed=1)
        assert chunks.deltas == ["y", " z"] and not streamed.attempts[0].cached


async def test_a_free_backend_stays_free_through_the_cache(tmp_path: Path) -> None:
    """What the engine reads of the backend (``free_of_charge``) is seen through the cache:
    an attempt stopped early by a local model costs 0.0, not an unknown cost."""

    class Local(ScriptedBackend):
        free_of_charge = True

    sampler = Sampler(Local(["one two three four five"]), cache=tmp_path / "c.sqlite")
    result = await sampler.sample("Count.", requirements=[max_words(2)], seed=1)
    await sampler.aclose()
    assert result.attempts[0].stopped_early
    assert result.usage.cost_usd == 0.0
