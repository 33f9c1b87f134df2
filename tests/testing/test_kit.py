"""The pytest plugin for plugin authors (``sampling_core.testing``), used as they would use it."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

import sampling_core.pytest_plugin
import sampling_core.testing
from hook_specs import HookName, ValidationResult, hookimpl
from sampling_core.requirements.checks import contains
from tests.support.engine_helpers import hook_sequence
from tests.support.plugin_site import run_python

H = HookName


def test_the_fixtures_come_from_the_pytest11_entry_point(request: pytest.FixtureRequest) -> None:
    # Loaded by pytest from the installed distribution's entry point, not by a conftest.
    assert request.config.pluginmanager.get_plugin("samplehooks") is sampling_core.pytest_plugin
    for name in ("hook_recorder", "scripted_backend", "sampler", "plugin_env"):
        assert request.getfixturevalue(name) is not None


@pytest.mark.anyio
async def test_recorder_sees_every_hook_in_order_with_the_current_iteration(
    sampler: Any, scripted_backend: Any, hook_recorder: Any
) -> None:
    s = sampler(scripted_backend(["no", "yes"]))
    result = await s.sample("Say yes.", requirements=[contains("yes")], loop_budget=2)

    assert result.success and result.text == "yes"
    assert hook_recorder.names() == hook_sequence(2)
    assert hook_recorder.sampling_ids() == [result.sampling_id]
    assert hook_recorder.names(result.sampling_id) == hook_recorder.names()
    assert hook_recorder.names("another call") == []
    assert [e["passed"] for e in hook_recorder.for_hook(H.SAMPLING_ITERATION)] == [False, True]
    assert hook_recorder.iterations() == [1, 2]
    for event in hook_recorder:
        if event.hook in (H.SAMPLING_LOOP_START, H.SAMPLING_CALL, H.SAMPLING_LOOP_END):
            assert event.iteration is None
        elif event.hook is H.SAMPLING_REPAIR:
            # fired from the failed attempt's context, about the next one
            assert event.iteration.attempt == event["attempt"] == 1
        else:
            assert event.iteration.iteration == event["iteration"]
    (end,) = hook_recorder.payloads("sampling_loop_end")
    assert end.iterations_used == 2 and end.stop_reason == "success"


def test_snapshot_keeps_what_the_recorder_saw(
    sampler: Any, scripted_backend: Any, hook_recorder: Any
) -> None:
    class SetTemperature:
        @hookimpl
        def generation_pre_call(self, payload: Any) -> None:
            payload.options = {**payload.options, "temperature": 0.5}

    class RunsAfterTheRecorder:
        @hookimpl(trylast=True)  # pluggy: of two trylast impls, the later registered runs last
        def generation_pre_call(self, payload: Any) -> None:
            payload.options = {**payload.options, "temperature": 0.9}

    backend = scripted_backend(["hi"])
    plugins = [SetTemperature(), hook_recorder, RunsAfterTheRecorder()]
    sampler(backend, plugins=plugins, record=False).sample_sync("Hi.")

    (event,) = hook_recorder.for_hook(H.GENERATION_PRE_CALL)
    assert event["options"] == {"temperature": 0.5}
    assert event.payload.options == {"temperature": 0.9}
    assert backend.requests[0].options == {"temperature": 0.9}


def test_recorder_snapshots_sampling_validate_as_the_plugins_left_it(
    sampler: Any, scripted_backend: Any, hook_recorder: Any
) -> None:
    class AcceptAll:
        @hookimpl
        def sampling_validate(self, payload: Any) -> None:
            payload.results[0] = dataclasses.replace(payload.results[0], passed=True, reason="ok")

    class VetoAfterTheRecorder:
        @hookimpl(trylast=True)  # registered after the recorder: runs after it
        def sampling_validate(self, payload: Any) -> None:
            payload.results.append(ValidationResult(False, "vetoed"))

    plugins = [AcceptAll(), hook_recorder, VetoAfterTheRecorder()]
    s = sampler(scripted_backend(["no"]), plugins=plugins, record=False)
    result = s.sample_sync("Say yes.", requirements=[contains("yes")])

    (event,) = hook_recorder.for_hook(H.SAMPLING_VALIDATE)
    assert event.iteration is not None and event.iteration.iteration == event["iteration"] == 1
    assert event["text"] == "no"
    # the snapshot: AcceptAll's change, not the veto that came after the recorder
    assert [(r.passed, r.reason) for r in event["results"]] == [(True, "ok")]
    assert [(r.passed, r.reason) for r in event.payload.results] == [
        (True, "ok"),
        (False, "vetoed"),
    ]
    assert not result.success and result.attempts[0].failure_reasons == ["vetoed"]
    names = hook_recorder.names()
    assert names.index("sampling_validate") == names.index("generation_post_call") + 1
    assert names.index("sampling_iteration") == names.index("sampling_validate") + 1


def test_sampler_fixture_loads_no_entry_point_and_can_skip_the_recorder(
    sampler: Any, hook_recorder: Any, plugin_env: Any
) -> None:
    plugin_env.only("tracing")
    quiet = sampler(record=False)
    assert quiet.plugins.names() == []
    assert quiet.sample_sync("Hi.").text == "ok"
    assert len(hook_recorder) == 0

    recorded = sampler()
    assert recorded.plugins.names() == ["HookRecorder"]
    recorded.sample_sync("Hi.")
    assert hook_recorder.names() == hook_sequence(1)
    hook_recorder.clear()
    assert hook_recorder.events == []


@pytest.mark.anyio
async def test_scripted_backend_per_subsample_replies_and_latency(
    sampler: Any, scripted_backend: Any, hook_recorder: Any
) -> None:
    # Subsample 0 is slow; subsample 1 answers at once and must win.
    backend = scripted_backend({0: ["slow yes"], 1: ["no", "fast yes"]}, latency={0: 5.0})
    result = await sampler(backend).sample(
        "Say yes.", requirements=[contains("yes")], loop_budget=2, concurrency_budget=2
    )
    assert result.text == "fast yes"
    assert (result.picked.subsample_index, result.picked.attempt) == (1, 2)
    assert hook_recorder.iterations() == [3, 4]  # subsample 1 * loop_budget 2 + attempt
    assert result.cancelled == 1


def test_scripted_backend_passes_plain_lists_through(scripted_backend: Any) -> None:
    backend = scripted_backend(["a", "b"], model="m")
    assert backend.model == "m"
    from sampling_core import sample_sync

    assert [sample_sync("x", backend=backend).text for _ in range(3)] == ["a", "b", "a"]


def test_plugin_env_sets_what_a_new_sampler_reads(sampler: Any, plugin_env: Any) -> None:
    for name in sampling_core.testing.PLUGIN_ENV_VARS:
        assert name not in os.environ
    plugin_env.only("a", "b")
    plugin_env.disable("c")
    plugin_env.trace_hooks()
    settings = sampler().settings
    assert settings.only == {"a", "b"}
    assert settings.disabled == {"c"}
    assert settings.trace_hooks is True
    plugin_env.only()
    assert sampler().settings.only == frozenset()


def test_a_recorder_given_per_call_runs_after_the_samplers_trylast_plugins(
    sampler: Any, scripted_backend: Any, hook_recorder: Any
) -> None:
    class LastWord:
        @hookimpl(trylast=True)
        def generation_pre_call(self, payload: Any) -> None:
            payload.options = {**payload.options, "stop": ["\n"]}

    s = sampler(scripted_backend(["hi"]), plugins=[LastWord()], record=False)
    s.sample_sync("Hi.", plugins=[hook_recorder])  # registered later: called later, as in pluggy
    (event,) = hook_recorder.for_hook(H.GENERATION_PRE_CALL)
    assert event["options"] == {"stop": ["\n"]}


FAULTY_PLUGIN_TEST = """
from hook_specs import hookimpl


