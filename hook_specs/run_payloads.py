"""The payloads of the run hooks, fired by a batch run around its calls (``run_start``,
``prompt_start``, ``prompt_end``, ``run_end``): observe-only, read-only all the way down."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from hook_specs.names import HookName
from hook_specs.payload_base import ObserveOnlyPayload


class RunPayload(ObserveOnlyPayload):
    """Fields every run hook's payload carries."""

    run_dir: str = Field(description="The run directory, as an absolute path.")
    run_id: str | None = Field(
        default=None,
        description="The run's identity, made with the run and kept in its `meta.json`: a "
        "new run in a path an old one had has another (`None` for a run made before runs "
        "had one).",
    )
    session: int = Field(
        description="The session of the run: 1 for the first, one more for each resume."
    )


class RunStartPayload(RunPayload):
    """Payload of ``run_start``."""

    hook: ClassVar[HookName] = HookName.RUN_START

    resumed: bool = Field(description="Whether this session continues an earlier one.")
    executor: Literal["local", "ray"] = Field(description='Where prompts run: "local" or "ray".')
    total: int = Field(description="Prompts in the dataset.")
    done: int = Field(
        description="Prompts this session will not run: those with a final record before it "
        "(with `--retry-failed`, only the `ok` ones)."
    )
    settings: dict[str, Any] = Field(
        description="The result settings recorded in `meta.json` (what a resume must keep)."
    )
    config: dict[str, Any] = Field(
        description="The effective config as data (what `effective_config.yaml` holds)."
    )


class PromptStartPayload(RunPayload):
    """Payload of ``prompt_start``."""

    hook: ClassVar[HookName] = HookName.PROMPT_START

    key: str = Field(description="The prompt's key in the dataset.")
    row: dict[str, Any] = Field(description="The prompt's dataset line, as read.")


class PromptEndPayload(RunPayload):
    """Payload of ``prompt_end``."""

    hook: ClassVar[HookName] = HookName.PROMPT_END

    key: str = Field(description="The prompt's key in the dataset.")
    record: dict[str, Any] = Field(
        description="The prompt's record, as written to `records.jsonl` (`status` is "
        '`"ok"`, `"failed"` or `"error"`); for a prompt the session ended first, '
        '`key`, `status` `"interrupted"` and `reason`, written nowhere (it runs again on '
        "`--resume`)."
    )
    status: str = Field(
        description='How the prompt ended: its record\'s `status` (`"ok"`, `"failed"`, '
        '`"error"`), or `"interrupted"` when the session ended first (kept by the recorder, '
        "which leaves the record out of `events.jsonl`)."
    )


class RunEndPayload(RunPayload):
    """Payload of ``run_end``."""

    hook: ClassVar[HookName] = HookName.RUN_END

    totals: dict[str, Any] = Field(
        description="The run's totals, as `samplehooks report --json` gives them (the whole "
        "run, earlier sessions included)."
    )
    pass_at_k: list[dict[str, Any]] | None = Field(
        description="pass@k as `report --json` gives it (`None` unless the run measured it: "
        "`budgets.early_exit: false`)."
    )
    pass_hat_k: list[dict[str, Any]] | None = Field(
        description="pass^k (the chance that k samples all pass), shaped like `pass_at_k`."
    )
    maj_at_k: list[dict[str, Any]] | None = Field(
        default=None,
        description="maj@k (the chance that the majority answer of k samples is right), shaped "
        "like `pass_at_k` (`None` unless the samples' answers are known: a field check or a "
        "majority strategy). It counts each sample once: when the run's vote weighed answers, "
        'each entry says `"unweighted": true` and the weight (`run_vote_weight`).',
    )
    interrupted: bool = Field(
        description="Whether the session ended before its prompts did (Ctrl-C, SIGTERM, or a "
        "fatal error)."
    )
    error: str | None = Field(
        default=None, description="The fatal error that ended the session, if one did."
    )
    elapsed_s: float = Field(description="Wall time of this session, in seconds.")
    report: dict[str, Any] = Field(
        default_factory=dict,
        description="The run's report as `samplehooks report --json` gives it, without its "
        "`prompts` (iterate `rows` for those): `totals`, `pass_at_k`, `pass_hat_k`, `retries`, "
        "... (empty when the run directory could not be read).",
    )
    report_text: str = Field(
        default="", description="The same report as text, as `samplehooks report` prints it."
    )
    rows: Any = Field(
        default=(),
        exclude=True,
        description="Each prompt's row of the report (its latest record: what `report --json` "
        "lists under `prompts`), as a dict, read as they are iterated from the index the run "
        "was read into once at its end (iterate it during `run_end`; never written by the "
        "recorder).",
    )
