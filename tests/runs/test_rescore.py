"""``samplehooks rescore``: kept attempts checked again against new requirements, no backend."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sampling_core import ScriptedBackend
from sampling_core.backends.base import GenerationRequest
from sampling_core.cli.app import app
from sampling_core.kinds import KindRegistry, collect_kinds
from sampling_core.requirements.checks import Requirement
from sampling_core.requirements.context import CheckContext
from sampling_core.runs import (
    ConfigError,
    DatasetError,
    RunDirError,
    rescore,
    rescore_sync,
    run_batch,
)
from sampling_core.view.data import run_data
from tests.support.runs_helpers import records, snapshot, write_config

pytestmark = pytest.mark.anyio

LAST_WORDS = {"p0": "Paris", "p1": "Rome", "p2": "Paris"}
UNANSWERING = {
    "kind": "openai",
    "model": "m",
    "base_url": "http://127.0.0.1:9/v1",  # nothing listens there
    "api_key_env": "SAMPLEHOOKS_TEST_NO_SUCH_KEY",  # and no key: it cannot even be built
}


def long_reply(request: GenerationRequest) -> str:
    """About 900 characters, the prompt's last word at the very end."""
    key = re.findall(r"\bp\d\b", request.prompt)[0]
    return " ".join(["filler"] * 120) + f" {LAST_WORDS[key]}"


def dataset(path: Path, **extra: dict[str, Any]) -> Path:
    with path.open("w") as out:
        for key in LAST_WORDS:
            out.write(json.dumps({"id": key, "prompt": f"Question {key}", **extra.get(key, {})}))
            out.write("\n")
    return path


async def source_run(tmp_path: Path, reply: Any = long_reply, **blocks: Any) -> Path:
    """A finished run whose config names a backend that cannot answer (an openai server
    without a key); the run itself sampled with ``reply`` (a scripted backend)."""
    settings: dict[str, Any] = {"backend": UNANSWERING, "requirements": [{"max_words": 500}]}
    settings.update(blocks)
    config = write_config(tmp_path / "run.yaml", dataset(tmp_path / "d.jsonl"), **settings)
    await run_batch(config, tmp_path / "src", backend=ScriptedBackend(reply))
    return tmp_path / "src"


async def test_rescore_checks_a_long_replys_last_word_and_calls_no_backend(
    tmp_path: Path,
) -> None:
    src = await source_run(tmp_path)
    assert all(r["status"] == "ok" for r in records(src))
    before = snapshot(src)

    summary = await rescore(src, tmp_path / "new", requirements=[{"matches": r"Paris$"}])

    # the last word is past the record's 400-character preview: only the kept text has it
    assert {r["key"]: r["status"] for r in records(tmp_path / "new")} == {
        "p0": "ok",
        "p1": "failed",
        "p2": "ok",
    }
    assert (summary.ok, summary.failed, summary.rescored_from) == (2, 1, str(src.resolve()))
    assert snapshot(src) == before  # the source is left as it was
    meta = json.loads((tmp_path / "new" / "meta.json").read_text())
    assert meta["rescored_from"] == {
        "run_dir": str(src.resolve()),
        "requirements": [{"max_words": 500}, {"matches": "Paris$"}],
    }
    # a rescored run rescores, even where the run's backend kind is not installed at all
    without_backend = collect_kinds()
    del without_backend.kinds["backend"]["openai"]
    again = await rescore(tmp_path / "new", tmp_path / "again", kinds=without_backend)
    assert (again.ok, again.failed) == (2, 1)


