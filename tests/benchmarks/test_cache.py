"""``python -m benchmarks.cache``: its config and its arithmetic (the runs themselves need the
local model and minutes: it is a benchmark, not a test)."""

from __future__ import annotations

from benchmarks import cache
from sampling_core.runs import load_config


def test_it_runs_the_quickstart_as_shipped_with_the_slots_a_run_gives_it() -> None:
    config, shipped = cache.shipped(), load_config(cache.CONFIG)
    assert config.run.progress == "off"
    as_is = ("budgets", "options", "requirements", "seed", "plugins", "strategy", "dataset")
    for block in as_is:
        assert getattr(config, block) == getattr(shipped, block), block
    assert cache.slots(config) == 8 * 4


def test_the_share_is_the_second_runs_tokens_over_the_first_runs() -> None:
    assert cache.share({"generated": 2000}, {"generated": 50}) == 0.025
    assert cache.share({"generated": 0}, {"generated": 0}) == 0.0
