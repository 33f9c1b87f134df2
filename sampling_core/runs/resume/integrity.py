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
import os
from collections.abc import Iterable, Mapping
from typing import Any

from sampling_core.kinds import KindRegistry
from sampling_core.redaction import mask_url_credentials
from sampling_core.runs.config.config import RunConfig
from sampling_core.runs.config.labelled import labelled_settings
from sampling_core.runs.errors import RunDirError
from sampling_core.runs.store.index import RunIndex
from sampling_core.runs.store.store import RunDirectory

__all__ = [
    "check_settings",
    "foreign_records",
    "recorded_settings",
    "refuse_foreign",
    "resolved_settings",
    "run_identity",
    "settings_meta",
]

SETTINGS_KEY = "settings"
RUN_ID_KEY = "run_id"


def foreign_records(index: RunIndex, limit: int = 3) -> tuple[list[tuple[int, str]], int]:
    """``(line, why)`` of the first ``limit`` records that are not one of this run's prompts
    as it was, and how many there are in all."""
    total = int(index.value("SELECT COUNT(*) FROM rec WHERE own != 1"))
    shown = [
        (line, _why(key, own))
        for line, key, own in index.query(
            "SELECT line, key, own FROM rec WHERE own != 1 ORDER BY line LIMIT ?", (limit,)
        )
    ]
    return shown, total


def _why(key: str, own: int) -> str:
    if own == 0:
        return f"key {key!r} is not in the run's dataset"
    return f"key {key!r} has another prompt's content hash"


def refuse_foreign(run_dir: RunDirectory, shown: list[tuple[int, str]], total: int) -> RunDirError:
    """The refusal of a resume over records that are not the run's (``shown``: the first
    few of them, ``total``: how many)."""
    listed = "; ".join(f"line {line}: {why}" for line, why in shown)
    more = f" (and {total - len(shown)} more)" if total > len(shown) else ""
    return RunDirError(
        f"{run_dir.records_file} holds {total} record(s) that are not of this run "
        f"({listed}{more}); remove those lines and resume, or start a new run "
        f"(nothing was written)"
    )


# -- settings ------------------------------------------------------------------------------


def result_settings(
    config: RunConfig,
    kinds: KindRegistry | None = None,
    *,
    objects: Iterable[Any] = (),
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Every ``result``-labelled value of the run, by its path, as JSON: the ``result``
    settings of the one labelled walk
    (:func:`~sampling_core.runs.config.labelled.labelled_settings`:
    the config's fields, the kinds' options, the plugins (artifact writers included), the
    plugin ``objects`` given from Python, and with ``environ`` the environment variables
    those plugins read)."""
    walked = labelled_settings(config, kinds, objects=objects, environ=environ)
    return {s.path: s.value for s in walked.values() if s.label == "result"}


def resolved_settings(backend: Any) -> dict[str, Any]:
    """What the backend object really uses where the config may leave it to the
    environment: its server (``base_url``, without credentials), model and model file."""
    out = {}
    for name in ("base_url", "model", "model_path"):
        value = getattr(backend, name, None)
        if isinstance(value, str):
            value = mask_url_credentials(value)
        if isinstance(value, str | int | float | bool):
            out[f"backend (resolved).{name}"] = value
    return out


def settings_meta(
    config: RunConfig,
    resolved: dict[str, Any],
    kinds: KindRegistry | None = None,
    *,
    objects: Iterable[Any] = (),
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``settings`` entry of ``meta.json``: :func:`result_settings` (``environ``:
    default ``os.environ``) and ``resolved``, :func:`resolved_settings` of the backend the
    run samples with (on the Ray executor, a worker's), with their fingerprint."""
    env = os.environ if environ is None else environ
    values = {**result_settings(config, kinds, objects=objects, environ=env), **resolved}
    return {"values": values, "fingerprint": _fingerprint(values), "walk": WALK}


WALK = 2
"""The shape of the recorded settings: 2 since plugins, requirement options and environment
variables are recorded one by one. A run recorded before (no ``walk``) kept ``plugins`` and
``requirements`` whole, observers and throughput options included: those two are left to
the config comparison for such a run."""


def run_identity(meta: dict[str, Any]) -> str | None:
    """The run's identity in ``meta.json`` (``run_id``), or ``None`` for a run made before
    runs had one."""
    run_id = meta.get(RUN_ID_KEY)
    return run_id if isinstance(run_id, str) and run_id else None


def recorded_settings(meta: dict[str, Any]) -> dict[str, Any]:
    """The result settings ``meta.json`` recorded (``path -> value``; empty for a run made
    before settings were recorded)."""
    recorded = meta.get(SETTINGS_KEY)
    values = recorded.get("values") if isinstance(recorded, dict) else None
    return dict(values) if isinstance(values, dict) else {}


def _fingerprint(values: dict[str, Any]) -> str:
    text = json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:32]


def check_settings(
    meta: dict[str, Any],
    config: RunConfig,
    resolved: dict[str, Any],
    kinds: KindRegistry | None = None,
    *,
    objects: Iterable[Any] = (),
    environ: Mapping[str, str] | None = None,
) -> list[tuple[str, Any, Any]]:
    """``(path, run's value, this resume's value)`` for each result setting that differs
    from what ``meta.json`` recorded when the run started (none for a run made before
    settings were recorded)."""
    recorded = meta.get(SETTINGS_KEY)
    if not isinstance(recorded, dict) or not isinstance(recorded.get("values"), dict):
        return []
    now = settings_meta(config, resolved, kinds, objects=objects, environ=environ)
    if now["fingerprint"] == recorded.get("fingerprint"):
        return []
    old, new = recorded["values"], now["values"]
    if recorded.get("fingerprint") != _fingerprint(old):
        return [("meta.json (settings edited)", recorded.get("fingerprint"), _fingerprint(old))]
    paths = set(old)  # a setting this version added (absent from the run's): by the config
    if recorded.get("walk") != WALK:
        paths -= _RESHAPED
    else:  # a plugin, or a variable one reads, that the run did not have is a difference
        paths |= {p for p in new if p.startswith(_ONE_BY_ONE)}
    return [(p, old.get(p), new.get(p)) for p in sorted(paths) if old.get(p) != new.get(p)]


_RESHAPED = frozenset({"plugins", "requirements"})
_ONE_BY_ONE = ("plugins[", "environment.")
