"""A seeded run, then ``--resume --retry-failed``, then a rescore: a retried prompt is sampled
with seeds of its own (a seeded model would give back the very answers that failed), the
same on every run of that retry, and a rescore checks each record with the seeds its calls
were sent."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from sampling_core import CheckContext, GenerationRequest, Requirement, ScriptedBackend
from sampling_core.kinds import KindRegistry, collect_kinds
from sampling_core.runs import rescore, run_batch
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio


def even_seed(_: Any) -> Requirement:
    """Passes when the attempt was sent an even seed: a stand-in for a seeded model, whose
    answer the seed decides."""

    def check(text: str, context: CheckContext) -> bool:
        return context.options["seed"] % 2 == 0

    return Requirement("the seed is even", check)


def kinds() -> KindRegistry:
    registry = collect_kinds()
    registry.register("requirement", "even_seed", even_seed, plugin="tests")
    return registry


class Seeds:
    """A backend that notes the seeds each prompt was sent."""

    def __init__(self) -> None:
        self.sent: dict[str, set[int]] = defaultdict(set)
        self.backend = ScriptedBackend(self.reply)

    def reply(self, request: GenerationRequest) -> str:
        self.sent[request.prompt].add(request.options["seed"])
        return "an answer"


async def test_a_retried_prompt_is_sampled_with_seeds_of_its_own(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 16)
    config = write_config(
        tmp_path / "c.yaml",
        dataset,
        requirements=[{"even_seed": True}],
        budgets={"loop_budget": 1, "concurrency_budget": 2, "early_exit": False},
        seed=5,
    )
    out = tmp_path / "run"
    sessions = []
    for retry in (False, True, True):
        seeds = Seeds()
        await run_batch(
            config, out, resume=retry, retry_failed=retry, backend=seeds.backend, kinds=kinds()
        )
        sessions.append(seeds.sent)
    first, second, third = sessions
    assert len(first) == 16 and 0 < len(second) < 16 and len(third) <= len(second)
    for prompt, sent in second.items():  # each retry asks with seeds never sent before
        assert not sent & first[prompt]
        assert not third.get(prompt, set()) & (sent | first[prompt])
    # the same retry, made again in a copy of the run, sends the same seeds
    again = tmp_path / "again"
    await run_batch(config, again, backend=Seeds().backend, kinds=kinds())
    seeds = Seeds()
    await run_batch(
        config, again, resume=True, retry_failed=True, backend=seeds.backend, kinds=kinds()
    )
    assert seeds.sent == second

    # a rescore with the same check gives every record of the run its own verdicts back
    await rescore(out, tmp_path / "rescored", kinds=kinds())
    verdicts = [
        [entry["passed"] for entry in record["attempts"]["each"]] for record in records(out)
    ]
    assert verdicts == [
        [entry["passed"] for entry in record["attempts"]["each"]]
        for record in records(tmp_path / "rescored")
    ]
    assert len(verdicts) > 16  # the retries' records are there too


def by_seed(request: GenerationRequest) -> str:
    """A seeded model: the seed decides the answer (a long one, which early stop cuts)."""
    return "yes" if request.options["seed"] % 2 == 0 else "no " * 8


async def test_a_seeded_retry_keeps_its_answers_beside_the_first_ones_in_the_cache(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path / "c.yaml",
        write_dataset(tmp_path / "d.jsonl", 16),
        requirements=[{"contains": "yes"}, {"max_words": 5}],
        budgets={"loop_budget": 1, "concurrency_budget": 2, "early_exit": False},
        run={"cache": "responses.sqlite"},
        seed=5,
    )
    out = tmp_path / "run"
    first = await run_batch(config, out, backend=ScriptedBackend(by_seed))
    retried = await run_batch(
        config, out, resume=True, retry_failed=True, backend=ScriptedBackend(by_seed)
    )
    assert 0 < first.ok < retried.ok  # new seeds, new answers: some failed prompts pass
    # a later run sends the first sampling's requests: the cache gives each the answer the
    # model gave it (not a retry's answer to another request), and no call is made
    backend = ScriptedBackend(by_seed)
    later = await run_batch(config, tmp_path / "later", backend=backend)
    assert (backend.calls, later.cached_calls, later.ok) == (0, 32, first.ok)
    assert later.stopped_early == first.stopped_early > 0  # the cut answers, replayed cut

    def texts(records_: list[dict[str, Any]]) -> dict[str, list[str]]:
        return {r["key"]: [e["text"] for e in r["attempts"]["each"]] for r in records_}

    assert texts(records(tmp_path / "later")) == texts(records(out)[:16])
