"""The run configuration: a validated YAML file, every field classified for resume.

Every field, nested ones included, says in its metadata how a resume treats it:

- ``throughput`` — how fast the run goes (concurrency, rate limits, flush cadence, progress
  display); it may change when a run is resumed, and the change is noted in the run's lineage;
- ``result`` — what the answers are (backend and model, strategy, budgets, requirements,
  seed, selection, plugins, dataset reading); it must match, or the resume is refused;
- ``location`` — where things are (the dataset's path, the name of the API-key variable);
  not compared.

A block (a nested model) is labelled with the strictest label among its fields. The resume
comparison (:mod:`sampling_core.runs.resume`) and the table in ``docs/batch-runs.md`` are both
derived from these labels, through
:func:`sampling_core.runs.classification.classified_fields`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sampling_core.budgets import DEFAULT_MAX_CONCURRENCY_BUDGET, DEFAULT_MAX_LOOP_BUDGET

__all__ = [
    "BackendConfig",
    "BudgetsConfig",
    "DatasetConfig",
    "GenerationOptions",
    "Label",
    "RaySettings",
    "RequirementSpec",
    "RunConfig",
    "RunSettings",
    "StrategyConfig",
]

Label = Literal["throughput", "result", "location"]
LABELS: tuple[Label, ...] = ("throughput", "result", "location")
STRICTNESS: dict[str, int] = {"location": 0, "throughput": 1, "result": 2}


def _field(label: Label, default: Any = ..., *, description: str, **kwargs: Any) -> Any:
    """A pydantic ``Field`` carrying its resume label in ``json_schema_extra``."""
    return Field(default, description=description, json_schema_extra={"resume": label}, **kwargs)


def _block(label: Label, factory: Any, *, description: str) -> Any:
    return Field(
        default_factory=factory, description=description, json_schema_extra={"resume": label}
    )


class _Strict(BaseModel):
    # A rejected value may be a secret put in the wrong place: pydantic's own message (seen
    # in a traceback) leaves values out; `describe_errors` shows those that are safe.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class DatasetConfig(_Strict):
    """Where the prompts come from: a JSONL file, one JSON object per line."""

    path: Path = _field("location", description="The JSONL file (relative to the config file).")
    prompt_field: str = _field(
        "result",
        "prompt",
        description="The key holding the prompt: a string, or a list of chat messages.",
    )
    id_field: str | None = _field(
        "result",
        None,
        description="The key holding a unique id; without one, prompts are keyed by line number.",
    )
    requirements_field: str = _field(
        "result",
        "require",
        description="The key holding a line's own requirements (same language as `requirements`).",
    )


BackendKind = Literal["local", "openai", "scripted"]
_KIND_ONLY: dict[str, BackendKind] = {
    "model_path": "local",
    "parallel": "local",
    "base_url": "openai",
    "max_in_flight": "openai",
    "rpm": "openai",
    "replies": "scripted",
    "latency_s": "scripted",
}


class BackendConfig(_Strict):
    """The model: ``local`` (embedded llama.cpp), ``openai`` (a compatible server), ``scripted``."""

    kind: BackendKind = _field("result", description="Which backend.")
    model: str | None = _field(
        "result", None, description="The model name (required for `openai`)."
    )
    model_path: str | None = _field(
        "result", None, description="`local`: a .gguf file (default: the bundled SmolLM2-135M)."
    )
    base_url: str | None = _field(
        "result", None, description="`openai`: the server's base URL (default: OpenAI's)."
    )
    api_key_env: str = _field(
        "location",
        "OPENAI_API_KEY",
        description="`openai`: the NAME of the environment variable holding the key.",
    )
    timeout_s: float = _field(
        "throughput", 120.0, gt=0, description="Seconds before one backend call times out."
    )
    max_in_flight: int | None = _field(
        "throughput", None, ge=1, description="`openai`: most requests in flight at once."
    )
    rpm: float | None = _field(
        "throughput", None, gt=0, description="`openai`: most requests per minute."
    )
    parallel: int | None = _field(
        "throughput",
        None,
        ge=1,
        description="`local`: server slots (default: prompts at once x concurrency budget).",
    )
    replies: list[str] | None = _field(
        "result", None, description="`scripted`: the replies, served in order and cycling."
    )
    latency_s: float = _field(
        "throughput", 0.0, ge=0, description="`scripted`: seconds each reply takes."
    )

    @field_validator("api_key_env")
    @classmethod
    def _a_variable_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError(
                "must be the NAME of an environment variable (letters, digits and _), "
                "not the key itself"
            )
        return value

    @field_validator("base_url")
    @classmethod
    def _no_credentials_in_url(cls, value: str | None) -> str | None:
        if value is not None and re.match(r"^[a-z][a-z0-9+.-]*://[^/@]*@", value, re.I):
            raise ValueError(
                "the URL carries credentials; put the key in an environment variable and "
                "give its NAME as api_key_env"
            )
        return value

    @model_validator(mode="after")
    def _fits_kind(self) -> BackendConfig:
        for name, kind in _KIND_ONLY.items():
            if self.kind != kind and getattr(self, name) != type(self).model_fields[name].default:
                raise ValueError(f"{name} applies to kind {kind!r} only, not {self.kind!r}")
        if self.kind == "openai" and not self.model:
            raise ValueError("kind 'openai' needs a model name")
        if self.kind == "scripted" and not self.replies:
            raise ValueError("kind 'scripted' needs a non-empty list of replies")
        return self


class GenerationOptions(_Strict):
    """Options sent with every backend call."""

    temperature: float | None = _field("result", None, ge=0, description="Sampling temperature.")
    top_p: float | None = _field("result", None, gt=0, le=1, description="Nucleus sampling mass.")
    max_tokens: int | None = _field("result", None, ge=1, description="Most tokens per answer.")
    stop: list[str] | None = _field("result", None, description="Stop sequences.")

    def as_options(self) -> dict[str, Any]:
        """The options that are set, as the engine's ``options`` mapping."""
        return self.model_dump(exclude_none=True)


