"""``examples/plugin-example`` installed for real with pip, then discovered, listed and fired.

pip builds the example's wheel from its own ``pyproject.toml`` (hatchling, no build
isolation, no index: nothing is downloaded) and installs it into a temporary directory; a
subprocess with that directory on ``PYTHONPATH`` sees it as an installed distribution.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from tests.support.plugin_site import pip_install, run_cli, run_python
from tests.support.reliability_helpers import assert_refused

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugin-example"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example distribution, installed by pip into a directory of its own."""
    return pip_install(EXAMPLE, tmp_path_factory.mktemp("example-site"))


def test_pip_installed_it_as_a_distribution_with_an_entry_point(site: Path) -> None:
    (info,) = site.glob("samplehooks_example_plugin-0.1.0.dist-info")
    assert "[samplehooks]" in (info / "entry_points.txt").read_text()
    assert (site / "samplehooks_example_plugin" / "plugin.py").is_file()


def test_samplehooks_plugins_lists_it_with_its_hooks(site: Path) -> None:
    done = run_cli(site, "plugins", "--json")
    assert done.returncode == 0, done.stderr
    (example,) = [p for p in json.loads(done.stdout) if p["name"] == "example"]
    assert example == {
        "name": "example",
        "value": "samplehooks_example_plugin:ExamplePlugin",
        "distribution": "samplehooks-example-plugin",
        "version": "0.1.0",
        "builtin": False,
        "enabled": True,
        "loaded": True,
        "error": None,
        "hooks": ["sampling_iteration", "generation_pre_call"],
        "provides": {},
    }
    (kinds,) = [p for p in json.loads(done.stdout) if p["name"] == "example-kinds"]
    assert kinds["loaded"] and kinds["hooks"] == [
        "register_requirements",
        "register_backends",
        "register_strategies",
    ]
    assert kinds["provides"] == {
        "requirement": ["starts_with"],
        "backend": ["echo"],
        "strategy": ["nudge"],
    }


def test_it_fires_during_sample(site: Path) -> None:
    script = textwrap.dedent(
        """
        import json
        from sampling_core import ScriptedBackend, sample_sync
        from sampling_core.engine.default import default_sampler

        backend = ScriptedBackend(["no", "yes"])
        result = sample_sync("Say yes.", backend=backend,
                             requirements=[lambda text: text == "yes"], loop_budget=2)
        plugin = default_sampler().plugins.get("example")
        print(json.dumps({
            "text": result.text,
            "plugins": default_sampler().plugins.names(),
            "attempts": plugin.attempts[result.sampling_id],
            "first_roles": [r.messages[0]["role"] for r in backend.requests],
        }))
        """
    )
    done = run_python(site, "-c", script)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "text": "yes",
        "plugins": ["example", "example-kinds"],  # the second only provides kinds
        "attempts": 2,
        "first_roles": ["system", "system"],
    }


def test_its_own_tests_pass_with_the_samplehooks_pytest_fixtures(
    site: Path, tmp_path: Path
) -> None:
    tests = tmp_path / "tests"
    shutil.copytree(EXAMPLE / "tests", tests)
    # samplehooks' fixtures come from its pytest11 entry point; hypothesis (slow to import)
    # is not needed here.
    flags = ["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
    done = run_python(site, "-m", "pytest", *flags, str(tests), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout


# -- its kinds, used from the command line and from a run's YAML --------------------------


def test_its_kinds_work_in_samplehooks_sample(site: Path) -> None:
    done = run_cli(
        site, "sample", "hello",
        "--backend", "echo", "--backend-option", "upper=true", "--backend-option", "prefix=Echo:",
        "--require", "starts_with:ECHO", "--strategy", "nudge:word=Kindly",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ECHO: HELLO\n"
    refused = run_cli(
        site, "sample", "hello",
        "--backend", "echo", "--backend-option", "uper=true",
    )  # fmt: skip
    assert_refused(refused, "backend 'echo' (plugin 'example-kinds'): unknown option 'uper'")


CONFIG = """
dataset: {path: data.jsonl}
backend: {kind: echo, prefix: "Sure:", latency_s: 0}
requirements:
  - {starts_with: "sure", case_sensitive: false}
  - max_words: 6
strategy: {name: nudge, word: Kindly, keep_failures: 2}
budgets: {loop_budget: 2}
"""


def test_its_kinds_work_in_a_run_and_a_bad_option_writes_nothing(
    site: Path, tmp_path: Path
) -> None:
    (tmp_path / "data.jsonl").write_text(
        '{"prompt": "short one"}\n{"prompt": "a prompt with far too many words"}\n'
    )
    (tmp_path / "run.yaml").write_text(CONFIG)
    done = run_cli(site, "run", "run.yaml", "--out", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "out" / "records.jsonl").read_text().splitlines()
    status = [(r["text"], r["status"]) for r in map(json.loads, lines)]
    assert sorted(status) == [
        ("Sure: a prompt with far too many words", "failed"),
        ("Sure: short one", "ok"),
    ]
    effective = (tmp_path / "out" / "effective_config.yaml").read_text()
    assert "kind: echo" in effective and "name: nudge" in effective

    (tmp_path / "bad.yaml").write_text(CONFIG.replace("word: Kindly", "wrd: Kindly"))
    bad = run_cli(site, "run", "bad.yaml", "--out", "bad", cwd=tmp_path)
    assert_refused(bad, "strategy.wrd", "did you mean 'word'?")
    assert not (tmp_path / "bad").exists()
