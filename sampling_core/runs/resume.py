"""Resuming a run: the effective config file, the config comparison, lineage notes, refusals.

The comparison walks the config model's field labels (:func:`walk_config`): a
``result`` difference refuses the resume, a ``throughput`` difference is accepted and noted,
a ``location`` difference is not compared. Blocks are compared field by field on resolved
values, so a block written out in the new config but absent from the old (defaults) differs
only where a value does.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml
from pydantic import ValidationError

from sampling_core.hooks.entry_points import affects_results
from sampling_core.kinds import Area, KindRegistry
from sampling_core.runs.classification import as_json, option_label, walk_config
from sampling_core.runs.config import Label, RunConfig
from sampling_core.runs.dataset import Dataset
from sampling_core.runs.errors import ResumeRefused, RunDirError
from sampling_core.runs.loading import describe_errors, describe_yaml_error, load_yaml
from sampling_core.runs.store import RecordsScan, RunDirectory, utc_now

__all__ = [
    "Difference",
    "check_dataset",
    "compare_configs",
    "lineage_note",
    "provenance_header",
    "read_effective_config",
    "refuse",
    "render_effective_config",
]

LINEAGE_MARK = "# lineage:"


@dataclass(frozen=True, slots=True)
class Difference:
    """One config value that differs between the run and the resume."""

    path: str
    label: Label
    old: Any
    new: Any

    def __str__(self) -> str:
        return f"{self.path}: {_show(self.old)} -> {_show(self.new)}"


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


# -- the effective config file -------------------------------------------------------------


def provenance_header(version: str, argv: Sequence[str], source: Path | None) -> list[str]:
    """The comment lines on top of a new run's ``effective_config.yaml``."""
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
        config.model_dump(mode="json"), sort_keys=False, allow_unicode=True, width=100
    )
    return "\n".join(header) + "\n" + body


def read_effective_config(run_dir: RunDirectory) -> tuple[list[str], RunConfig]:
    """The header lines and the config of an existing run."""
    try:
        text = run_dir.config_file.read_text(encoding="utf-8")
    except OSError as exc:
        raise RunDirError(f"cannot read {run_dir.config_file}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise RunDirError(f"{run_dir.config_file} is damaged: not UTF-8 text ({exc})") from exc
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
    """Every compared value that differs, with its label (location fields are skipped).

    Options of kinds are labelled by the kind (``kinds``; without it, or for an unknown
    kind, ``result``). Plugins whose class sets ``affects_results = False`` may change.
    """
    differences: list[Difference] = []
    pending: tuple[Area, Any, Any] | None = None  # a backend/strategy block whose options follow
    for field in walk_config(type(old), (old, new)):
        path = field.path
        if pending is not None and not path.startswith(f"{pending[0]}."):
            differences.extend(_option_differences(*pending, kinds))
            pending = None
        if field.label is None:
            raise TypeError(f"config field {path} has no resume label")
        old_value, new_value = field.values
        if path == "plugins":
            differences.extend(_plugin_differences(old_value, new_value))
        elif path == "requirements":
            differences.extend(_requirement_differences(old_value, new_value, kinds))
        elif field.descends:
            if path in _BLOCKS_WITH_OPTIONS:  # its options, once its fields are compared
                pending = (cast(Area, path), old_value, new_value)
        elif field.label != "location":
            old_json, new_json = as_json(old_value), as_json(new_value)
            if old_json != new_json:
                differences.append(Difference(path, field.label, old_json, new_json))
    if pending is not None:
        differences.extend(_option_differences(*pending, kinds))
    return differences


_BLOCKS_WITH_OPTIONS: frozenset[Area] = frozenset({"backend", "strategy"})
"""The top-level blocks whose ``options`` are labelled by their kind (path and area agree)."""


def _option_differences(
    area: Area, old: Any, new: Any, kinds: KindRegistry | None
) -> Iterator[Difference]:
    """The options of the ``backend`` or ``strategy`` block, labelled by its kind."""
    kind = new.kind if area == "backend" else new.name
    old_options, new_options = old.options, new.options
    if kinds is not None and kind in kinds.kinds[area]:  # compare resolved values
        for name, info in kinds.kinds[area][kind].options.model_fields.items():
            if not info.is_required():
                default = info.get_default(call_default_factory=True)
                old_options.setdefault(name, default)
                new_options.setdefault(name, default)
    for option in sorted(set(old_options) | set(new_options)):
        before, after = as_json(old_options.get(option)), as_json(new_options.get(option))
        label = option_label(kinds, area, kind, option)
        if before != after and label != "location":
            yield Difference(f"{area}.{option}", label, before, after)  # type: ignore[arg-type]
    # (a kind changed is a difference of `kind`/`name`, found by the walk)


def _requirement_differences(
    old: list[Any], new: list[Any], kinds: KindRegistry | None
) -> Iterator[Difference]:
    """Requirements must match, except options their kind labels ``throughput``."""
    if [(r.kind, as_json(r.value)) for r in old] != [(r.kind, as_json(r.value)) for r in new]:
        yield Difference("requirements", "result", as_json(old), as_json(new))
        return
    for index, (before, after) in enumerate(zip(old, new, strict=True)):
        for option in sorted(set(before.options) | set(after.options)):
            was, now = as_json(before.options.get(option)), as_json(after.options.get(option))
            label = option_label(kinds, "requirement", after.kind, option)
            if was != now and label != "location":
                path = f"requirements[{index}].{option}"
                yield Difference(path, label, was, now)  # type: ignore[arg-type]


def _plugin_differences(old: list[Any], new: list[Any]) -> Iterator[Difference]:
    """Plugins added, removed or reconfigured: throughput when none of them affects results."""
    before = {entry.name: as_json(entry) for entry in old}
    after = {entry.name: as_json(entry) for entry in new}
    changed = sorted(n for n in set(before) | set(after) if before.get(n) != after.get(n))
    if not changed:
        return
    label = "result" if any(affects_results(name) for name in changed) else "throughput"
    yield Difference("plugins", label, list(before.values()), list(after.values()))


def check_dataset(meta: dict[str, Any], dataset: Dataset, scan: RecordsScan) -> list[Difference]:
    """Dataset drift: prompts whose content changed, and prompts added or removed."""
    recorded = meta.get("dataset", {})
    if recorded.get("fingerprint") == dataset.fingerprint:
        return []
    old_hashes: dict[str, str] = dict(recorded.get("hashes", {}))
    for record in scan.records:  # a finished prompt's own hash is the authority
        old_hashes[record["key"]] = record.get("content_hash", old_hashes.get(record["key"]))
    new_hashes = dict(dataset.hashes())
    drift = []
    for key, new_hash in new_hashes.items():
        old_hash = old_hashes.get(key)
        if old_hash != new_hash:
            drift.append(Difference(f"dataset[{key}]", "result", old_hash, new_hash))
    drift.extend(
        Difference(f"dataset[{key}]", "result", old_hashes[key], None)
        for key in old_hashes
        if key not in new_hashes
    )
    if not drift:  # the same prompts in another order
        drift.append(
            Difference(
                "dataset (order)", "result", recorded.get("fingerprint"), dataset.fingerprint
            )
        )
    return drift


def refuse(
    run_dir: Path, differences: Sequence[Difference], *, drift: bool, recorded: bool = False
) -> ResumeRefused:
    """The error that refuses a resume: each difference, then the ways out.

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
    lines += [f"  {d}" for d in shown]
    if len(differences) > len(shown):
        lines.append(f"  ... and {len(differences) - len(shown)} more")
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
