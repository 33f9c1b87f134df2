"""``samplehooks run`` and ``samplehooks report`` as a user sees them."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sampling_core.cli import app
from tests.support.runs_helpers import snapshot, write_config, write_dataset

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def config(tmp_path: Path) -> Path:
    dataset = write_dataset(tmp_path / "data.jsonl", 5, zebra_every=5)  # p0 fails
    return write_config(tmp_path / "run.yaml", dataset, budgets={"loop_budget": 2})


def test_run_prints_the_summary_and_report_prints_it_again(tmp_path: Path, config: Path) -> None:
    out = tmp_path / "out"
    result = invoke("run", config, "--out", out)
    assert result.exit_code == 0, result.output
    assert f"started run {out}: 5 prompts" in result.stderr
    assert f"Run {out}: 5 of 5 prompts done (complete)" in result.stdout
    assert "success rate: 80.0%" in result.stdout
    assert "Attempts per prompt:" in result.stdout
    report = invoke("report", out)
    assert report.exit_code == 0
    assert report.stdout == result.stdout
    as_json = invoke("report", out, "--json")
    assert '"ok": 4' in as_json.stdout and '"failed": 1' in as_json.stdout


def test_resume_with_a_changed_limit_then_a_refused_budget(tmp_path: Path, config: Path) -> None:
    out = tmp_path / "out"
    assert invoke("run", config, "--out", out).exit_code == 0
    faster = config.with_name("faster.yaml")
    faster.write_text(config.read_text() + "run: {max_concurrent_prompts: 1}\n")
    resumed = invoke("run", faster, "--out", out, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "run.max_concurrent_prompts: 4 -> 1" in resumed.stderr
    assert "5 of 5 prompts done, 0 to run" in resumed.stderr

    before = snapshot(out)
    bigger = config.with_name("bigger.yaml")
    bigger.write_text(config.read_text().replace("loop_budget: 2", "loop_budget: 3"))
    refused = invoke("run", bigger, "--out", out, "--resume")
    assert refused.exit_code == 2
    assert refused.stdout == ""
    assert refused.stderr.startswith(f"samplehooks: error: refusing to resume {out}")
    assert "  budgets.loop_budget: 2 -> 3\n" in refused.stderr
    assert "Ways out:" in refused.stderr and "Nothing was written" in refused.stderr
    assert snapshot(out) == before


def test_rerunning_into_a_run_directory_is_refused(tmp_path: Path, config: Path) -> None:
    out = tmp_path / "out"
    assert invoke("run", config, "--out", out).exit_code == 0
    before = snapshot(out)
    again = invoke("run", config, "--out", out)
    assert again.exit_code == 2
    assert "already holds files; to continue the run there add --resume" in again.stderr
    assert snapshot(out) == before
    retry = invoke("run", config, "--out", out, "--retry-failed")
    assert retry.exit_code == 2 and "add --resume" in retry.stderr


def test_user_errors_are_one_line_and_write_nothing(tmp_path: Path, config: Path) -> None:
    out = tmp_path / "out"
    bad = config.with_name("bad.yaml")
    bad.write_text(config.read_text() + "run: {max_concurent_prompts: 2}\n")
    result = invoke("run", bad, "--out", out)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"samplehooks: error: {bad}: run.max_concurent_prompts: unknown key "
        "(did you mean 'max_concurrent_prompts'?)"
    ]
    dataset = tmp_path / "data.jsonl"
    dataset.write_text(dataset.read_text() + '{"id": "p9", "prompt": "x", "require": "no"}\n')
    result = invoke("run", config, "--out", out)
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert f"{dataset}:6: require" in result.stderr
    assert not out.exists()
    missing = invoke("report", tmp_path / "nowhere")
    assert missing.exit_code == 2 and "there is no run to resume" not in missing.stderr
    assert "does not exist" in missing.stderr


def test_without_out_a_new_directory_under_runs_is_used(
    tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import UTC, datetime

    from sampling_core.cli.run_cmd import default_run_dir

    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert default_run_dir(Path("examples/quickstart.yaml"), when) == Path(
        "runs/quickstart-20260102-030405"
    )
    monkeypatch.chdir(tmp_path)
    result = invoke("run", config)
    assert result.exit_code == 0, result.output
    (made,) = (tmp_path / "runs").iterdir()
    assert made.name.startswith("run-")
    assert (made / "records.jsonl").exists()
    refused = invoke("run", config, "--resume")
    assert refused.exit_code == 2 and "--out DIR" in refused.stderr


def test_run_reads_its_records_once_for_the_summary_and_the_report(
    tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading a run's records is most of the time a large run's end takes (about 40 s a
    million): `samplehooks run` prints the summary and the report from one reading, and a
    resume answers what is left from that same reading."""
    from sampling_core.runs.store.index import RunIndex

    built: list[Path] = []
    real_build = RunIndex.build.__func__

    def counting_build(cls, run_dir):
        built.append(run_dir.path)
        return real_build(cls, run_dir)

    monkeypatch.setattr(RunIndex, "build", classmethod(counting_build))
    out = tmp_path / "out"
    first = invoke("run", config, "--out", out)
    assert first.exit_code == 0, first.output
    assert "success rate: 80.0%" in first.stdout
    assert built == [out]
    built.clear()
    again = invoke("run", config, "--out", out, "--resume")
    assert again.exit_code == 0, again.output
    assert "success rate: 80.0%" in again.stdout
    assert built == [out]
