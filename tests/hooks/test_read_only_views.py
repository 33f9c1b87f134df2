"""Read-only payload views serialize as the values they show, without a warning.

A plugin reading ``sampling_loop_end``'s ``attempts`` (the hook reference's own
``CallSummary`` example) makes the payload hold read-only views of them; the recorder, which
serializes every payload with pydantic, must write them as it would have written the
originals: under ``-W error`` (common in plugin test suites) a serializer warning would be a
fault and its event lost.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest

from builtin_plugins.recorder import RecorderPlugin
from hook_specs import HookName, ObserveOnlyPayload
from sampling_core import Sampler, ScriptedBackend
from sampling_core.testing import HookRecorder

DOCS = Path(__file__).resolve().parents[2] / "docs"


def call_summary() -> Any:
    """The plugin of the hook reference's ``sampling_loop_end`` example, made."""
    text = (DOCS / "hooks.md").read_text(encoding="utf-8")
    section = text.split("## `sampling_loop_end`", 1)[1].split("\n## ", 1)[0]
    example = section.split("**Example.**", 1)[1]
    [code, *_] = re.findall(r"^```python\n(.*?)^```\s*$", example, re.S | re.M)
    namespace: dict[str, Any] = {"__name__": "hooks_md_sampling_loop_end"}
    exec(compile(code, "hooks.md:sampling_loop_end", "exec"), namespace)
    return namespace["CallSummary"]()


def never(text: str) -> bool:
    """never passes"""
    return False


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("summary_first", [True, False], ids=["summary-first", "recorder-first"])
def test_the_docs_call_summary_beside_the_recorder_under_warnings_as_errors_loses_nothing(
    tmp_path: Path, summary_first: bool
) -> None:
    summary, recorder = call_summary(), RecorderPlugin(tmp_path / "events.jsonl")
    plugins = [summary, recorder] if summary_first else [recorder, summary]
    sampler = Sampler(ScriptedBackend(["a", "b"]), plugins=plugins, load_entrypoints=False)
    results = [
        sampler.sample_sync("q", requirements=[never], loop_budget=2, concurrency_budget=2)
        for _ in range(3)
    ]
    anyio.run(sampler.aclose)
    assert all(r.plugin_errors == [] for r in results) and sampler.background_faults == []
    assert len(summary.lines) == 3
    with (tmp_path / "events.jsonl").open(encoding="utf-8") as lines:
        ends = [e["payload"] for e in map(json.loads, lines) if e["hook"] == "sampling_loop_end"]
    assert [end["sampling_id"] for end in ends] == [r.sampling_id for r in results]
    for end, result in zip(ends, results, strict=True):
        assert len(end["attempts"]) == 4 == result.iterations_used
        assert [a["validations"][0]["passed"] for a in end["attempts"]] == [False] * 4


@pytest.mark.anyio
async def test_every_payload_read_whole_serializes_as_before_without_a_warning() -> None:
    """The class: whatever a plugin reads, every observe-only payload of a call dumps the
    same JSON after as before, and without a warning."""
    seen = HookRecorder()
    await Sampler(ScriptedBackend(["a b", "c"]), plugins=[seen], load_entrypoints=False).sample(
        "q", requirements=[never], loop_budget=2, concurrency_budget=2
    )
    observed = [e.payload for e in seen if isinstance(e.payload, ObserveOnlyPayload)]
    hooks = {type(p).hook for p in observed}
    assert {HookName.SAMPLING_ITERATION, HookName.SAMPLING_LOOP_END} <= hooks
    for payload in observed:
        before = payload.model_dump(mode="json", fallback=repr)
        for name in type(payload).model_fields:
            getattr(payload, name)  # a plugin reads it: the payload now holds its view
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            after = payload.model_dump(mode="json", fallback=repr)
        assert after == before, type(payload).hook