class FailsOnEveryAttempt:
    @hookimpl
    def sampling_iteration(self, payload):
        raise RuntimeError("broken plugin")


def test_the_call_still_succeeds(sampler):
    result = sampler(plugins=[FailsOnEveryAttempt()]).sample_sync("Hi.")
    assert result.text == "ok"
"""


def _run_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_faulty.py").write_text(FAULTY_PLUGIN_TEST)
    flags = ["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--rootdir", "."]
    return run_python(tmp_path, "-m", "pytest", *flags, *args, "test_faulty.py", cwd=tmp_path)


def test_strict_plugins_makes_a_plugin_fault_fail_the_test(
    tmp_path: Path, strict_plugins: bool, sampler: Any
) -> None:
    # Off by default: the fault is isolated, as in production, and recorded.
    assert strict_plugins is False and sampler().strict_plugins is False
    lenient = _run_pytest(tmp_path)
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr

    strict = _run_pytest(tmp_path, "-o", "samplehooks_strict_plugins=true")
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "PluginError" in strict.stdout
    assert "'FailsOnEveryAttempt' failed in sampling_iteration" in strict.stdout
    assert "RuntimeError: broken plugin" in strict.stdout

    # The same from the project's ini file.
    (tmp_path / "pytest.ini").write_text("[pytest]\nsamplehooks_strict_plugins = true\n")
    from_ini = _run_pytest(tmp_path)
    assert from_ini.returncode == 1 and "broken plugin" in from_ini.stdout
