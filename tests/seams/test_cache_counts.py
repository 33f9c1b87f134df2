"""The response cache (and any plugin that answers for the backend) with every counter of
backend calls, tokens and cost: an answer the cache or a plugin gave is no backend call and
spends no new token. A real SQLite cache, the built-in ``cache`` plugin, a second identical
call; ``budget_guard``'s ceilings, the call's usage, tracing, OpenTelemetry metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from builtin_plugins.budget_guard import BudgetGuard, Totals
from builtin_plugins.mlflow_export import metrics_of
from builtin_plugins.otel import OtelPlugin
from builtin_plugins.tracing import TracingPlugin
from hook_specs import Generation, RunEndPayload, Usage, hookimpl
from sampling_core import Sampler, ScriptedBackend
from sampling_core.runs import run_batch
from sampling_core.runs.reports.report import build_report
from tests.support.otel_helpers import metrics_by_name
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio


def never(text: str) -> bool:
    """never passes"""
    return False


async def sample_twice(tmp_path: Path, *plugins: Any, **call: Any) -> tuple[Any, Any, Any]:
    """The same call twice on one sampler with a cache file: the second is all hits."""
    backend = ScriptedBackend(["a b c"])  # "one two" + "a b c": 5 tokens a call
    async with Sampler(
        backend, cache=tmp_path / "c.sqlite", plugins=list(plugins), load_entrypoints=False
    ) as sampler:
        first = await sampler.sample("one two", requirements=[never], seed=3, **call)
        again = await sampler.sample("one two", requirements=[never], seed=3, **call)
    return backend, first, again


async def test_cache_hits_are_not_backend_calls_for_the_generation_ceilings(
    tmp_path: Path,
) -> None:
    totals = Totals()
    guard = BudgetGuard(max_generations_total=5, totals=totals)
    backend, first, again = await sample_twice(tmp_path, guard, loop_budget=4)
    assert backend.calls == 4 and first.stop_reason == "budget_exhausted"
    assert again.stop_reason == "budget_exhausted", again.failure_reason  # never refused
    assert again.cached_calls == again.iterations_used == 4
    assert (totals.started, totals.generations, totals.tokens) == (4, 4, 20)


async def test_a_calls_hits_leave_its_generation_ceiling_to_its_backend_calls(
    tmp_path: Path,
) -> None:
    guard = BudgetGuard(max_generations_per_call=2, totals=Totals())
    backend = ScriptedBackend(["a b c"])
    async with Sampler(
        backend, cache=tmp_path / "c.sqlite", plugins=[guard], load_entrypoints=False
    ) as sampler:
        await sampler.sample("q", requirements=[never], seed=3, loop_budget=2)
        # attempts 1 and 2 are the same requests again (hits), 3 and 4 new ones
        longer = await sampler.sample("q", requirements=[never], seed=3, loop_budget=4)
    assert longer.stop_reason == "budget_exhausted", longer.failure_reason
    assert [a.cached for a in longer.attempts] == [True, True, False, False]
    assert backend.calls == 4


async def test_cache_hits_spend_no_tokens_for_the_token_ceilings(tmp_path: Path) -> None:
    totals = Totals()
    guard = BudgetGuard(max_tokens_total=25, totals=totals)
    backend, first, again = await sample_twice(tmp_path, guard, loop_budget=4)
    assert first.usage.total_tokens == 20 and first.stop_reason == "budget_exhausted"
    assert again.stop_reason == "budget_exhausted" and again.cached_calls == 4
    assert again.usage == Usage(0, 0, 0.0) and again.cached_usage.total_tokens == 20
    assert totals.tokens == 20 and backend.calls == 4


class Replay:
    """Answers every call itself (as a mock or a replay does), saying nothing of tokens."""

    @hookimpl
    def generation_call(self, payload: Any) -> Generation:
        return Generation("from the replay")


async def test_a_plugins_answer_is_no_backend_call_and_spends_nothing() -> None:
    totals = Totals()
    guard = BudgetGuard(max_generations_per_call=2, max_tokens_per_call=10, totals=totals)
    backend = ScriptedBackend(["a b c"])
    sampler = Sampler(backend, plugins=[Replay(), guard], load_entrypoints=False)
    result = await sampler.sample("q", requirements=[never], loop_budget=5)
    assert backend.calls == 0 and result.iterations_used == 5
    assert result.stop_reason == "budget_exhausted", result.failure_reason  # not refused
    assert result.usage == Usage(0, 0, 0.0)  # known: nothing spent, not unknown
    assert {a.generation.answered_by for a in result.attempts} == {"Replay"}
    assert (totals.started, totals.generations, totals.tokens) == (0, 0, 0)


async def test_tracing_says_a_cached_answer_spent_nothing(tmp_path: Path) -> None:
    with capture_logs() as logs:
        await sample_twice(tmp_path, TracingPlugin(), loop_budget=1)
    post = [e for e in logs if e["event"] == "generation.post_call"]
    assert [(e["input_tokens"], e["output_tokens"], e.get("answered_by")) for e in post] == [
        (2, 3, None),
        (0, 0, "cache"),
    ]


async def test_opentelemetry_measures_backend_calls_only(tmp_path: Path, provider: Any) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    plugin = OtelPlugin(tracer_provider=provider, meter_provider=MeterProvider([reader]))
    await sample_twice(tmp_path, plugin, loop_budget=2)  # 2 backend calls, then 2 hits
    found = metrics_by_name(reader)
    (calls,) = found["gen_ai.client.operation.duration"].data.data_points
    assert calls.count == 2
    tokens = {
        p.attributes["gen_ai.token.type"]: p
        for p in found["gen_ai.client.token.usage"].data.data_points
    }
    assert (tokens["input"].count, tokens["input"].sum, tokens["output"].sum) == (2, 4, 6)


async def test_a_second_run_with_the_same_cache_reports_no_tokens_spent(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 3)
    config = write_config(
        tmp_path / "c.yaml",
        dataset,
        backend={"kind": "scripted", "replies": ["a b c"]},
        requirements=[{"contains": "zebra"}],
        budgets={"loop_budget": 2},
        run={"cache": str(tmp_path / "c.sqlite")},
    )
    await run_batch(config, tmp_path / "first")
    await run_batch(config, tmp_path / "again")
    first = build_report(tmp_path / "first").as_dict()["totals"]
    again = build_report(tmp_path / "again").as_dict()["totals"]
    assert first["cached_calls"] == 0 and first["output_tokens"] == 18
    assert (again["input_tokens"], again["output_tokens"]) == (0, 0)
    assert (again["cached_calls"], again["cached_tokens"]) == (6, first["input_tokens"] + 18)
    for record in records(tmp_path / "again"):
        assert record["usage"]["input_tokens"] == record["usage"]["output_tokens"] == 0
        assert record["usage"]["cached"]["calls"] == 2
    ended = {"run_dir": "/r", "session": 1, "interrupted": False, "elapsed_s": 1.0}
    logged = metrics_of(RunEndPayload(**ended, totals=again, pass_at_k=None, pass_hat_k=None))
    assert (logged["input_tokens"], logged["output_tokens"]) == (0.0, 0.0)
    assert (logged["cached_calls"], logged["cached_tokens"]) == (6.0, again["cached_tokens"])
