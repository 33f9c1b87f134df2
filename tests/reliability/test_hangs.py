"""Nothing a user writes can freeze a run: regexes run in linear time, slow checks time out,
configs that would hang or fail late are refused at load, and what a run keeps is bounded."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from sampling_core import Requirement, Sampler, ScriptedBackend, ValidationResult
from sampling_core.kinds import collect_kinds
from sampling_core.requirements.checks import matches
from sampling_core.runs import run_batch_sync
from sampling_core.runs.execution.session import BatchSession
from sampling_core.runs.store.caps import MAX_LIST_ITEMS, MAX_TEXT_CHARS, cap_record
from sampling_core.runs.store.index import RunIndex
from tests.support.reliability_helpers import assert_refused, invoke
from tests.support.runs_helpers import records, write_config, write_dataset

EVIL = "(a+)+$"  # catastrophic backtracking for Python's re on "aaaa...b"


@pytest.mark.anyio
async def test_a_backtracking_regex_cannot_hang_the_engine() -> None:
    text = "a" * 50_000 + "b"  # Python's re would take longer than the universe's age
    backend = ScriptedBackend([text])
    with anyio.fail_after(30):  # a guard against a hang, not a timing assertion
        result = await Sampler(backend, load_entrypoints=False).sample(
            "q", requirements=[matches(EVIL)], loop_budget=2, concurrency_budget=2
        )
    assert not result.success and result.iterations_used == 4
    assert matches(EVIL).check("aaa").passed and matches("ABC", flags=re.I).check("xabc").passed


@pytest.mark.parametrize("pattern", ["(?=a)b", r"(a)\1", "(?<!x)y"])
def test_patterns_re2_cannot_run_are_refused_when_given(pattern: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lookaround and backreferences"):
        matches(pattern)
    data = write_dataset(tmp_path / "d.jsonl", 1)
    config = write_config(tmp_path / "c.yaml", data, requirements=[{"matches": pattern}])
    assert_refused(invoke("run", config, "--out", tmp_path / "o"), "requirements[0]", "RE2")
    sample = invoke(
        "sample", "q", "--backend", "scripted", "--reply", "x", "--require", f"regex:{pattern}"
    )
    assert sample.exit_code == 2 and "lookaround" in sample.stderr


@pytest.mark.anyio
async def test_a_slow_async_check_fails_with_a_reason_under_check_timeout() -> None:
    async def forever(text: str) -> bool:
        await anyio.sleep_forever()
        return True

    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False, check_timeout=0.05)
    result = await sampler.sample("q", requirements=[Requirement("slow", forever), lambda t: True])
    (attempt,) = result.attempts
    slow, quick = attempt.validations
    assert not slow.passed and "check_timeout" in (slow.reason or "") and quick.passed


@pytest.mark.anyio
async def test_a_slow_sync_check_fails_once_it_returns() -> None:
    def slow(text: str) -> ValidationResult:
        import time

        time.sleep(0.06)
        return ValidationResult(True)

    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False, check_timeout=0.01)
    result = await sampler.sample("q", requirements=[Requirement("slow", slow)])
    assert not result.success and "check_timeout" in result.attempts[0].validations[0].reason


def test_check_timeout_and_retries_are_result_settings_in_the_run_config(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d.jsonl", 2)
    scripted = {"kind": "scripted", "replies": ["a"]}
    config = write_config(
        tmp_path / "c.yaml",
        data,
        check_timeout_s=5,
        backend={**scripted, "retries": {"max_retries": 1}},
    )
    assert invoke("run", config, "--out", tmp_path / "out").exit_code == 0
    changes = [
        {"check_timeout_s": 6},
        {"backend": {**scripted, "retries": {"max_retries": 2}}},
    ]
    for change in changes:
        other = write_config(
            tmp_path / "c2.yaml",
            data,
            **{"check_timeout_s": 5, "backend": {**scripted, "retries": {"max_retries": 1}}}
            | change,
        )
        refused = invoke("run", other, "--out", tmp_path / "out", "--resume")
        assert refused.exit_code == 2 and "change results" in refused.stderr, refused.stderr
    # a call timeout is an option of the kinds that have one, labelled a result setting
    # (the resume comparison reads the kind's label), unlike a throughput option
    kinds = collect_kinds()
    for kind in ("openai", "local"):
        assert kinds.get("backend", kind).label("timeout_s") == "result"
    assert kinds.get("backend", "openai").label("max_in_flight") == "throughput"


@pytest.mark.parametrize(
    ("yaml_text", "fragment"),
    [
        (
            "backend: {kind: scripted, replies: [a], latency_s: .inf}\n",
            "backend.latency_s: backend 'scripted' (plugin 'kinds'): option 'latency_s': "
            "must be a finite number",
        ),
        (
            "backend: {kind: scripted, replies: [a], latency_s: .nan}\n",
            "backend.latency_s: backend 'scripted' (plugin 'kinds'): option 'latency_s': "
            "must be a finite number",
        ),
        ("backend: {kind: scripted, replies: [a], timeout_s: -.inf}\n", "backend.timeout_s"),
        ("options: {temperature: .nan}\n", "options.temperature: must be a finite number"),
        ("budgets: {loop_budget: '2'}\n", "budgets.loop_budget: must be a whole number"),
        ("budgets: {loop_budget: 2.0}\n", "budgets.loop_budget: must be a whole number"),
        (
            "budgets: {concurrency_budget: true}\n",
            "budgets.concurrency_budget: must be an int >= 1, not a boolean",
        ),
        (
            "run: {max_concurrent_prompts: 2.5}\n",
            "run.max_concurrent_prompts: must be a whole number",
        ),
        ("seed: '7'\n", "seed: must be a whole number"),
        (
            "backend: {kind: scripted, replies: [a], latency_s: '0.1'}\n",
            "backend.latency_s: backend 'scripted' (plugin 'kinds'): option 'latency_s': "
            "must be a number, not str",
        ),
        ("budgets: {loop_budget: 2, loop_budget: 3}\n", "the key 'loop_budget' is given twice"),
        ("seed: 1\nseed: 2\n", "the key 'seed' is given twice"),
    ],
)
def test_values_that_would_hang_or_fail_late_are_refused_at_load(
    tmp_path: Path, yaml_text: str, fragment: str
) -> None:
    data = write_dataset(tmp_path / "d.jsonl", 1)
    config = tmp_path / "c.yaml"
    base = f"dataset: {{path: {data}, id_field: id}}\n"
    if not yaml_text.startswith("backend"):
        base += "backend: {kind: scripted, replies: [a]}\n"
    config.write_text(base + yaml_text)
    assert_refused(invoke("run", config, "--out", tmp_path / "o"), fragment)
    assert not (tmp_path / "o").exists()


def test_yaml_merge_keys_may_still_override(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d.jsonl", 1)
    config = tmp_path / "c.yaml"
    config.write_text(
        f"dataset: {{path: {data}, id_field: id}}\n"
        "base: &b {kind: scripted, replies: [a]}\n"
        "backend: {<<: *b, replies: [b]}\n"
    )
    result = invoke("run", config, "--out", tmp_path / "o")
    assert "given twice" not in result.stderr  # refused only for the unknown key `base`
    assert "base: unknown key" in result.stderr


def test_a_record_is_capped_with_a_note() -> None:
    record = {
        "key": "k",
        "text": "x" * (MAX_TEXT_CHARS + 5),
        "attempts": {"used": 5000, "each": [{"attempt": i} for i in range(5000)]},
    }
    capped = cap_record(record)
    assert len(capped["text"]) == MAX_TEXT_CHARS and capped["attempts"]["used"] == 5000
    assert len(capped["attempts"]["each"]) == MAX_LIST_ITEMS
    assert capped["capped"] == [
        f"text: {MAX_TEXT_CHARS + 5} chars, {MAX_TEXT_CHARS} kept",
        f"attempts.each: 5000 entries, the first {MAX_LIST_ITEMS} kept",
    ]
    small = {"key": "k", "text": "short"}
    assert cap_record(small) is small


def test_a_run_with_a_huge_reply_and_many_attempts_writes_a_bounded_record(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d.jsonl", 1)
    config = write_config(
        tmp_path / "c.yaml",
        data,
        budgets={"loop_budget": 2, "concurrency_budget": 600, "early_stop": False},
    )
    # Longer than a record keeps, in six words: it never passes max_words: 5 (not cut short),
    # and counting its words costs little (the test is about the record, not the checks).
    huge = " ".join(["w" * (MAX_TEXT_CHARS // 5)] * 6)
    backend = ScriptedBackend([huge])
    run_batch_sync(config, tmp_path / "out", backend=backend)
    (record,) = records(tmp_path / "out")
    assert record["attempts"]["used"] == 1200 and len(record["attempts"]["each"]) == MAX_LIST_ITEMS
    assert len(record["text"]) == MAX_TEXT_CHARS and len(record["capped"]) == 2
    assert (tmp_path / "out" / "records.jsonl").stat().st_size < 2_000_000
    assert json.loads(invoke("report", tmp_path / "out", "--json").stdout)["totals"]["done"] == 1


def test_counting_finished_prompts_does_not_walk_every_record(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d.jsonl", 50)
    config = write_config(tmp_path / "c.yaml", data)
    run_batch_sync(config, tmp_path / "out")
    scans: list[str] = []  # queries over many rows of the session's index, once it started
    sessions: list[BatchSession] = []
    original_init, original_query = BatchSession.__init__, RunIndex.query

    def spy_init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        original_init(self, *args, **kwargs)
        sessions.append(self)

    def spy_query(self, sql, params=()):  # type: ignore[no-untyped-def]
        if sessions and self is sessions[0]._index:
            scans.append(sql)
        return original_query(self, sql, params)

    BatchSession.__init__ = spy_init  # type: ignore[method-assign]
    RunIndex.query = spy_query  # type: ignore[method-assign]
    try:
        run_batch_sync(config, tmp_path / "out", resume=True, retry_failed=True)
    finally:
        BatchSession.__init__ = original_init  # type: ignore[method-assign]
        RunIndex.query = original_query  # type: ignore[method-assign]
    assert len(sessions) == 1 and sessions[0].counts["ok"] == 50
    # Counts are kept up to date, never recounted per record: the only queries are the few
    # that the run's end makes of the same index for its summary and report (read once).
    # A recount per record would make at least 50.
    assert len(scans) < 10, scans


def test_scripted_backend_keeps_a_bounded_history() -> None:
    backend = ScriptedBackend(["a"], keep_requests=3)
    for _ in range(10):
        Sampler(backend, load_entrypoints=False).sample_sync("q")
    assert backend.calls == 10 and len(backend.requests) == 3
    assert len(ScriptedBackend(["a"]).requests.__class__(maxlen=None)) == 0
    with pytest.raises(ValueError, match="keep_requests"):
        ScriptedBackend(["a"], keep_requests=-1)
