"""What keeping every attempt's whole text costs: ``python -m benchmarks.kept_texts``.

A run keeps each attempt's whole text in ``texts.jsonl`` beside its records, and the record
a 400-character preview (``sampling_core.runs.store.kept_texts``). Before, a record kept the
preview only and the rest of the text was lost. This runs the quickstart's prompts
(``examples/data/quickstart.jsonl``, repeated to ``--prompts``) the way
``examples/quickstart.yaml`` does (repair strategy, ``loop_budget=3``, its requirements,
``flush_every: 1``) with the scripted backend, twice per repetition in alternating order:

- **kept**: a run as it is now (records with previews, and ``texts.jsonl``);
- **truncated**: the same run with the record writer of before (each attempt's text cut to
  its preview in the record, no ``texts.jsonl``), in this same process.

It prints, for answers of quickstart length (about 48 tokens) and for long answers, the
bytes written per attempt by each and their ratio, and the median of the paired ratios of
their wall times.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from sampling_core import ScriptedBackend
from sampling_core.backends.base import GenerationRequest
from sampling_core.runs import run_batch_sync
from sampling_core.runs.store.kept_texts import split_texts
from sampling_core.runs.store.record_writer import RecordWriter
from sampling_core.runs.store.store import RunDirectory

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "data" / "quickstart.jsonl"
ANSWERS = {"quickstart length (~48 tokens)": 200, "long answers (~2,000 characters)": 2000}


def answer_of(length: int) -> ScriptedBackend:
    """Answers of about ``length`` characters (words of 7); the first attempt of every
    third prompt is twice as long, too long for the run's ``max_words`` (so repairs happen,
    as on a model)."""

    def reply(request: GenerationRequest) -> str:
        words = [f"word{n % 97:02d}" for n in range(length // 7)]
        first = request.iteration is None or request.iteration.attempt == 1
        if first and sum(map(ord, request.prompt)) % 3 == 0:
            words = words + words
        return " ".join(words)

    return ScriptedBackend(reply, keep_requests=0)


def write_inputs(folder: Path, prompts: int, length: int) -> Path:
    """The quickstart's prompts, repeated to ``prompts`` lines, and a config over them."""
    lines = [json.loads(line) for line in QUICKSTART.read_text().splitlines() if line.strip()]
    with (folder / "prompts.jsonl").open("w") as out:
        for number in range(prompts):
            line = dict(lines[number % len(lines)])
            line["id"] = f"{line['id']}-{number}"
            line.pop("require", None)  # the canned answers would fail a line's own checks
            out.write(json.dumps(line) + "\n")
    config = {
        "dataset": {"path": str(folder / "prompts.jsonl"), "id_field": "id"},
        "backend": {"kind": "scripted", "replies": ["unused"]},
        "options": {"max_tokens": 48},
        "strategy": "repair",
        "budgets": {"loop_budget": 3, "concurrency_budget": 1},
        "requirements": [{"max_words": round(1.4 * length / 7)}],  # 40 at 200 characters
        "seed": 1234,
        "run": {"max_concurrent_prompts": 8, "flush_every": 1, "progress": "off"},
    }
    path = folder / f"quickstart-{length}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@contextmanager
def truncated_records() -> Iterator[None]:
    """Runs write records as before: each attempt's text cut to its preview, no texts."""

    class Truncating(RecordWriter):
        def append_sized(self, record: dict[str, Any]) -> tuple[dict[str, Any], int]:
            return super().append_sized(split_texts(record)[0])

    def open_writer(self: RunDirectory, *, flush_every: int, fsync: bool) -> RecordWriter:
        return Truncating(self.records_file, flush_every=flush_every, fsync=fsync)

    kept = RunDirectory.open_writer
    RunDirectory.open_writer = open_writer  # type: ignore[method-assign]
    try:
        yield
    finally:
        RunDirectory.open_writer = kept  # type: ignore[method-assign]


def one_run(config: Path, out: Path, length: int, truncated: bool) -> tuple[float, int, int]:
    """Seconds, bytes written (records and texts) and attempts of one run into ``out``."""
    shutil.rmtree(out, ignore_errors=True)
    began = time.perf_counter()
    if truncated:
        with truncated_records():
            run_batch_sync(config, out, backend=answer_of(length), log=lambda _: None)
    else:
        run_batch_sync(config, out, backend=answer_of(length), log=lambda _: None)
    seconds = time.perf_counter() - began
    written = sum(
        (out / name).stat().st_size
        for name in ("records.jsonl", "texts.jsonl")
        if (out / name).exists()
    )
    attempts = sum(json.loads(line)["attempts"]["used"] for line in (out / "records.jsonl").open())
    return seconds, written, attempts


def measure(prompts: int, repeats: int) -> list[dict[str, Any]]:
    """For each answer length: bytes per attempt and the paired time ratio, kept/truncated."""
    rows = []
    folder = Path(tempfile.mkdtemp(prefix="samplehooks-kept-texts-"))
    try:
        for label, length in ANSWERS.items():
            config = write_inputs(folder, prompts, length)
            one_run(config, folder / "warmup", length, False)  # imports, first-run costs
            times: dict[str, list[float]] = {"kept": [], "truncated": []}
            sizes: dict[str, float] = {}
            for repetition in range(repeats):
                order = ("kept", "truncated") if repetition % 2 == 0 else ("truncated", "kept")
                for name in order:
                    seconds, written, attempts = one_run(
                        config, folder / name, length, name == "truncated"
                    )
                    times[name].append(seconds)
                    sizes[name] = written / attempts
            ratios = [k / t for k, t in zip(times["kept"], times["truncated"], strict=True)]
            rows.append(
                {
                    "answers": label,
                    "bytes_per_attempt": {k: round(v, 1) for k, v in sizes.items()},
                    "bytes_ratio": round(sizes["kept"] / sizes["truncated"], 3),
                    "seconds_median": {k: statistics.median(v) for k, v in times.items()},
                    "time_ratio": round(statistics.median(ratios), 3),
                }
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kept_texts", description=__doc__)
    parser.add_argument("--prompts", type=int, default=1200, help="prompts per run (24 repeated)")
    parser.add_argument("--repeats", type=int, default=7, help="paired runs per answer length")
    parser.add_argument("--quick", action="store_true", help="smoke mode: 24 prompts, 1 pair")
    args = parser.parse_args(argv)
    prompts, repeats = (24, 1) if args.quick else (args.prompts, args.repeats)
    rows = measure(prompts, repeats)
    print(f"kept texts vs truncated records: {prompts} quickstart prompts, scripted backend")
    for row in rows:
        size = row["bytes_per_attempt"]
        print(
            f"  {row['answers']}: {size['kept']:.0f} vs {size['truncated']:.0f} bytes per "
            f"attempt ({row['bytes_ratio']:.2f}x); run time {row['time_ratio']:.2f}x "
            f"(median of {repeats} paired runs)"
        )
    print(json.dumps({"rows": rows}))


if __name__ == "__main__":
    main()
