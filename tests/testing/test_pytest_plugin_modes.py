"""The pytest11 entry point imports nothing heavy, and its fixtures work under anyio's
pytest plugin and pytest-asyncio (strict and auto mode), each run in a pytest of its own."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ENGINE_MODULES = (
    "sampling_core.",
    "hook_specs",
    "builtin_plugins",
    "pydantic",
    "anyio",
    "structlog",
)

# One async test using every fixture, written for each runner; {mark} is how it is marked.
TEST_FILE = textwrap.dedent(
    """
    import pytest
    from sampling_core.requirements.checks import contains

    {mark}
    async def test_fixtures_in_an_async_test(sampler, scripted_backend, hook_recorder, plugin_env):
        plugin_env.only()
        result = await sampler(scripted_backend(["no", "yes"])).sample(
            "Say yes.", requirements=[contains("yes")], loop_budget=2
        )
        assert result.success and result.text == "yes"
        assert hook_recorder.names().count("sampling_iteration") == 2


    def test_fixtures_in_a_sync_test(sampler, scripted_backend, hook_recorder):
        result = sampler(scripted_backend(["yes"])).sample_sync("Say yes.")
        assert result.text == "yes" and hook_recorder.names()[0] == "sampling_loop_start"
    """
)

ANYIO_BACKEND = """
@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param
"""
MODES = {
    # anyio's plugin, as the project's own tests use it (on asyncio and on trio)
    "anyio": ("@pytest.mark.anyio", ["-p", "no:asyncio"], ANYIO_BACKEND),
    "asyncio-strict": ("@pytest.mark.asyncio", ["-o", "asyncio_mode=strict"], ""),
    "asyncio-auto": ("", ["-o", "asyncio_mode=auto"], ""),
}


def test_the_entry_point_imports_no_engine_module() -> None:
    code = (
        "import sys, importlib.metadata as m\n"
        "(ep,) = m.entry_points(group='pytest11', name='samplehooks')\n"
        "ep.load()\n"
        f"print(sorted(n for n in sys.modules if n.startswith({ENGINE_MODULES!r})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['sampling_core.pytest_plugin']"


@pytest.mark.parametrize("mode", MODES)
def test_the_fixtures_work_under_each_async_test_runner(mode: str, tmp_path: Path) -> None:
    mark, flags, conftest = MODES[mode]
    (tmp_path / "test_it.py").write_text(TEST_FILE.format(mark=mark))
    (tmp_path / "conftest.py").write_text("import pytest\n" + conftest)
    if mode != "anyio":
        (tmp_path / "pytest.ini").write_text(
            "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "no:hypothesispytest", *flags],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    passed = "3 passed" if mode == "anyio" else "2 passed"  # anyio: asyncio and trio
    assert f"{passed} in" in done.stdout, done.stdout  # no warning, nothing skipped
