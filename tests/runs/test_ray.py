"""The Ray executor on a real local Ray cluster, started once for these tests."""

from __future__ import annotations

import json
import sqlite3
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builtin_plugins.mlflow_export import RUN_DIR_TAG, MlflowExporter
from hook_specs import HookName
from sampling_core.backends import ResponseCache
from sampling_core.runs import ConfigError, run_batch, run_batch_sync
from sampling_core.testing import HookRecorder
from tests.support.ray_test_plugins import ExitAlways, ExitOnce, RefusedOnWorker
from tests.support.runs_helpers import check_order, records, snapshot, write_config, write_dataset

ray = pytest.importorskip("ray", reason="the `ray` extra is part of the test extra")
pytestmark = pytest.mark.ray
CHECKOUT = Path(__file__).resolve().parents[2]  # workers import tests.support.*


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 2-CPU local cluster whose workers import our test plugins; the marker
    path of ``ray_test_plugins.ExitOnce`` is what the fixture yields."""
    marker = tmp_path_factory.mktemp("ray") / "exit-marker"
    env = {"PYTHONPATH": str(CHECKOUT), "SAMPLEHOOKS_TEST_EXIT_MARKER": str(marker)}
    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": env})
    try:
        yield marker
    finally:
        ray.shutdown()


def on_ray(workers: int = 2, calls: int = 4, **run: Any) -> dict[str, Any]:
    return {"executor": "ray", "ray": {"workers": workers, "calls_per_worker": calls}, **run}


def comparable(run_dir: Path) -> dict[str, Any]:
    """Each key's record without what depends on when and where it ran."""
    out = {}
    for record in records(run_dir):
        assert record["sampling_id"]  # one per call: differs from run to run
        dropped = ("seq", "session", "timings", "sampling_id")
        record = {k: v for k, v in record.items() if k not in dropped}
        record["usage"].pop("latency_s", None)
        for attempt in record["attempts"].get("each", []):
            # which subsample's attempt ends first is the scheduler's choice (trio's varies)
            for varies in ("latency_s", "subsample", "sequence", "iteration"):
                attempt.pop(varies, None)
        assert record["key"] not in out, f"{record['key']} has two records"
        out[record["key"]] = record
    return out


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "prompts.jsonl", 60, zebra_every=4)


@pytest.mark.anyio
async def test_ray_gives_the_records_of_the_same_local_run(
    ray_cluster: Path, tmp_path: Path, dataset: Path
) -> None:
    same = {"budgets": {"loop_budget": 2, "concurrency_budget": 2}, "plugins": ["recorder"]}
    local = write_config(tmp_path / "local.yaml", dataset, **same)
    remote = write_config(tmp_path / "ray.yaml", dataset, **same, run=on_ray())
    await run_batch(local, tmp_path / "local")
    seen = HookRecorder()  # the driver's: it sees the run hooks (the workers' copies, the calls)
    await run_batch(remote, tmp_path / "ray", plugins=[seen])
    check_order(seen, {f"p{i}" for i in range(60)}, calls=False)
    assert seen.events[0]["executor"] == "ray"
    expected = comparable(tmp_path / "local")
    assert len(expected) == 60
    assert {r["status"] for r in expected.values()} == {"ok", "failed"}
    assert comparable(tmp_path / "ray") == expected
    progress = json.loads((tmp_path / "ray" / "progress.json").read_text())
    assert (progress["state"], progress["done"], progress["ok"]) == ("finished", 60, 45)
    # what the workers' recorder plugins saw reached the driver's events.jsonl
    hooks = [json.loads(line)["hook"] for line in (tmp_path / "ray" / "events.jsonl").open()]
    assert hooks.count("sampling_loop_end") == 60
    # and they join the records by sampling_id, as a local run's do
    ends = [json.loads(line) for line in (tmp_path / "ray" / "events.jsonl").open()]
    ids = {e["payload"]["sampling_id"] for e in ends if e["hook"] == "sampling_loop_end"}
    assert {r["sampling_id"] for r in records(tmp_path / "ray")} == ids
    # the workers' calls carry their prompt's key; the driver's recorder wrote the run hooks
    keys = {r["sampling_id"]: r["key"] for r in records(tmp_path / "ray")}
    for event in ends:
        if event["hook"] == "sampling_loop_end":
            assert event["payload"]["prompt_key"] == keys[event["payload"]["sampling_id"]]
    assert hooks.count("prompt_end") == 60 and hooks.count("run_end") == 1
    assert sorted(set(hooks)) == sorted(
        {json.loads(line)["hook"] for line in (tmp_path / "local" / "events.jsonl").open()}
    )


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(
    ray_cluster: Path, tmp_path: Path, dataset: Path
) -> None:
    ray_cluster.unlink(missing_ok=True)
    config = write_config(
        tmp_path / "ray.yaml",
        dataset,
        backend={"kind": "scripted", "replies": ["a short answer"], "latency_s": 0.01},
        run=on_ray(),
    )
    reference = write_config(tmp_path / "local.yaml", dataset)
    # a plugin object: copied to each worker, as an installed plugin would be loaded there
    seen = HookRecorder()
    run_batch_sync(config, tmp_path / "ray", plugins=[ExitOnce(), seen])
    assert ray_cluster.exists(), "no worker ended itself: the test proved nothing"
    # the prompts the dead worker held were announced once, and ended once
    check_order(seen, {f"p{i}" for i in range(60)}, calls=False)
    run_batch_sync(reference, tmp_path / "local")
    got = comparable(tmp_path / "ray")  # fails on a duplicate
    assert got == comparable(tmp_path / "local")
    assert all(r["status"] != "error" for r in got.values())


