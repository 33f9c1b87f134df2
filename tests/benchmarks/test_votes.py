"""``python -m benchmarks.votes``: its dataset, its variants and its table (the run itself
needs the local model and many minutes: it is a benchmark, not a test)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

from benchmarks import votes

KNOBS = {"consensus": 0.9, "window": 4, "warmup": 2, "keep": 0.5, "launch": "on_failure"}


def test_the_dataset_is_what_its_script_writes(tmp_path: Path) -> None:
    script = votes.ROOT / "examples" / "data" / "make_vote.py"
    made = runpy.run_path(str(script))["questions"]()
    lines = votes.rows()
    assert lines == made and len(lines) >= 100
    assert len({line["prompt"] for line in lines}) == len(lines)
    for line in lines[:5]:
        a, op, b = line["prompt"].removeprefix("What is ").split("?")[0].split()
        assert int(line["answer"]) == (int(a) + int(b) if op == "plus" else int(a) - int(b))


def test_each_variant_votes_on_a_format_check_never_on_the_answer() -> None:
    for name, chosen in votes.VARIANTS.items():
        strategy, requirements, launch = votes.settings(name, **KNOBS)
        assert strategy.consensus == (0.9 if chosen["consensus"] else None)
        assert launch == ("on_failure" if chosen["consensus"] else "all")
        described = [r.description for r in requirements]
        assert described[0] == "holds a number"
        assert len(described) == 1 + chosen["confidence"]
        assert not any("answer" in d for d in described)


def test_accuracy_is_the_picks_last_number_against_the_answer() -> None:
    assert votes.correct("The answer is 12.", "12")
    assert not votes.correct("12 or 13", "12") and not votes.correct(None, "12")


def test_the_paired_bootstrap_and_the_table() -> None:
    base = [True, False, True, False]
    assert votes.paired_bootstrap(base, base) == (0.0, 0.0, 0.0)
    diff, low, high = votes.paired_bootstrap(base, [True, True, True, False])
    assert diff == 25.0 and low <= diff <= high
    results = [
        {"variant": "majority", "generated": 1000, "wall_s": 10.0, "right": base,
         "accuracy": 50.0, "not_started": 0, "cancelled": 0, "stopped_early": 0},
        {"variant": "consensus", "generated": 600, "wall_s": 7.0, "right": base,
         "accuracy": 50.0, "not_started": 9, "cancelled": 1, "stopped_early": 0},
    ]  # fmt: skip
    lines = votes.table(results).splitlines()
    assert lines[3] == (
        "| consensus | 600 | 0.60 | 7.0 | 0.70 | 50.0% | +0.0 [+0.0, +0.0] | 9 | 1 | 0 |"
    )
    json.dumps(results)  # what the benchmark prints per variant


def test_the_vote_example_config_builds_what_the_benchmark_measures() -> None:
    from sampling_core.kinds import default_kinds
    from sampling_core.runs import load_config
    from sampling_core.runs.config.components import build_requirements, build_strategy

    config = load_config(votes.ROOT / "examples" / "vote.yaml")
    kinds = default_kinds()
    strategy = build_strategy(config.strategy, kinds)
    assert strategy.consensus == 0.9 and strategy.normalize("It is 12.") == "12"
    assert config.budgets.launch == "on_failure" and config.budgets.concurrency_budget == 8
    described = [r.description for r in build_requirements(config.requirements, kinds)]
    assert described[0].startswith("matches") and "calibrated" in described[1]
