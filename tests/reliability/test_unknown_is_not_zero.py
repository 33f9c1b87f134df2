"""Unknown is never zero: a reply without usage, or a model without a price, is recorded as
unknown (``None``), and a ceiling that cannot be checked stops spending and says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from builtin_plugins.budget_guard import BudgetGuard, Totals
from hook_specs.records import UNKNOWN_USAGE, Generation, Usage
from sampling_core import Sampler, ScriptedBackend
from sampling_core.backends import OpenAIBackend
from sampling_core.pricing import priced
from sampling_core.runs import run_batch_sync
from sampling_core.runs.reports.report import build_report
from sampling_core.runs.reports.summary import summarize
from tests.support._servers.scripted_http import Reply, ScriptedHTTPServer, completion
from tests.support.runs_helpers import records, write_config, write_dataset

OPENAI = "https://api.openai.com/v1"


def never(text: str) -> bool:
    """never passes"""
    return False


def without_usage(number: int, body: Any) -> Reply:
    reply = completion("an answer", model="gpt-4o")
    del reply["usage"]
    return Reply(body=reply)


def stop_reasons(logs: list[dict[str, Any]]) -> list[str]:
    """The reasons plugins gave for stopping, as the engine logged them."""
    return [e["reason"] for e in logs if e["event"] == "sampling.stopped_by_plugin"]


def priced_provider(server: ScriptedHTTPServer, monkeypatch: pytest.MonkeyPatch) -> Any:
    """An OpenAI backend for gpt-4o that prices as api.openai.com does, while its requests
    go to ``server`` (only ``base_url``, what pricing reads, says api.openai.com)."""
    monkeypatch.setenv("UNKNOWN_TEST_KEY", "sk-test-unknown-0123456789")
    backend = OpenAIBackend("gpt-4o", base_url=server.base_url, api_key_env="UNKNOWN_TEST_KEY")
    backend.base_url = OPENAI
    return backend


def test_usage_with_an_unknown_part_is_unknown_never_zero() -> None:
    assert (Usage(1, 2, 0.5) + UNKNOWN_USAGE) == Usage(None, None, None)
    assert sum([Usage(3, 4), UNKNOWN_USAGE, Usage(1, 1)], Usage()).total_tokens is None
    assert sum([UNKNOWN_USAGE], Usage()) == UNKNOWN_USAGE  # not the empty start's zeros
    assert not UNKNOWN_USAGE.known and Usage(0, 0).known
    assert priced(UNKNOWN_USAGE, "gpt-4o", api_url=OPENAI).cost_usd is None  # was $0.00
    assert priced(Usage(1000, 0), "gpt-4o", api_url=OPENAI).cost_usd == pytest.approx(0.0025)
    assert Generation("x").usage == UNKNOWN_USAGE  # a backend that said nothing


@pytest.mark.anyio
async def test_a_priced_providers_reply_without_usage_is_unknown_and_stops_a_dollar_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with ScriptedHTTPServer(without_usage) as server:
        backend = priced_provider(server, monkeypatch)
        guard = BudgetGuard(max_usd_per_call=0.0001, totals=Totals())
        sampler = Sampler(backend, plugins=[guard], load_entrypoints=False)
        with capture_logs() as logs:
            results = [await sampler.sample(f"q{i}") for i in range(20)]
        await backend.aclose()
    reasons = stop_reasons(logs)
    assert len(server.arrivals) == 1  # 20 gpt-4o calls under a $0.0001 cap were made before
    assert results[0].usage == UNKNOWN_USAGE  # the first call's: not 0 tokens and $0.00
    assert all(r.stop_reason == "stopped_by_plugin" for r in results)
    assert len(reasons) == 20
    assert "did not report its tokens, so its cost is unknown" in reasons[0]
    assert "max_usd_per_call=0.0001 cannot be checked" in reasons[-1]


@pytest.mark.parametrize(
    "ceiling",
    [{"max_usd": 1.0}, {"max_usd_per_call": 1.0}, {"max_usd_total": 1.0}],
    ids=["max_usd", "max_usd_per_call", "max_usd_total"],
)
def test_an_unknown_price_stops_every_later_call_too(ceiling: dict[str, float]) -> None:
    backend = ScriptedBackend(["x"])  # counts tokens; its model has no price
    guard = BudgetGuard(**ceiling, totals=Totals())
    sampler = Sampler(backend, plugins=[guard], load_entrypoints=False)
    with capture_logs() as logs:
        results = [sampler.sample_sync("q", requirements=[never], loop_budget=3) for _ in range(20)]
    reasons = stop_reasons(logs)
    assert backend.calls == 1  # before: one paid call per prompt, 20 of 20
    assert all(r.stop_reason == "stopped_by_plugin" for r in results)
    assert len(reasons) == 20 and "the price of model 'scripted' is unknown" in reasons[-1]
    [name] = ceiling
    assert f"{name if name != 'max_usd' else 'max_usd_per_call'}=1.0 cannot" in reasons[-1]


@pytest.mark.parametrize("ceiling", ["max_tokens", "max_tokens_total"])
def test_a_reply_without_token_counts_stops_a_token_ceiling(ceiling: str) -> None:
    backend = ScriptedBackend(lambda request: Generation("x", model="m"))  # no usage given
    totals = Totals()
    sampler = Sampler(
        backend, plugins=[BudgetGuard(**{ceiling: 10**6}, totals=totals)], load_entrypoints=False
    )
    results = [sampler.sample_sync("q", requirements=[never], loop_budget=3) for _ in range(5)]
    assert backend.calls == 1 and totals.unknown_tokens is not None
    assert results[0].usage.input_tokens is None and results[0].usage.output_tokens is None
    totals.reset()  # a new count, on purpose
    sampler.sample_sync("q")
    assert backend.calls == 2


def test_a_runs_records_and_summary_say_unknown(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 3)
    config = write_config(tmp_path / "c.yaml", dataset, requirements=[])

    class Silent:
        async def generate(self, request: Any) -> Any:
            return "an answer"  # a plain str: no usage reported

    run_batch_sync(config, tmp_path / "out", backend=Silent())
    for record in records(tmp_path / "out"):
        usage = record["usage"]
        assert (usage["input_tokens"], usage["output_tokens"], usage["cost_usd"]) == (
            None,
            None,
            None,
        )
    summary = summarize(tmp_path / "out")
    assert summary.usage_unknown == 3 and summary.as_dict()["usage_unknown_prompts"] == 3
    assert "unknown for 3 prompt(s)" in summary.render()
    rows = build_report(tmp_path / "out", rows=True).as_dict()["prompts"]
    assert {(row["input_tokens"], row["output_tokens"]) for row in rows} == {(None, None)}