StrategyName = Literal["rejection", "repair", "multiturn", "best_of_n", "majority"]


class StrategyConfig(_Strict):
    """How failed attempts are repaired and which attempt is picked."""

    name: StrategyName = _field(
        "result",
        "rejection",
        description="rejection, repair, multiturn, best_of_n or majority (or `strategy: NAME`).",
    )
    keep_failures: int = _field(
        "result", 3, ge=1, description="Failures kept in the repair context."
    )
    template: str | None = _field(
        "result",
        None,
        description="`repair`/`multiturn`: the feedback text, with a {reasons} placeholder.",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _template_fits(self) -> StrategyConfig:
        if self.template is not None:
            if self.name not in ("repair", "multiturn"):
                raise ValueError(f"template applies to 'repair' and 'multiturn', not {self.name!r}")
            if "{reasons}" not in self.template:
                raise ValueError("template must contain the placeholder {reasons}")
            try:
                self.template.format(reasons="")
            except (KeyError, IndexError, ValueError, AttributeError) as exc:
                raise ValueError(
                    "template may hold no placeholder but {reasons} (write a literal brace "
                    f"as {{{{ or }}}}); formatting it failed: {type(exc).__name__}: {exc}"
                ) from None
        return self


class BudgetsConfig(_Strict):
    """How many attempts each prompt may use."""

    loop_budget: int = _field(
        "result", 1, ge=1, le=DEFAULT_MAX_LOOP_BUDGET, description="Attempts per subsample."
    )
    concurrency_budget: int = _field(
        "result",
        1,
        ge=1,
        le=DEFAULT_MAX_CONCURRENCY_BUDGET,
        description="Subsamples per prompt, run at once.",
    )

    @field_validator("loop_budget", "concurrency_budget", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("must be an int >= 1, not a boolean")
        return value


class RequirementSpec(_Strict):
    """One requirement, as a one-key mapping: ``{max_words: 12}``, ``{contains: Paris}``, ..."""

    contains: str | None = _field("result", None, description="Must contain this text.")
    not_contains: str | None = _field("result", None, description="Must not contain this text.")
    matches: str | None = _field("result", None, description="Must match this regular expression.")
    max_words: int | None = _field("result", None, ge=1, description="At most this many words.")
    min_words: int | None = _field("result", None, ge=1, description="At least this many words.")
    max_chars: int | None = _field("result", None, ge=1, description="At most this many chars.")
    is_json: Literal[True] | None = _field("result", None, description="Must be one JSON document.")

    @model_validator(mode="after")
    def _exactly_one(self) -> RequirementSpec:
        given = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(given) != 1:
            names = ", ".join(type(self).model_fields)
            raise ValueError(
                f"a requirement is a mapping with exactly one of: {names} (got {given or 'none'})"
            )
        if self.matches is not None:
            try:
                re.compile(self.matches)
            except re.error as exc:
                raise ValueError(f"matches: invalid regular expression ({exc})") from exc
        return self

    @property
    def kind(self) -> str:
        """The builder's name, e.g. ``"max_words"``."""
        return next(n for n in type(self).model_fields if getattr(self, n) is not None)

    @property
    def argument(self) -> Any:
        """The builder's argument."""
        return getattr(self, self.kind)


class RaySettings(_Strict):
    """Where and how wide a run goes with ``executor: ray`` (docs/scale-out.md)."""

    address: str | None = _field(
        "throughput",
        None,
        description="The cluster (`ray://HOST:10001`, `HOST:6379`, `auto`); none: a local one.",
    )
    workers: int = _field("throughput", 2, ge=1, description="Worker actors (processes).")
    calls_per_worker: int = _field(
        "throughput", 16, ge=1, description="Prompts each worker samples at once."
    )


class RunSettings(_Strict):
    """Throughput settings of the runner: none of them changes an answer."""

    max_concurrent_prompts: int = _field(
        "throughput", 4, ge=1, description="Prompts sampled at once."
    )
    flush_every: int = _field(
        "throughput", 1, ge=1, description="Flush the records file after this many records."
    )
    flush_interval_s: float = _field(
        "throughput", 1.0, gt=0, description="...and at least this often (seconds)."
    )
    fsync: bool = _field("throughput", False, description="fsync the records file on every flush.")
    progress: Literal["auto", "on", "off"] = _field(
        "throughput", "auto", description="Progress bar on stderr (`auto`: when it is a terminal)."
    )

    executor: Literal["local", "ray"] = _field(
        "throughput", "local", description="`local` (this process) or `ray` (a Ray cluster)."
    )
    ray: RaySettings = _block(
        "throughput", RaySettings, description="`executor: ray`: the cluster and its workers."
    )


class RunConfig(_Strict):
    """A batch run: a dataset, a backend, how to sample, and how fast to go."""

    dataset: DatasetConfig = _field("result", description="The prompts.")
    backend: BackendConfig = _field("result", description="The model.")
    options: GenerationOptions = _block(
        "result", GenerationOptions, description="Backend call options."
    )
    strategy: StrategyConfig = _block("result", StrategyConfig, description="The strategy.")
    budgets: BudgetsConfig = _block("result", BudgetsConfig, description="The budgets.")
    requirements: list[RequirementSpec] = _field(
        "result", [], description="Requirements for every prompt (a line may add its own)."
    )
    seed: int | None = _field(
        "result", None, description="Base seed; each prompt derives its own from it and its key."
    )
    selection: Literal["first", "ordered"] = _field(
        "result", "first", description="`first` passing attempt, or the `ordered` one."
    )
    plugins: list[str] = _field(
        "result", [], description="Plugins by name, e.g. tracing, recorder, progress."
    )
    run: RunSettings = _block("throughput", RunSettings, description="Runner throughput settings.")
