"""The dataset prompt's key inside a batch run: in every per-call payload, in structlog's
contextvars, on the tracing plugin's events and on the OTel workflow span; and the OTel
plugin's ``gen_ai.evaluation.result`` events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from builtin_plugins.otel import EVALUATION_EVENT, OtelPlugin
from builtin_plugins.tracing import TracingPlugin
from hook_specs import HookName, hookimpl
from sampling_core import Requirement, Sampler, ScriptedBackend, ValidationResult
from sampling_core.runs import run_batch
from sampling_core.testing import HookRecorder
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio

LOOP = "invoke_workflow samplehooks"


def run_config(tmp_path: Path, count: int = 4, **blocks: Any) -> Path:
    dataset = write_dataset(tmp_path / "data.jsonl", count)
    return write_config(tmp_path / "run.yaml", dataset, run={"max_concurrent_prompts": 2}, **blocks)


async def test_every_call_payload_of_a_prompt_carries_its_key(tmp_path: Path) -> None:
    seen = HookRecorder()
    out = tmp_path / "run"
    await run_batch(run_config(tmp_path), out, plugins=[seen])
    calls = [e for e in seen if not e.hook.is_run]
    assert {e.hook for e in calls} == set(HookName.per_call()) - {
        HookName.SAMPLING_REPAIR,  # nothing failed: no repair, no backend error
        HookName.GENERATION_ERROR,
        HookName.GENERATION_CANCELLED,  # nor a call cancelled
    }
    by_call = {r["sampling_id"]: r["key"] for r in records(out)}
    assert len(by_call) == 4
    assert all(e["prompt_key"] == by_call[e.sampling_id] for e in calls)


async def test_structlog_contextvars_carry_the_key_while_the_prompt_is_sampled(
    tmp_path: Path,
) -> None:
    bound: list[tuple[Any, Any]] = []

    class Peek:
        @hookimpl
        def sampling_iteration(self, payload: Any) -> None:
            bound.append(
                (structlog.contextvars.get_contextvars().get("prompt_key"), payload.prompt_key)
            )

    await run_batch(run_config(tmp_path), tmp_path / "run", plugins=[Peek()])
    assert sorted(bound) == [(f"p{i}", f"p{i}") for i in range(4)]
    assert "prompt_key" not in structlog.contextvars.get_contextvars()  # unbound after


async def test_outside_a_run_the_key_is_none(tmp_path: Path) -> None:
    seen = HookRecorder()
    sampler = Sampler(ScriptedBackend(["x"]), plugins=[seen], load_entrypoints=False)
    await sampler.sample("q")
    assert {e["prompt_key"] for e in seen} == {None}
    with pytest.raises(TypeError, match="prompt_key must be a str"):
        await sampler.sample("q", prompt_key=3)  # type: ignore[arg-type]


async def test_tracing_shows_the_key_and_the_run(tmp_path: Path) -> None:
    with capture_logs() as logs:
        await run_batch(run_config(tmp_path), tmp_path / "run", plugins=[TracingPlugin(otel=False)])
    names = [e["event"] for e in logs]
    assert names.count("run.start") == names.count("run.end") == 1
    assert names.count("prompt.start") == names.count("prompt.end") == 4
    ends = [e for e in logs if e["event"] == "prompt.end"]
    assert sorted(e["prompt_key"] for e in ends) == [f"p{i}" for i in range(4)]
    assert {e["status"] for e in ends} == {"ok"}
    for event in logs:
        if event["event"].startswith(("sampling.", "generation.")):
            assert event["prompt_key"] in {f"p{i}" for i in range(4)}, event
    [end] = [e for e in logs if e["event"] == "run.end"]
    assert (end["done"], end["ok"], end["interrupted"]) == (4, 4, False)


async def test_otel_puts_the_key_on_the_workflow_span(tmp_path: Path, provider, exporter) -> None:
    out = tmp_path / "run"
    await run_batch(run_config(tmp_path), out, plugins=[OtelPlugin(tracer_provider=provider)])
    loops = [s for s in exporter.get_finished_spans() if s.name == LOOP]
    by_call = {r["sampling_id"]: r["key"] for r in records(out)}
    assert len(loops) == 4
    for span in loops:
        attributes = span.attributes
        assert (
            attributes["samplehooks.prompt_key"] == by_call[attributes["samplehooks.sampling_id"]]
        )


async def test_one_evaluation_event_per_requirement_verdict(provider, exporter) -> None:
    scored = Requirement("scored", lambda text: ValidationResult(len(text) < 5, "too long", 0.25))
    requirements = [Requirement("says yes", lambda text: "yes" in text), scored]
    plain = Sampler(
        ScriptedBackend(["no way", "yes"]),
        plugins=[OtelPlugin(tracer_provider=provider)],
        load_entrypoints=False,
        strict_plugins=True,
    )
    result = await plain.sample("q", requirements=requirements, loop_budget=2)
    assert result.success and result.iterations_used == 2
    attempts = sorted(
        (s for s in exporter.get_finished_spans() if s.name == "samplehooks.attempt"),
        key=lambda s: s.attributes["samplehooks.attempt"],
    )
    verdicts = [
        [(e.name, dict(e.attributes)) for e in span.events if e.name == EVALUATION_EVENT]
        for span in attempts
    ]
    name, label, value = (
        "gen_ai.evaluation.name",
        "gen_ai.evaluation.score.label",
        "gen_ai.evaluation.score.value",
    )
    first, second = verdicts
    assert [e[1][name] for e in first] == ["says yes", "scored"]
    assert [e[1][label] for e in first] == ["fail", "fail"]  # "no way": no yes, 6 chars
    assert [e[1][label] for e in second] == ["pass", "pass"]
    assert first[1][1][value] == 0.25  # the score the check gave
    assert all("gen_ai.evaluation.explanation" not in e[1] for e in first + second)
    # with capture_content the check's reason is the explanation
    exporter.clear()
    telling = Sampler(
        ScriptedBackend(["no way"]),
        plugins=[OtelPlugin(tracer_provider=provider, capture_content=True)],
        load_entrypoints=False,
    )
    await telling.sample("q", requirements=[scored])
    [span] = [s for s in exporter.get_finished_spans() if s.name == "samplehooks.attempt"]
    [event] = [e for e in span.events if e.name == EVALUATION_EVENT]
    assert event.attributes["gen_ai.evaluation.explanation"] == "too long"
