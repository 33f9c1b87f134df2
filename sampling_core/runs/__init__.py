"""Batch runs: sample every prompt of a JSONL dataset into a run directory that survives crashes.

::

    from sampling_core.runs import RunConfig, load_config, run_batch_sync

    summary = run_batch_sync("examples/quickstart.yaml", "runs/quickstart")
    print(summary.render())
    # killed, or changed max_concurrent_prompts? continue where it stopped:
    run_batch_sync("examples/quickstart.yaml", "runs/quickstart", resume=True)

The same as ``samplehooks run CONFIG --out DIR [--resume] [--retry-failed]`` and
``samplehooks report DIR``. See ``docs/batch-runs.md``. ``rescore_sync(RUN_DIR, NEW_DIR,
requirements=[...])`` is ``samplehooks rescore``: a finished run's kept attempts checked
against new requirements, with no generation (``docs/rescore.md``).
``read_record(json.loads(line))`` reads a line of a run's ``records.jsonl`` (written by any
version) as a :class:`RunRecord`, its attempts as :class:`AttemptEntry` (one JSON shape, the
same in ``sample --json``).
``compare_runs(A, B)`` is ``samplehooks compare A B``: run B against run A, prompt by
prompt, with paired intervals and a verdict (``docs/comparing-runs.md``).

This package's ``__all__`` is its public surface; its modules are internal (each one's
``__all__`` is what it offers the others).

Its subpackages, downhill (each imports only those after it): ``rescoring`` (a finished run
checked again), ``execution`` (running a batch), ``reports`` (what a run's records say),
``resume`` (what may change when a run continues), ``store`` (the run directory and its index),
``config`` (what a run is made from), ``stats`` (estimators over a run's prompts); below them
all, the module ``errors`` (the errors a run raises on purpose).
"""

from sampling_core.runs.config.classification import classified_fields
from sampling_core.runs.config.config import RunConfig
from sampling_core.runs.config.loading import load_config, parse_config
from sampling_core.runs.errors import (
    ConfigError,
    DatasetError,
    ResumeRefused,
    RunDirError,
    RunError,
)
from sampling_core.runs.execution.runner import run_batch, run_batch_sync
from sampling_core.runs.reports.compare import RunComparison, compare_runs
from sampling_core.runs.reports.summary import RunSummary, summarize
from sampling_core.runs.rescoring.rescoring import rescore, rescore_sync
from sampling_core.runs.store.record import AttemptEntry, RunRecord, read_record

__all__ = [
    "AttemptEntry",
    "ConfigError",
    "DatasetError",
    "ResumeRefused",
    "RunComparison",
    "RunConfig",
    "RunDirError",
    "RunError",
    "RunRecord",
    "RunSummary",
    "classified_fields",
    "compare_runs",
    "load_config",
    "parse_config",
    "read_record",
    "rescore",
    "rescore_sync",
    "run_batch",
    "run_batch_sync",
    "summarize",
]