async def test_pass_at_k_after_rescore_matches_hand_computed_values(tmp_path: Path) -> None:
    # four independent samples a prompt; subsample i of prompt p says "yes" when i < YES[p]
    yes = {"p0": 3, "p1": 1, "p2": 0}

    def reply(request: GenerationRequest) -> str:
        key = request.prompt.split()[-1]
        assert request.iteration is not None
        return "yes" if request.iteration.subsample_index < yes[key] else "no"

    budgets = {"loop_budget": 1, "concurrency_budget": 4, "early_exit": False}
    src = await source_run(tmp_path, reply, budgets=budgets)
    await rescore(src, tmp_path / "new", requirements=[{"contains": "yes"}])
    report = json.loads((tmp_path / "new" / "report.json").read_text())
    values = {row["k"]: row["value"] for row in report["pass_at_k"]}
    # pass@k = 1 - C(n-c, k) / C(n, k), n = 4, averaged over c = 3, 1, 0
    assert values[1] == pytest.approx((3 / 4 + 1 / 4 + 0) / 3)
    assert values[2] == pytest.approx((1 + (1 - 3 / 6) + 0) / 3)
    assert values[4] == pytest.approx((1 + 1 + 0) / 3)
    source = json.loads((src / "records.jsonl").read_text().splitlines()[0])
    assert source["attempts"]["passing"] == 4  # every sample passed the source's checks
    assert report["totals"]["not_run"] == {"prompts": 0, "attempts": 0}


async def test_checks_with_context_get_the_row_the_messages_and_the_options(
    tmp_path: Path,
) -> None:
    seen: list[CheckContext] = []

    def saw(value: str) -> Requirement:
        def check(text: str, context: CheckContext) -> bool:
            seen.append(context)
            return text.endswith(str(context.row["capital"] if context.row else ""))

        return Requirement(f"ends with the row's {value}", check)

    kinds: KindRegistry = collect_kinds()
    kinds.register("requirement", "ends_with_field", saw, plugin="tests")
    rows = {"p0": {"capital": "Paris"}, "p1": {"capital": "Paris"}, "p2": {"capital": "Lima"}}
    data = dataset(tmp_path / "d.jsonl", **rows)
    same = {
        "strategy": "repair",
        # whole answers to rescore: max_words would otherwise stop them at their 6th word
        "budgets": {"loop_budget": 2, "early_stop": False},
        "options": {"temperature": 0.5},
    }
    # every long reply fails max_words: a repaired attempt follows each first one
    config = write_config(tmp_path / "run.yaml", data, **same, requirements=[{"max_words": 5}])
    await run_batch(config, tmp_path / "src", backend=ScriptedBackend(long_reply))

    new_rules = write_config(
        tmp_path / "new.yaml", data, **same, requirements=[{"ends_with_field": "capital"}]
    )
    await rescore(tmp_path / "src", tmp_path / "new", config=new_rules, kinds=kinds)
    statuses = {r["key"]: r["status"] for r in records(tmp_path / "new")}
    assert statuses == {"p0": "ok", "p1": "failed", "p2": "failed"}
    first = next(c for c in seen if c.iteration and c.iteration.attempt == 1)
    repaired = next(c for c in seen if c.iteration and c.iteration.attempt == 2)
    assert first.row is not None and first.row["capital"] == rows[first.row["id"]]["capital"]
    assert [m["content"] for m in first.messages] == [first.row["prompt"]]
    assert "previous answer was rejected" in repaired.messages[-1]["content"]
    assert first.options["temperature"] == 0.5 and isinstance(first.options["seed"], int)
    assert first.generate is not None
    with pytest.raises(RuntimeError, match="rescoring calls no model"):
        await first.generate(GenerationRequest([{"role": "user", "content": "?"}]))


async def test_what_the_source_never_ran_is_said_not_guessed(tmp_path: Path) -> None:
    # each prompt stopped at its first pass; the stricter check fails every kept attempt,
    # and the engine would have gone on: 3 attempts of subsample 0 and 3 of subsample 1
    budgets = {"loop_budget": 3, "concurrency_budget": 2}
    src = await source_run(tmp_path, ["one two"], budgets=budgets)
    summary = await rescore(src, tmp_path / "new", requirements=[{"contains": "three"}])
    for record in records(tmp_path / "new"):
        ran = len(record["attempts"]["each"])
        assert record["rescored"]["not_run"] == 2 * 3 - ran
    assert summary.not_run[0] == 3
    assert "never ran (the source stopped them early)" in summary.render()
    notes = run_data(tmp_path / "new")["notes"]
    assert any("3 prompts are judged on fewer attempts" in note for note in notes)