def test_a_prompt_whose_workers_keep_dying_ends_in_one_error_record(
    ray_cluster: Path, tmp_path: Path
) -> None:
    dataset = tmp_path / "one.jsonl"
    dataset.write_text(json.dumps({"id": "boom", "prompt": "exit"}) + "\n")
    config = write_config(
        tmp_path / "ray.yaml",
        dataset,
        run=on_ray(workers=1),
    )
    seen = HookRecorder()
    summary = run_batch_sync(config, tmp_path / "ray", plugins=[ExitAlways(), seen])
    [record] = records(tmp_path / "ray")
    [ended] = seen.payloads(HookName.PROMPT_END)
    assert ended.record == record and len(seen.payloads(HookName.PROMPT_START)) == 1
    assert summary.error == 1 and record["status"] == "error"
    assert "worker running it died 3 times" in record["reason"]


@pytest.mark.slow  # and a real MLflow store
def test_resume_local_then_ray_then_local(
    ray_cluster: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow.tracking

    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is ./mlruns
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    dataset = write_dataset(tmp_path / "prompts.jsonl", 40, zebra_every=3)
    local = write_config(tmp_path / "local.yaml", dataset)
    remote = write_config(tmp_path / "ray.yaml", dataset, run=on_ray(workers=2, calls=3))
    run_batch_sync(local, tmp_path / "whole")
    out = tmp_path / "out"
    run_batch_sync(local, out, plugins=[MlflowExporter(tracking_uri=uri)])
    keep_first(out, 10)  # as if killed after 10 records
    exporter = MlflowExporter(tracking_uri=uri)  # on Ray, the driver exports
    run_batch_sync(remote, out, resume=True, plugins=[exporter])
    assert len(records(out)) == 40 and exporter.problems == []
    keep_first(out, 25)  # killed again, with records of both executors kept
    run_batch_sync(local, out, resume=True, plugins=[MlflowExporter(tracking_uri=uri)])
    assert comparable(out) == comparable(tmp_path / "whole")
    # one MLflow run over the three sessions, the Ray one included
    client = mlflow.tracking.MlflowClient(tracking_uri=uri)
    [run] = client.search_runs(
        [client.get_experiment_by_name("samplehooks").experiment_id],
        filter_string=f"tags.`{RUN_DIR_TAG}` = '{out}'",
    )
    assert run.info.status == "FINISHED"
    done = [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "ok")]
    ok = float(sum(r["status"] == "ok" for r in records(out)))
    assert done == [(1, ok), (2, ok), (3, ok)]
    assert [r["session"] for r in records(out)][::12] == [1, 2, 2, 3]
    lineage = (out / "effective_config.yaml").read_text().split("# lineage:")[1]
    assert 'run.executor: "local" -> "ray"' in lineage
    assert 'run.executor: "ray" -> "local"' in lineage


def keep_first(run_dir: Path, count: int) -> None:
    lines = (run_dir / "records.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "records.jsonl").write_text("".join(lines[:count]))


def test_an_unreachable_cluster_is_one_error_and_nothing_is_written(
    ray_cluster: Path, tmp_path: Path, dataset: Path
) -> None:
    config = write_config(
        tmp_path / "ray.yaml", dataset, run={"executor": "ray", "ray": {"address": "127.0.0.1:9"}}
    )
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match=r"cannot reach the Ray cluster at 127\.0\.0\.1:9"):
        run_batch_sync(config, tmp_path / "out")
    assert snapshot(tmp_path) == before and not (tmp_path / "out").exists()


