"""A batch run stopped part way (SIGKILL, Ctrl-C) and resumed gives the numbers an
uninterrupted run gives, and a plugin's async wrapper on ``generation_call`` closes every
call it opened, whether the call passed, a sibling's success cancelled it, or Ctrl-C did."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import sampling_core
from tests.support.interrupt_helpers import python_command
from tests.support.plugin_site import write_site
from tests.support.runs_helpers import write_config

pytestmark = pytest.mark.slow

CHECKOUT = Path(sampling_core.__file__).resolve().parent.parent
PROMPTS = 30
# each prompt's three samples get these three replies (one prompt at a time, three calls
# each, so a resumed run starts a prompt where the cycle starts): the last one is cut by
# early stop, and its answer is never said
REPLIES = ["the answer is yes", "no", "one two three four five six seven yes"]

TRACKER = '''
import os
from hook_specs import hookimpl

def note(line):
    with open(os.environ["TRACKER_LOG"], "a", encoding="utf-8") as out:
        out.write(line + "\\n")

class Tracker:
    """Opens something around each backend call, and closes it."""

    affects_results = False

    @hookimpl(wrapper=True)
    async def generation_call(self, payload):
        call = f"{payload.sampling_id}:{payload.iteration}:{payload.retry}"
        note("open " + call)
        how = "raised"
        try:
            yield
            how = "ok"
        finally:
            note(f"close {call} {how}")
'''


def dataset(path: Path) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for i in range(PROMPTS):
            line: dict[str, Any] = {"id": f"p{i}", "prompt": f"Question {i}?", "answer": "yes"}
            if i % 5 == 0:  # these need a word no reply has
                line["require"] = [{"contains": "zebra"}]
            out.write(json.dumps(line) + "\n")
    return path


def config(tmp_path: Path, **blocks: Any) -> Path:
    """pass@k's samples (three a prompt, one attempt each, no early exit) unless ``blocks``
    say otherwise."""
    settings: dict[str, Any] = {
        "backend": {"kind": "scripted", "replies": REPLIES, "latency_s": 0.02},
        "requirements": [{"equals_field": "answer", "extract": "(yes|no)$"}, {"max_words": 5}],
        "budgets": {"loop_budget": 1, "concurrency_budget": 3, "early_exit": False},
        "run": {"max_concurrent_prompts": 1, "flush_every": 1, "progress": "off"},
    }
    settings.update(blocks)
    return write_config(tmp_path / "run.yaml", dataset(tmp_path / "d.jsonl"), **settings)


def env(site: Path | None = None) -> dict[str, str]:
    paths = [str(site)] if site else []
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, str(CHECKOUT)])}


def cli(*args: str | Path, environ: dict[str, str] | None = None) -> str:
    command = [sys.executable, "-m", "sampling_core.cli", *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True, env=environ or env())
    assert done.returncode == 0, done.stderr
    return done.stdout


def wait_for_records(proc: subprocess.Popen[bytes], records: Path, count: int) -> None:
    deadline = time.monotonic() + 60
    while not records.exists() or records.read_bytes().count(b"\n") < count:
        assert proc.poll() is None, "the run ended before it was stopped"
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.005)


def numbers(run: Path) -> dict[str, Any]:
    """What ``report --json`` says of a run, without what depends on time or sessions."""
    report = json.loads(cli("report", run, "--json"))
    totals = report["totals"]
    for varies in ("wall_time_s", "sessions", "rescored_from"):
        totals.pop(varies)
    rows = {
        row["key"]: {k: v for k, v in row.items() if k not in ("sampling_id", "latency_s")}
        for row in report["prompts"]
    }
    for row in rows.values():
        row.pop("elapsed_s")
    return {
        "totals": totals,
        "rows": rows,
        **{name: report[name] for name in ("pass_at_k", "pass_hat_k", "maj_at_k")},
    }


def test_a_run_killed_part_way_and_resumed_reports_what_an_uninterrupted_one_does(
    tmp_path: Path,
) -> None:
    run_config = config(tmp_path)
    cli("run", run_config, "--out", tmp_path / "whole")
    killed = tmp_path / "killed"
    command = [sys.executable, "-m", "sampling_core.cli", "run", str(run_config)]
    proc = subprocess.Popen(
        [*command, "--out", str(killed)],
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_records(proc, killed / "records.jsonl", PROMPTS // 3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (killed / "records.jsonl").read_bytes().count(b"\n") < PROMPTS  # killed part way
    cli("run", run_config, "--out", killed, "--resume")
    whole = numbers(tmp_path / "whole")
    assert whole["pass_at_k"] and whole["pass_hat_k"] and whole["maj_at_k"]
    assert whole["totals"]["stopped_early"] == PROMPTS  # one cut sample a prompt
    resumed = numbers(killed)
    assert resumed["totals"] == whole["totals"], {
        name: (value, resumed["totals"].get(name))
        for name, value in whole["totals"].items()
        if resumed["totals"].get(name) != value
    }
    assert resumed == whole
    # and so do their rescores, and compare finds nothing between them
    yes = write_config(
        tmp_path / "yes.yaml",
        tmp_path / "d.jsonl",
        backend={"kind": "scripted", "replies": REPLIES, "latency_s": 0.02},
        requirements=[{"contains": "yes"}],
        budgets={"loop_budget": 1, "concurrency_budget": 3, "early_exit": False},
    )
    for run in ("whole", "killed"):
        cli("rescore", tmp_path / run, "--out", tmp_path / f"{run}-yes", "--config", yes)
    rescored = numbers(tmp_path / "whole-yes")
    assert rescored["pass_at_k"][0]["not_known"] == PROMPTS  # the cut samples
    assert numbers(tmp_path / "killed-yes") == rescored
    compared = json.loads(cli("compare", tmp_path / "whole", killed, "--json"))
    assert {m["difference"] for m in compared["measures"]} == {0.0}


def test_a_wrapper_closes_every_call_it_opened_when_ctrl_c_stops_a_run(tmp_path: Path) -> None:
    site = write_site(
        tmp_path / "site", "tracker", {"tracker": "tracker:Tracker"}, {"tracker": TRACKER}
    )
    log = tmp_path / "tracker.log"
    environ = {**env(site), "TRACKER_LOG": str(log)}
    # early exit: the first pass of a prompt cancels its siblings' calls in flight
    run_config = config(
        tmp_path,
        plugins=["tracker"],
        budgets={"loop_budget": 2, "concurrency_budget": 3},
    )
    out = tmp_path / "run"
    proc = subprocess.Popen(
        python_command("-m", "sampling_core.cli", "run", str(run_config), "--out", str(out)),
        env=environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wait_for_records(proc, out / "records.jsonl", 5)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    lines = log.read_text(encoding="utf-8").splitlines()
    opened = Counter(line.split()[1] for line in lines if line.startswith("open "))
    closed = Counter(line.split()[1] for line in lines if line.startswith("close "))
    assert opened == closed and set(opened.values()) == {1}  # each closed exactly once
    how = Counter(line.split()[2] for line in lines if line.startswith("close "))
    assert how["ok"] and how["raised"]  # calls that ended, and calls cancelled
    written = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert 5 <= len(written) < PROMPTS
    cli("run", run_config, "--out", out, "--resume", environ=environ)
    keys = [json.loads(line)["key"] for line in (out / "records.jsonl").read_text().splitlines()]
    assert sorted(keys) == sorted(f"p{i}" for i in range(PROMPTS))  # each exactly once
