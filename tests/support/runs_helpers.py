"""Helpers shared by the batch-run tests: datasets, configs, directory snapshots."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

import sampling_core


def write_dataset(path: Path, count: int, *, zebra_every: int = 0) -> Path:
    """``count`` prompts ``p0..``; every ``zebra_every``-th also requires the word zebra."""
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            line: dict[str, Any] = {"id": f"p{i}", "prompt": f"Question number {i}?"}
            if zebra_every and i % zebra_every == 0:
                line["require"] = [{"contains": "zebra"}]
            out.write(json.dumps(line) + "\n")
    return path


def write_config(path: Path, dataset: Path, **overrides: Any) -> Path:
    """A scripted-backend config over ``dataset``; ``overrides`` replace top-level blocks."""
    config: dict[str, Any] = {
        "dataset": {"path": str(dataset), "id_field": "id"},
        "backend": {"kind": "scripted", "replies": ["a short answer"]},
        "requirements": [{"max_words": 5}],
        "seed": 11,
    }
    config.update(overrides)
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` with its bytes (to show nothing was written)."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def run_under_ascii_locale(script: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``python -c script *args`` under a plain ASCII locale: no UTF-8 mode, no locale
    coercion, no ``PYTHONIOENCODING``; stdout and stderr captured as bytes.

    It imports the ``sampling_core`` this test imported (under mutmut: the mutated copy),
    not an installed one.
    """
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    env.pop("PYTHONIOENCODING", None)
    env["PYTHONPATH"] = str(Path(sampling_core.__file__).resolve().parent.parent)
    return subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, env=env, check=False
    )


def records(run_dir: Path) -> list[dict[str, Any]]:
    """The complete records of a run directory, in file order."""
    text = (run_dir / "records.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def openai_run_config(
    folder: Path,
    prompts: list[str],
    *,
    api_key_env: str,
    backend: dict[str, Any] | None = None,
    **blocks: Any,
) -> Path:
    """A run over ``prompts`` (ids ``p0..``) with the ``openai`` backend (model ``m``, its
    key read from ``api_key_env``) and the recorder and tracing on; ``backend`` adds to
    the backend block, ``blocks`` are more top-level blocks. Returns the config's path."""
    folder.mkdir(parents=True, exist_ok=True)
    dataset = folder / "data.jsonl"
    dataset.write_text(
        "".join(json.dumps({"id": f"p{i}", "prompt": p}) + "\n" for i, p in enumerate(prompts))
    )
    config = folder / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "dataset": {"path": str(dataset), "id_field": "id"},
                "backend": {
                    "kind": "openai",
                    "model": "m",
                    "api_key_env": api_key_env,
                    **(backend or {}),
                },
                **blocks,
                "plugins": ["recorder", "tracing"],
            }
        )
    )
    return config


def check_order(seen: Any, keys: set[str], *, calls: bool = True) -> None:
    """Assert the run hooks a ``HookRecorder`` saw came in order, each exactly once: one
    ``run_start`` first, one ``run_end`` last, and for each of ``keys`` one ``prompt_start``
    then (with ``calls``: its call's hooks, which carry its ``prompt_key``) one ``prompt_end``."""
    from hook_specs import HookName as H

    run = set(H.run())
    events = seen.events
    assert events[0].hook is H.RUN_START and events[-1].hook is H.RUN_END
    assert [e.hook for e in events].count(H.RUN_START) == 1
    assert [e.hook for e in events].count(H.RUN_END) == 1
    starts = [e.fields["key"] for e in events if e.hook is H.PROMPT_START]
    ends = [e.fields["key"] for e in events if e.hook is H.PROMPT_END]
    assert sorted(starts) == sorted(ends) == sorted(keys)  # exactly once each
    at: dict[str, list[int]] = {key: [] for key in keys}
    for index, event in enumerate(events):
        key = event.fields.get("key") if event.hook in run else event.fields["prompt_key"]
        if key is not None:
            at[key].append(index)
    for key, positions in at.items():
        start, *between, end = positions
        assert events[start].hook is H.PROMPT_START and events[end].hook is H.PROMPT_END, key
        assert all(events[i].hook not in run for i in between), key
        assert bool(between) == calls, key