def test_the_drivers_memory_does_not_grow_with_the_dataset(
    ray_cluster: Path, tmp_path: Path
) -> None:
    def peak(count: int) -> int:
        data = tmp_path / f"d{count}.jsonl"
        with data.open("w") as out:  # 4 KB prompts: holding them all would show
            for i in range(count):
                out.write(json.dumps({"id": i, "prompt": f"{i} " + "word " * 800}) + "\n")
        config = write_config(
            tmp_path / f"c{count}.yaml",
            data,
            requirements=[],
            run=on_ray(workers=2, calls=8, flush_every=64),
        )
        tracemalloc.start()
        try:
            run_batch_sync(config, tmp_path / f"out{count}")
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = peak(500), peak(3000)
    assert len(records(tmp_path / "out3000")) == 3000
    # 2,500 more prompts of 4 KB (10 MB of prompts, more as records) held at once would
    # show here; what a run holds is the prompts in flight.
    assert large - small < 4_000_000, (small, large)


def test_the_clusters_own_address_passes_the_probe(ray_cluster: Path) -> None:
    from sampling_core.runs.execution.ray_executor import _probe

    _probe(ray.get_runtime_context().gcs_address)  # a real Ray answers as Ray: no error


def test_a_workers_setup_error_is_reported_plainly(
    ray_cluster: Path, tmp_path: Path, dataset: Path
) -> None:
    config = write_config(tmp_path / "ray.yaml", dataset, run=on_ray(workers=1))
    with pytest.raises(ConfigError) as caught:
        run_batch_sync(config, tmp_path / "out", plugins=[RefusedOnWorker()])
    message = str(caught.value)
    assert "a Ray worker cannot set up the run: ConfigError: plugins: plugin " in message
    assert "@background is only for observe-only hooks" in message
    assert "\x1b" not in message and "Traceback" not in message


@pytest.mark.anyio
async def test_the_response_cache_works_when_workers_share_the_drivers_filesystem(
    ray_cluster: Path, tmp_path: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "responses.sqlite"
    config = write_config(tmp_path / "c.yaml", dataset, run=on_ray(cache=str(cache)))
    assert (await run_batch(config, tmp_path / "run")).complete
    with sqlite3.connect(cache) as db:  # the workers wrote every answer into the one file
        assert db.execute("SELECT count(*) FROM entries").fetchone()[0] == 60
    # a worker that finds another file there (a node without the driver's filesystem)
    monkeypatch.setattr(ResponseCache, "new_probe", lambda self: "a token not in the file")
    before = snapshot(tmp_path / "run")
    with pytest.raises(ConfigError, match="does not see the driver's response cache"):
        await run_batch(config, tmp_path / "refused")
    assert not (tmp_path / "refused").exists() and snapshot(tmp_path / "run") == before


@pytest.mark.anyio
async def test_a_consensus_vote_replayed_from_the_cache_on_ray_is_the_local_runs(
    ray_cluster: Path, tmp_path: Path
) -> None:
    """A vote that ends once settled, run locally into a cache, then on Ray from it: every
    answer is a hit, and each prompt's pick, counts (never-started subsamples too) and
    samples are the local run's; no subsample never started is counted as cached."""
    dataset = write_dataset(tmp_path / "prompts.jsonl", 12)
    cache = tmp_path / "responses.sqlite"
    same: dict[str, Any] = {
        "backend": {"kind": "scripted", "replies": ["7", "7", "3", "9", "7", "3", "3"]},
        "strategy": {"name": "majority", "consensus": 1.0},
        "budgets": {"concurrency_budget": 5, "launch": "on_failure"},
    }
    local = write_config(tmp_path / "local.yaml", dataset, run={"cache": str(cache)}, **same)
    remote = write_config(tmp_path / "ray.yaml", dataset, run=on_ray(cache=str(cache)), **same)
    await run_batch(local, tmp_path / "local")
    await run_batch(remote, tmp_path / "ray")

    def outcome(record: dict[str, Any]) -> tuple[Any, ...]:
        attempts = record["attempts"]
        counts = ("used", "cancelled", "not_started", "samples")
        return (record["status"], record["text"], *(attempts[name] for name in counts))

    before = {r["key"]: outcome(r) for r in records(tmp_path / "local")}
    after = {r["key"]: r for r in records(tmp_path / "ray")}
    assert {key: outcome(r) for key, r in after.items()} == before
    assert any(r[4] for r in before.values())  # some prompts left subsamples unstarted
    for record in after.values():
        assert record["usage"]["cached"]["calls"] == record["attempts"]["used"]
        assert all(entry["cached"] for entry in record["attempts"]["each"])
