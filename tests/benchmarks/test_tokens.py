"""``python -m benchmarks.tokens``: its config per variant and its tables (the run itself
needs the local model and minutes: it is a benchmark, not a test)."""

from __future__ import annotations

from benchmarks import tokens


def test_each_variant_runs_the_quickstart_at_the_benchmarks_budgets() -> None:
    for name, settings in tokens.VARIANTS.items():
        config = tokens.quickstart(0.5, **settings)
        budgets = config.budgets
        assert (budgets.loop_budget, budgets.concurrency_budget) == (3, 4), name
        assert (budgets.early_stop, budgets.launch) == (settings["early_stop"], settings["launch"])
        assert budgets.stagger_s == 0.5 and config.options.max_tokens == 48
        assert config.plugins == [] and config.run.max_concurrent_prompts == 8
        assert config.seed == 1234  # the quickstart's own: the same seed for every variant
    assert tokens.VARIANTS["today"] == {"early_stop": False, "launch": "all"}


def test_rounds_are_averaged_and_compared_with_today() -> None:
    rows = [
        {"variant": "today", "generated": 1000, "wall_s": 10.0, "ok": 20, "done": 24},
        {"variant": "fast", "generated": 600, "wall_s": 7.0, "ok": 19, "done": 24},
        {"variant": "today", "generated": 1200, "wall_s": 12.0, "ok": 22, "done": 24},
        {"variant": "fast", "generated": 800, "wall_s": 9.0, "ok": 21, "done": 24},
    ]
    means = tokens.mean_rows(rows)
    assert [(m["variant"], m["rounds"], m["generated"], m["wall_s"]) for m in means] == [
        ("today", 2, 1100.0, 11.0),
        ("fast", 2, 700.0, 8.0),
    ]
    table = tokens.table(means, "today").splitlines()
    assert table[2] == "| today | 1100 | 1.00 | 11.0 | 1.00 | 21.0 of 24 |"
    assert table[3] == "| fast | 700 | 0.64 | 8.0 | 0.73 | 20.0 of 24 |"


def test_the_json_prompts_have_a_schema_each() -> None:
    import json

    lines = tokens.CONFIG.parent.joinpath("data", "quickstart.jsonl").read_text().splitlines()
    keys = {json.loads(line)["id"] for line in lines}
    assert set(tokens.SCHEMAS) == {key for key in keys if key.startswith("json-")}