async def test_refusals_write_nothing(tmp_path: Path) -> None:
    src = await source_run(tmp_path)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep me")
    changed = write_config(
        tmp_path / "other.yaml",
        tmp_path / "d.jsonl",
        backend=UNANSWERING,
        requirements=[{"max_words": 500}],
        budgets={"loop_budget": 2},
    )
    cases: list[tuple[Any, Path, dict[str, Any], type[Exception], str]] = [
        (tmp_path / "nothing", tmp_path / "new", {}, RunDirError, "does not exist"),
        (src, src, {}, RunDirError, "is the run itself"),
        (src, src / "inside", {}, RunDirError, "is inside the run"),
        (src, tmp_path / "full", {}, RunDirError, "already holds files"),
        (src, tmp_path / "new", {"config": changed}, ConfigError, "budgets.loop_budget: 1 -> 2"),
        (src, tmp_path / "new", {"requirements": [{"no_such": 1}]}, ConfigError, "no_such"),
    ]
    for source, out, extra, error, message in cases:
        before = snapshot(tmp_path)
        with pytest.raises(error, match=message):
            await rescore(source, out, **extra)
        assert snapshot(tmp_path) == before, message
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


async def test_a_source_that_cannot_be_rescored_is_refused_with_nothing_written(
    tmp_path: Path,
) -> None:
    src = await source_run(tmp_path)
    texts = (src / "texts.jsonl").read_bytes()
    lines = (src / "records.jsonl").read_bytes().splitlines(keepends=True)
    damage = [
        ("records.jsonl", b"".join(lines[:2]), RunDirError, "1 of 3 prompts have no record"),
        ("texts.jsonl", texts.splitlines(keepends=True)[0], RunDirError, "lacks the whole text"),
        ("d.jsonl", b'{"id": "p0", "prompt": "changed"}\n', DatasetError, "is not the dataset"),
    ]
    for name, content, error, message in damage:
        kept = (src.parent / name if name == "d.jsonl" else src / name).read_bytes()
        target = src.parent / name if name == "d.jsonl" else src / name
        target.write_bytes(content)
        before = snapshot(tmp_path)
        with pytest.raises(error, match=message):
            await rescore(src, tmp_path / "deep" / "er" / "new")
        assert snapshot(tmp_path) == before and not (tmp_path / "deep").exists(), message
        target.write_bytes(kept)
    (src / "texts.jsonl").unlink()  # a run made before texts were kept
    with pytest.raises(RunDirError, match="keeps no whole texts"):
        await rescore(src, tmp_path / "new")


def test_the_command_writes_a_run_with_its_view_and_prints_its_report(tmp_path: Path) -> None:
    import anyio

    src = anyio.run(source_run, tmp_path)
    result = CliRunner().invoke(
        app, ["rescore", str(src), "--out", str(tmp_path / "new"), "--require", "regex:Rome$"]
    )
    assert result.exit_code == 0, result.output
    assert f"Rescored from {src.resolve()}" in result.output
    assert "failed p0: matches /Rome$/" in result.output
    page = (tmp_path / "new" / "view.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and '"key": "p1"' in page
    assert {r["key"]: r["status"] for r in records(tmp_path / "new")}["p1"] == "ok"
    refused = CliRunner().invoke(app, ["rescore", str(src), "--out", str(src / "x")])
    assert refused.exit_code == 2 and "is inside the run" in refused.output
    assert rescore_sync(src, tmp_path / "sync").ok == 3
