"""Resuming a run: the effective config file, the config comparison, lineage notes, refusals.

The comparison walks both configs with the one labelled walk
(:func:`~sampling_core.runs.config.labelled.labelled_settings`): a ``result`` difference refuses
the resume, a ``throughput`` difference is accepted and noted, a ``location`` difference is
not compared. Blocks are compared field by field on resolved values, so a block written out
in the new config but absent from the old (defaults) differs only where a value does.
"""

from __future__ import annotations

import json
import re
import shlex
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sampling_core.errors import exception_text
from sampling_core.kinds import KindRegistry
from sampling_core.redaction import shown_data
from sampling_core.runs.config.config import STRICTNESS, Label, RunConfig
from sampling_core.runs.config.dataset import Dataset
from sampling_core.runs.config.labelled import labelled_settings
from sampling_core.runs.config.loading import describe_errors, describe_yaml_error, load_yaml
from sampling_core.runs.errors import ResumeRefused, RunDirError
from sampling_core.runs.resume.integrity import RUN_ID_KEY, SETTINGS_KEY
from sampling_core.runs.store.index import RunIndex
from sampling_core.runs.store.store import FORMAT, RunDirectory, utc_now

__all__ = [
    "Difference",
    "check_dataset",
    "compare_configs",
    "lineage_note",
    "provenance_header",
    "read_effective_config",
    "refuse",
    "render_effective_config",
    "samplehooks_version",
]

LINEAGE_MARK = "# lineage:"


@dataclass(frozen=True, slots=True)
class Difference:
    """One config value that differs between the run and the resume."""

    path: str
    label: Label
    old: Any
    new: Any
    note: str | None = field(default=None, compare=False)  # why a plugin has its label

    def __str__(self) -> str:
        return f"{self.path}: {_show(self.old)} -> {_show(self.new)}"


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


# -- the effective config file -------------------------------------------------------------


def samplehooks_version() -> str:
    """The installed samplehooks' version, as a run's files record it."""
    try:
        return metadata.version("samplehooks")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


def new_run_meta(dataset: Dataset, settings: dict[str, Any]) -> dict[str, Any]:
    """The ``meta.json`` of a new run directory (a run's, or a rescore's before it adds its
    ``rescored_from``): its format, its identity (``run_id``, made here: a new run in a
    path an old one had is another run), samplehooks version, when it was made, the dataset
    (path, count, fingerprint, content hash of every prompt) and the run's settings as
    :func:`~sampling_core.runs.resume.integrity.settings_meta` labels them."""
    return {
        "format": FORMAT,
        RUN_ID_KEY: uuid.uuid4().hex,
        "samplehooks_version": samplehooks_version(),
        "created": utc_now(),
        "dataset": {
            "path": str(dataset.path),
            "count": dataset.count,
            "fingerprint": dataset.fingerprint,
            "hashes": dataset.hashes(),
        },
        SETTINGS_KEY: settings,
    }


def provenance_header(
    version: str, argv: Sequence[str], source: Path | None, *, rescored_from: Path | None = None
) -> list[str]:
    """The comment lines on top of a new run's ``effective_config.yaml`` (``rescored_from``:
    the run a rescore checked again, which is then its source)."""
    if rescored_from is not None:
        origin = one_line(str(rescored_from.resolve()))
        return [
            "# samplehooks rescore: the resolved settings of this run (defaults included).",
            f"# Rescored from {origin} (no generation); it is complete: nothing to resume.",
            f"# samplehooks version: {version}",
            f"# created (UTC): {utc_now()}",
            f"# argv: {one_line(shlex.join(argv))}",
            f"# source: rescored from {origin}",
            LINEAGE_MARK,
        ]
    return [
        "# samplehooks run: the resolved settings of this run (defaults included).",
        "# Resume with: samplehooks run CONFIG --out THIS_DIR --resume",
        f"# samplehooks version: {version}",
        f"# created (UTC): {utc_now()}",
        f"# argv: {one_line(shlex.join(argv))}",
        f"# source: {one_line(str(source.resolve())) if source is not None else '(Python API)'}",
        LINEAGE_MARK,
    ]


def render_effective_config(config: RunConfig, header: Sequence[str]) -> str:
    """The header, then the config as YAML."""
    body = yaml.safe_dump(
        shown_data(config.model_dump(mode="json")), sort_keys=False, allow_unicode=True, width=100
    )
    return "\n".join(header) + "\n" + body


def read_effective_config(run_dir: RunDirectory) -> tuple[list[str], RunConfig]:
    """The header lines and the config of an existing run."""
    try:
        text = run_dir.config_file.read_text(encoding="utf-8")
    except OSError as exc:
        raise RunDirError(f"cannot read {run_dir.config_file}: {exception_text(exc)}") from exc
    except UnicodeDecodeError as exc:
        raise RunDirError(
            f"{run_dir.config_file} is damaged: not UTF-8 text ({exception_text(exc)})"
        ) from exc
    lines = text.splitlines()
    header = []
    for line in lines:
        if not line.startswith("#"):
            break
        header.append(line)
    if LINEAGE_MARK not in header:
        raise RunDirError(f"{run_dir.config_file} is damaged: its provenance header is missing")
    try:
        # the header is YAML comments: loading the whole text keeps the line numbers right
        config = RunConfig.model_validate(load_yaml(text))
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        if isinstance(exc, ValidationError):
            detail = "; ".join(describe_errors(exc))
        else:
            detail = "not valid YAML" + describe_yaml_error(exc)
        raise RunDirError(
            f"{run_dir.config_file} is damaged or from an incompatible version: {detail}"
        ) from exc
    return header, config


