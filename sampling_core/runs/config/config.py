"""The run configuration: a validated YAML file, every field classified for resume.

Every field, nested ones included, says in its metadata how a resume treats it:

- ``throughput`` — how fast the run goes (concurrency, rate limits, flush cadence, progress
  display); it may change when a run is resumed, and the change is noted in the run's lineage;
- ``result`` — what the answers are (backend and model, strategy, budgets, requirements,
  seed, selection, plugins, dataset reading); it must match, or the resume is refused;
- ``location`` — where things are (the dataset's path, the name of the API-key variable);
  not compared.

A block (a nested model) is labelled with the strictest label among its fields. The resume
comparison (:mod:`sampling_core.runs.resume.resume`) and the table in ``docs/batch-runs.md`` are
both
derived from these labels, through
:func:`sampling_core.runs.config.classification.classified_fields`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from sampling_core.backends.transport import MAX_WAIT_S
from sampling_core.engine.budgets import DEFAULT_MAX_CONCURRENCY_BUDGET, DEFAULT_MAX_LOOP_BUDGET
from sampling_core.engine.launch import DEFAULT_STAGGER_S, MAX_STAGGER_S
from sampling_core.hooks.options import number_as_written, number_kinds
from sampling_core.requirements.checks import DEFAULT_CHECK_TIMEOUT_S
from sampling_core.requirements.formats import schema_validator

__all__ = [
    "BackendConfig",
    "BudgetsConfig",
    "DatasetConfig",
    "GenerationOptions",
    "Label",
    "PluginEntry",
    "RaySettings",
    "RequirementSpec",
    "RunConfig",
    "RetryConfig",
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

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_as_written(cls, value: Any, info: ValidationInfo) -> Any:
        """No coercion of numbers: an int field takes an int (not ``2.0``, ``"2"`` or a
        bool), a float field a finite number (not a string, a bool, ``.inf`` or ``.nan``)."""
        if info.field_name is None:
            return value
        return number_as_written(number_kinds(cls.model_fields[info.field_name].annotation), value)


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


class RetryConfig(_Strict):
    """How transient backend failures (429, 5xx, timeouts) are retried: a result setting,
    since it decides which prompts end as errors."""

    max_retries: int = _field("result", 3, ge=0, le=100, description="Retries per backend call.")
    base_delay_s: float = _field(
        "result", 0.5, ge=0, le=MAX_WAIT_S, description="First wait; doubled on each retry."
    )
    max_delay_s: float = _field(
        "result", 20.0, ge=0, le=MAX_WAIT_S, description="Longest wait between tries."
    )


class BackendConfig(_Strict):
    """The model: ``{kind: KIND, ...options}``.

    ``local`` (embedded llama.cpp), ``openai`` (a compatible server), ``scripted``, or a
    kind an installed plugin registers. The other keys are the kind's options, validated by
    the kind (:mod:`sampling_core.kinds`); on resume an option must match unless the kind
    labels it ``throughput`` or ``location``.
    """

    model_config = ConfigDict(extra="allow", frozen=True, hide_input_in_errors=True)

    kind: str = _field("result", description="Which backend kind; the other keys are its options.")
    retries: RetryConfig = _block(
        "result", lambda: RetryConfig(), description="Retries of transient backend failures."
    )

    @property
    def options(self) -> dict[str, Any]:
        """The kind's options (every key but ``kind``)."""
        return dict(self.model_extra or {})


class GenerationOptions(_Strict):
    """Options sent with every backend call."""

    temperature: float | None = _field("result", None, ge=0, description="Sampling temperature.")
    top_p: float | None = _field("result", None, gt=0, le=1, description="Nucleus sampling mass.")
    max_tokens: int | None = _field("result", None, ge=1, description="Most tokens per answer.")
    stop: list[str] | None = _field("result", None, description="Stop sequences.")
    logprobs: bool | None = _field(
        "result",
        None,
        description="Ask for each token's log-probability (kept in the records when asked).",
    )
    top_logprobs: int | None = _field(
        "result", None, ge=0, le=20, description="How many most likely tokens to return per place."
    )

    def as_options(self) -> dict[str, Any]:
        """The options that are set, as the engine's ``options`` mapping."""
        return self.model_dump(exclude_none=True)


