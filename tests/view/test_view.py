"""``samplehooks view``: the data a page embeds, its timelines, its self-containment, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from builtin_plugins.recorder import RecorderPlugin
from sampling_core import Sampler, ScriptedBackend, view
from sampling_core.events.attempts import read_calls
from sampling_core.requirements.checks import max_words
from sampling_core.runs.store.record import read_record
from sampling_core.view import build_page, run_data
from sampling_core.view.timeline import lanes_from_call, lanes_from_record
from tests.support.reliability_helpers import invoke
from tests.support.runs_helpers import records
from tests.support.view_helpers import make_run


def embedded(page: str) -> dict:
    found = re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S)
    assert found
    return json.loads(found.group(1))


def test_the_page_embeds_every_prompt_with_its_lanes(tmp_path: Path) -> None:
    out = make_run(tmp_path, "a")
    data = run_data(out)
    assert data["complete"] and data["budgets"]["early_exit"] is False
    assert [p["k"] for p in data["pass_at_k"]] == [1, 2, 4]
    assert [p["k"] for p in data["pass_hat_k"]] == [1, 2, 4]
    assert data["pass_hat_k"][0]["value"] == data["pass_at_k"][0]["value"]  # both c/n at k=1
    by_key = {r["key"]: r for r in records(out)}
    assert {p["key"] for p in data["prompts"]} == set(by_key)
    for prompt in data["prompts"]:
        assert prompt["timeline_source"] == "events"
        assert [lane["subsample"] for lane in prompt["lanes"]] == [0, 1, 2, 3]
        outcomes = [lane["steps"][0]["outcome"] for lane in prompt["lanes"]]
        each = sorted(by_key[prompt["key"]]["attempts"]["each"], key=lambda e: e["subsample"])
        assert outcomes == ["passed" if e["passed"] else "failed" for e in each]
        for lane in prompt["lanes"]:
            step = lane["steps"][0]
            assert step["text"]  # not captured in the events: taken from the record
            assert bool(step["reasons"]) == (step["outcome"] == "failed")


def test_without_events_the_timelines_come_from_the_records(tmp_path: Path) -> None:
    out = make_run(tmp_path, "a", plugins=[])
    data = run_data(out)
    assert any("no events.jsonl" in note for note in data["notes"])
    assert {p["timeline_source"] for p in data["prompts"]} == {"records"}
    assert all(len(p["lanes"]) == 4 for p in data["prompts"])


@pytest.mark.anyio
async def test_events_show_the_attempts_an_early_exit_cancelled(tmp_path: Path) -> None:
    async def reply(request) -> str:
        if request.iteration.subsample_index == 0:
            await anyio.sleep(0.01)  # the siblings are in flight when it passes
            return "ok"
        await anyio.sleep(60)  # cancelled by subsample 0's pass
        return "never"

    recorder = RecorderPlugin(tmp_path / "events.jsonl")
    sampler = Sampler(ScriptedBackend(reply), plugins=[recorder], load_entrypoints=False)
    result = await sampler.sample("q", requirements=[max_words(3)], concurrency_budget=3)
    recorder.close()
    assert result.cancelled == 2
    (call,) = read_calls(tmp_path / "events.jsonl")
    lanes = lanes_from_call(call)
    assert [(lane["subsample"], [s["outcome"] for s in lane["steps"]]) for lane in lanes] == [
        (0, ["passed"]),
        (1, ["cancelled"]),
        (2, ["cancelled"]),
    ]


def test_records_alone_show_a_subsample_cut_short_as_cancelled() -> None:
    record = {
        "key": "p",
        "status": "ok",
        "attempts": {
            "used": 2,
            "cancelled": 1,
            "loop_budget": 3,
            "each": [
                {"subsample": 0, "attempt": 1, "passed": True},
                {"subsample": 1, "attempt": 1, "passed": False, "failed": ["too long"]},
                {"subsample": 2, "attempt": 1, "passed": False, "error": "BackendError: 500"},
            ],
        },
    }
    lanes = lanes_from_record(read_record(record))
    assert [[s["outcome"] for s in lane["steps"]] for lane in lanes] == [
        ["passed"],
        ["failed", "cancelled"],
        ["error"],
    ]


def test_the_page_is_self_contained_and_escapes_answers(tmp_path: Path) -> None:
    out = make_run(tmp_path, "a", backend={"kind": "scripted", "replies": ["</script><b>x"]})
    page = build_page([out])
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert "</script><b>" not in page  # escaped inside the JSON
    data = embedded(page)
    assert data["runs"][0]["prompts"][0]["text"] == "</script><b>x"


def test_view_writes_the_page_and_compares_two_runs(tmp_path: Path) -> None:
    a = make_run(tmp_path, "a")
    b = make_run(tmp_path, "b", budgets={"loop_budget": 2, "concurrency_budget": 1})
    result = invoke("view", a)
    assert result.exit_code == 0, result.output
    assert (a / "view.html").is_file() and "wrote" in result.stdout
    result = invoke("view", a, b, "-o", tmp_path / "cmp.html")
    assert result.exit_code == 0, result.output
    runs = embedded((tmp_path / "cmp.html").read_text())["runs"]
    assert [r["name"] for r in runs] == ["a", "b"]


def test_view_of_a_run_in_progress_says_what_is_pending(tmp_path: Path) -> None:
    out = make_run(tmp_path, "a")
    lines = (out / "records.jsonl").read_text().splitlines(keepends=True)
    (out / "records.jsonl").write_text("".join(lines[:3]) + lines[3][:20])  # a torn last line
    (out / "progress.json").unlink()
    data = run_data(out)
    assert not data["complete"] and len(data["prompts"]) == 3
    assert any("5 of 8 prompts have no record yet" in note for note in data["notes"])
    with (out / "events.jsonl").open("a") as events:
        events.write('{"hook": "sampling_iter')  # the recorder's line being written
    assert any("1 lines skipped" in note for note in run_data(out)["notes"])


@pytest.mark.parametrize("damage", ["missing", "empty", "file", "bad_record", "bad_meta"])
def test_bad_input_is_one_line(tmp_path: Path, damage: str) -> None:
    target = tmp_path / "run"
    if damage == "empty":
        target.mkdir()
    elif damage == "file":
        target.write_text("not a directory")
    elif damage in ("bad_record", "bad_meta"):
        target = make_run(tmp_path, "run", count=2)
        name = "records.jsonl" if damage == "bad_record" else "meta.json"
        (target / name).write_text("{oops\n")
    for command in ("view", "report"):
        result = invoke(command, target)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("samplehooks: error: ")
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


def test_view_takes_at_most_two_runs(tmp_path: Path) -> None:
    result = invoke("view", tmp_path, tmp_path, tmp_path)
    assert result.exit_code == 2 and "one run directory, or two" in result.stderr


def test_a_scored_attempt_shows_its_score() -> None:
    each = [{"subsample": 0, "attempt": 1, "passed": True, "score": 0.75}]
    (lane,) = lanes_from_record(
        read_record({"key": "p", "status": "ok", "attempts": {"each": each}})
    )
    assert lane["steps"][0]["score"] == 0.75
    assert "score ${fmt(st.score, 3)}" in (Path(view.__file__).parent / "template.html").read_text()


def test_two_runs_compared_embed_the_paired_comparison_and_the_flipped_prompts(
    tmp_path: Path,
) -> None:
    a = make_run(tmp_path, "a")  # p0 and p4 need a zebra: failed
    b = make_run(tmp_path, "b", backend={"kind": "scripted", "replies": ["a zebra"]})
    compare = embedded(build_page([a, b]))["compare"]
    [success, *_] = compare["measures"]
    assert (success["label"], success["a"], success["b"]) == ("success_rate", 0.75, 1.0)
    assert compare["flipped"]["better_in_b_keys"] == ["p0", "p4"]
    sides = compare["sides"]["p4"]
    assert (sides["a"]["status"], sides["b"]["status"]) == ("failed", "ok")
    assert len(sides["a"]["lanes"]) == 4 and sides["b"]["lanes"]


def test_two_runs_without_a_prompt_in_common_still_make_a_page(tmp_path: Path) -> None:
    a = make_run(tmp_path, "a", count=2)
    b = make_run(tmp_path, "b", count=2)
    lines = (b / "records.jsonl").read_text().replace('"key":"p', '"key":"other-p')
    (b / "records.jsonl").write_text(lines)
    compare = embedded(build_page([a, b]))["compare"]
    assert "no prompt is in both runs" in compare["error"] and compare["measures"] == []