def lineage_note(changes: Sequence[Difference], argv: Sequence[str], extra: str = "") -> str:
    """A dated header line for one resume: the throughput changes, or "no change"."""
    what = "; ".join(str(c) for c in changes) if changes else "no change"
    return f"#   {utc_now()} resumed ({one_line(shlex.join(argv))}): {one_line(what)}{extra}"


_LINE_BREAKS = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with every character that ends a line (``\\n``, ``\\r``, U+2028, ...)
    written as an escape, so a header comment stays one line."""
    return _LINE_BREAKS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


# -- comparing -------------------------------------------------------------------------------


def compare_configs(
    old: RunConfig, new: RunConfig, kinds: KindRegistry | None = None
) -> list[Difference]:
    """Every compared value that differs, with its label (location values are skipped).

    Both configs are walked by :func:`~sampling_core.runs.config.labelled.labelled_settings` (the
    one labelled walk): options of kinds are labelled by the kind (``kinds``; without it,
    or for an unknown kind, ``result``), plugins by :func:`~sampling_core.runs.config.labelled.
    plugin_label`. When the requirements themselves differ, their options are not compared
    one by one (the list is one difference).
    """
    before, after = labelled_settings(old, kinds), labelled_settings(new, kinds)
    paths = sorted(set(before) | set(after), key=lambda p: (after.get(p) or before[p]).rank)
    differences: list[Difference] = []
    replaced: list[str] = []  # lists whose items changed: their items' options are moot
    for path in paths:
        was, now = before.get(path), after.get(path)
        if any(path.startswith(f"{parent}[") for parent in replaced):
            continue
        labels = [s.label for s in (was, now) if s is not None]
        label = max(labels, key=STRICTNESS.__getitem__)
        old_value = None if was is None else was.value
        new_value = None if now is None else now.value
        if label == "location" or old_value == new_value:
            continue
        if path == "requirements":
            replaced.append(path)
        note = (now or was).note  # type: ignore[union-attr]
        differences.append(Difference(path, label, old_value, new_value, note))
    return differences


DRIFT_KEPT = 1_000
"""Dataset differences :func:`check_dataset` returns at most (the refusal shows 20)."""


def check_dataset(index: RunIndex, dataset: Dataset) -> tuple[list[Difference], int]:
    """Dataset drift: prompts whose content changed, and prompts added or removed (the
    first :data:`DRIFT_KEPT` of them, in dataset order, then the removed in the run's
    order), and how many more there are.

    The run's hashes are ``meta.json``'s (a record whose hash is not its prompt's was
    refused before this is asked: :func:`~sampling_core.runs.resume.integrity.foreign_records`).
    """
    recorded = index.meta.get("dataset", {})
    if recorded.get("fingerprint") == dataset.fingerprint:
        return [], 0
    index.load_pairs("dataset", dataset.hashes())
    changed = (
        "SELECT 0 AS part, d.pos AS pos, d.key, p.hash, d.hash FROM dataset d "
        "LEFT JOIN prompt p ON p.key = d.key WHERE p.hash IS NULL OR p.hash != d.hash"
    )
    removed = (
        "SELECT 1, p.pos, p.key, p.hash, NULL FROM prompt p "
        "WHERE NOT EXISTS (SELECT 1 FROM dataset d WHERE d.key = p.key)"
    )
    both = f"{changed} UNION ALL {removed}"
    total = int(index.value(f"SELECT COUNT(*) FROM ({both})"))
    drift = [
        Difference(f"dataset[{key}]", "result", old, new)
        for _, _, key, old, new in index.query(
            f"SELECT * FROM ({both}) ORDER BY part, pos LIMIT ?", (DRIFT_KEPT,)
        )
    ]
    if not drift:  # the same prompts in another order
        drift.append(
            Difference(
                "dataset (order)", "result", recorded.get("fingerprint"), dataset.fingerprint
            )
        )
        total = 1
    return drift, total - len(drift)


def refuse(
    run_dir: Path,
    differences: Sequence[Difference],
    *,
    drift: bool,
    recorded: bool = False,
    more: int = 0,
) -> ResumeRefused:
    """The error that refuses a resume: each difference, then the ways out (``more``:
    differences found beyond those given).

    ``recorded``: the differences are from the settings ``meta.json`` recorded when the run
    started (the resolved server, a hand-edited effective config), not from the config file.
    """
    shown = list(differences[:20])
    lines = [
        f"refusing to resume {run_dir}: "
        + (
            "the dataset changed since the run started (dataset drift; old -> new content hash):"
            if drift
            else "these settings change results, and differ from the run's (old -> new):"
        )
    ]
    if recorded:
        lines[0] = (
            f"refusing to resume {run_dir}: these settings change results, and differ from "
            "those recorded in its meta.json when it started (old -> new):"
        )
    lines += [f"  {d}" + (f" ({d.note})" if d.note else "") for d in shown]
    if len(differences) + more > len(shown):
        lines.append(f"  ... and {len(differences) + more - len(shown)} more")
    lines.append("Ways out:")
    if drift:
        lines.append("  - restore the dataset the run started with, then resume; or")
    elif recorded:
        lines.append(
            "  - resume with the settings the run started with (the same server, model and "
            "config: $OPENAI_BASE_URL and the effective config as they were); or"
        )
    else:
        lines.append(
            f"  - resume with the run's own settings: samplehooks run "
            f"{run_dir / 'effective_config.yaml'} --out {run_dir} --resume; or"
        )
    lines.append("  - start a new run with these settings: samplehooks run CONFIG --out NEW_DIR")
    lines.append(f"Nothing was written to {run_dir}.")
    return ResumeRefused(
        "\n".join(lines), [(d.path, _show(d.old), _show(d.new)) for d in differences]
    )