class StrategyConfig(_Strict):
    """How failed attempts are repaired and which attempt is picked: ``NAME`` or
    ``{name: NAME, ...options}`` (e.g. ``keep_failures``, ``template``)."""

    model_config = ConfigDict(extra="allow", frozen=True, hide_input_in_errors=True)

    name: str = _field(
        "result",
        "rejection",
        description="rejection, repair, multiturn, best_of_n, majority, or one a plugin adds "
        "(or `strategy: NAME`); the other keys are its options.",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @property
    def options(self) -> dict[str, Any]:
        """The strategy's options (every key but ``name``)."""
        return dict(self.model_extra or {})


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
    early_exit: bool = _field(
        "result",
        True,
        description="Stop a prompt's other subsamples at its first pass; `false` runs each "
        "subsample until it passes or spends its loop budget (for pass@k).",
    )
    early_stop: bool = _field(
        "result",
        True,
        description="Stop a generation as soon as the text so far fails a requirement that "
        "can tell (max_words, max_chars, not_contains): the attempt fails, and is repaired.",
    )
    launch: Literal["all", "staggered", "on_failure"] = _field(
        "result",
        "all",
        description="When subsamples start: `all` at once, `staggered` (one every "
        "`stagger_s`, unless the prompt is decided by then) or `on_failure` (the next each "
        "time a running one fails an attempt or ends).",
    )
    stagger_s: float = _field(
        "result",
        DEFAULT_STAGGER_S,
        ge=0,
        le=MAX_STAGGER_S,
        description="`launch: staggered`: seconds between two subsamples' starts (at most "
        "an hour).",
    )

    @field_validator("loop_budget", "concurrency_budget", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("must be an int >= 1, not a boolean")
        return value


class RequirementSpec(_Strict):
    """One requirement: ``{KIND: VALUE}`` (``- max_words: 40``), or a bare ``KIND``.

    The mapping's first key names the kind; its other keys are the kind's options
    (``- {equals_field: answer, extract: last_number}``).
    """

    kind: str = _field("result", description="The requirement kind: the mapping's first key.")
    value: Any = _field("result", None, description="Its value.")
    options: dict[str, Any] = _field(
        "result", {}, description="The mapping's other keys: the kind's options."
    )

    @model_validator(mode="before")
    @classmethod
    def _from_mapping(cls, data: Any) -> Any:
        if isinstance(data, str) and data.strip():
            return {"kind": data.strip()}
        if not isinstance(data, dict) or not data:
            raise ValueError(
                "a requirement is a mapping {KIND: VALUE} (e.g. `- max_words: 40`), "
                f"got {type(data).__name__}"
            )
        (kind, value), *rest = data.items()
        if not isinstance(kind, str) or not all(isinstance(k, str) for k, _ in rest):
            raise ValueError("a requirement's keys must be strings")
        return {"kind": kind, "value": value, "options": dict(rest)}

    @model_serializer(mode="plain")
    def _as_mapping(self) -> dict[str, Any]:
        return {self.kind: self.value, **self.options}


class PluginEntry(_Strict):
    """One plugin of a run: ``NAME`` or ``{name: NAME, options: {...}}``."""

    name: str = _field("result", description="The installed plugin's name.")
    options: dict[str, Any] = _field(
        "result", {}, description="Keyword arguments of its class (e.g. capture_content)."
    )

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @field_validator("name")
    @classmethod
    def _installed_name(cls, name: str) -> str:
        # The one rule for a run's plugins, wherever they come from (the config, --plugin,
        # SAMPLEHOOKS_PLUGINS): installed plugins only, so each is recorded by its name and
        # compared on resume. Never a module to import: an import runs code, even for a
        # resume that is then refused, and a module path cannot be resumed elsewhere.
        if not name.strip():
            raise ValueError("a plugin name is empty")
        if any(mark in name for mark in ".:/\\"):
            raise ValueError(
                f"{name!r} is a module path; a run names installed plugins only "
                "(entry points, see `samplehooks plugins`): install the module as a plugin, "
                "or pass the plugin object to run_batch(plugins=[...]) from Python"
            )
        return name

    @model_serializer(mode="plain")
    def _as_entry(self) -> Any:
        return {"name": self.name, "options": self.options} if self.options else self.name


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

    cache: Path | None = _field(
        "throughput",
        None,
        description="A response cache (an SQLite file, relative to the config file): a call "
        "asked again (the same request body, to the same model and server) is answered "
        "from it. "
        "Throughput: a cached answer is one the same model gave to the same request, and "
        "records mark it `cached`.",
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
    format: dict[str, Any] | None = _field(
        "result",
        None,
        description="A JSON schema every answer must match (checked; the local and "
        "OpenAI-compatible backends also constrain their decoding to it).",
    )
    selection: Literal["first", "ordered"] = _field(
        "result", "first", description="`first` passing attempt, or the `ordered` one."
    )
    plugins: list[PluginEntry] = _field(
        "result",
        [],
        description="Installed plugins whose hooks fire, e.g. tracing, "
        "{name: recorder, options: {...}}; on resume, observers may change, artifact "
        "writers and other plugins must match.",
    )
    check_timeout_s: float | None = _field(
        "result",
        DEFAULT_CHECK_TIMEOUT_S,
        gt=0,
        description="Seconds one requirement check may take before it fails (null: no limit).",
    )
    attempt_timeout_s: float | None = _field(
        "result",
        None,
        gt=0,
        description="Seconds one backend call may take in all, however its server keeps it "
        "alive (comments, empty chunks); past it the call is a transient failure, retried "
        "under `backend.retries` (null: no limit; `backend.timeout_s` bounds each read).",
    )
    run: RunSettings = _block("throughput", RunSettings, description="Runner throughput settings.")

    @field_validator("format")
    @classmethod
    def _a_json_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is not None:
            schema_validator(schema)  # ValueError: not a valid JSON schema
        return schema
