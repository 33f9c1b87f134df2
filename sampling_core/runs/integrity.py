"""Is this run directory what it says it is? Records of this run only, and the same settings.

Two checks a resume (and ``report``) makes beyond reading the files:

- **Records belong to the run.** A record counts only when its key is one of the run's
  prompts and its content hash is that prompt's hash in ``meta.json``. Any other record
  (appended from another run, edited by hand) is never counted as done: ``report`` leaves it
  out and says so; ``--resume`` refuses, naming the lines, with the way out.
- **The settings results depend on are the run's.** ``meta.json`` keeps the result settings
  of the config (every field labelled ``result``) *and* the resolved values that do not
  appear in the config (the server a backend really talks to when ``base_url`` came from
  ``$OPENAI_BASE_URL``, the model it reports), with a fingerprint of both. A resume compares
  its own against them, so a hand-edited ``effective_config.yaml`` or another server in the
  environment is refused, not noted as "no change".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from sampling_core.kinds import KindRegistry
from sampling_core.runs.classification import as_json, option_label, walk_config
from sampling_core.runs.config import RunConfig
from sampling_core.runs.errors import RunDirError
from sampling_core.runs.meta_hashes import RunHashes
from sampling_core.runs.store import RecordsScan, RunDirectory

__all__ = [
    "check_settings",
    "foreign_records",
    "refuse_foreign",
    "resolved_settings",
    "settings_meta",
]

SETTINGS_KEY = "settings"


def foreign_records(
    records: RecordsScan | Iterable[dict[str, Any]], hashes: Mapping[str, str] | RunHashes
) -> list[tuple[int, str]]:
    """``(line, why)`` of each record that is not one of this run's prompts as it was
    (``records``: a scan, or the records as they are read; ``hashes``: key -> content hash,
    or the compact :class:`~sampling_core.runs.meta_hashes.RunHashes`)."""
    out = []
    rows = records.records if isinstance(records, RecordsScan) else records
    for line, record in enumerate(rows, start=1):
        key = record["key"]
        if key not in hashes:
            out.append((line, f"key {key!r} is not in the run's dataset"))
        elif not _same_hash(hashes, key, record.get("content_hash")):
            out.append((line, f"key {key!r} has another prompt's content hash"))
    return out


def _same_hash(hashes: Mapping[str, str] | RunHashes, key: str, value: Any) -> bool:
    if isinstance(hashes, RunHashes):
        return hashes.matches(key, value)
    return hashes.get(key) == value


def refuse_foreign(run_dir: RunDirectory, foreign: list[tuple[int, str]]) -> RunDirError:
    """The refusal of a resume over records that are not the run's."""
    shown = "; ".join(f"line {line}: {why}" for line, why in foreign[:3])
    more = f" (and {len(foreign) - 3} more)" if len(foreign) > 3 else ""
    return RunDirError(
        f"{run_dir.records_file} holds {len(foreign)} record(s) that are not of this run "
        f"({shown}{more}); remove those lines and resume, or start a new run "
        f"(nothing was written)"
    )


# -- settings ------------------------------------------------------------------------------


def result_settings(config: RunConfig, kinds: KindRegistry | None = None) -> dict[str, Any]:
    """Every ``result``-labelled value of the config, by its dotted path, as JSON.

    The options of the backend and the strategy (the keys beside ``kind`` and ``name``) are
    labelled by their kind in ``kinds``; an option it does not label (or without ``kinds``)
    is a result setting.
    """
    values = {
        field.path: as_json(field.values[0])
        for field in walk_config(type(config), (config,))
        if not field.descends and field.label == "result"
    }
    for block, area, kind_name in (
        (config.backend, "backend", config.backend.kind),
        (config.strategy, "strategy", config.strategy.name),
    ):
        for option, value in (block.model_extra or {}).items():
            if option_label(kinds, area, kind_name, option) == "result":
                values[f"{area}.{option}"] = as_json(value)
    return values


def resolved_settings(backend: Any) -> dict[str, Any]:
    """What the backend object really uses where the config may leave it to the
    environment: its server (``base_url``, without credentials), model and model file."""
    out = {}
    for name in ("base_url", "model", "model_path"):
        value = getattr(backend, name, None)
        if isinstance(value, str | int | float | bool):
            out[f"backend (resolved).{name}"] = value
    return out


def settings_meta(
    config: RunConfig, resolved: dict[str, Any], kinds: KindRegistry | None = None
) -> dict[str, Any]:
    """The ``settings`` entry of ``meta.json`` (``kinds`` label the kinds' options;
    ``resolved`` is :func:`resolved_settings` of the backend the run samples with, which on
    the Ray executor is a worker's)."""
    values = {**result_settings(config, kinds), **resolved}
    return {"values": values, "fingerprint": _fingerprint(values)}


def _fingerprint(values: dict[str, Any]) -> str:
    text = json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:32]


def check_settings(
    meta: dict[str, Any],
    config: RunConfig,
    resolved: dict[str, Any],
    kinds: KindRegistry | None = None,
) -> list[tuple[str, Any, Any]]:
    """``(path, run's value, this resume's value)`` for each result setting that differs
    from what ``meta.json`` recorded when the run started (none for a run made before
    settings were recorded)."""
    recorded = meta.get(SETTINGS_KEY)
    if not isinstance(recorded, dict) or not isinstance(recorded.get("values"), dict):
        return []
    now = settings_meta(config, resolved, kinds)
    if now["fingerprint"] == recorded.get("fingerprint"):
        return []
    old, new = recorded["values"], now["values"]
    if recorded.get("fingerprint") != _fingerprint(old):
        return [("meta.json (settings edited)", recorded.get("fingerprint"), _fingerprint(old))]
    # a setting this version added (absent from the run's) is compared by the config
    return [(p, old[p], new.get(p)) for p in sorted(old) if old[p] != new.get(p)]
