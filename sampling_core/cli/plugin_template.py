"""``samplehooks plugins new NAME``: write a ready plugin distribution to start from.

The distribution has an entry point (group ``samplehooks``), a per-call hook, a provider
hook registering a requirement kind with an options model, and a test that uses
samplehooks' pytest fixtures; ``pip install -e DIR && pytest DIR/tests`` passes as written.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from sampling_core.hooks.entry_points import installed_plugins

__all__ = ["MAX_NAME", "NAME_PATTERN", "TemplateError", "write_plugin"]

NAME_PATTERN = r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$"
MAX_NAME = 64
"""The longest plugin name ``plugins new`` takes."""


class TemplateError(ValueError):
    """A bad plugin name, or a target that is a file or not empty (exit status 2)."""


_PYPROJECT = """\
[build-system]
requires = ["hatchling>=1.25"]
build-backend = "hatchling.build"

[project]
name = "{dist}"
version = "0.1.0"
description = "A samplehooks plugin: {name}."
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["samplehooks"]

# The entry point makes it a plugin: group "samplehooks", name "{name}". Installed, its
# kinds are usable everywhere, and its per-call hooks fire in every Sampler unless
# SAMPLEHOOKS_PLUGINS / SAMPLEHOOKS_DISABLE_PLUGINS say otherwise.
[project.entry-points.samplehooks]
{name} = "{package}.plugin:Plugin"

[tool.hatch.build.targets.wheel]
packages = ["src/{package}"]

[tool.ruff]
line-length = 100
src = ["src"]
"""

_README = """\
# {dist}

A [samplehooks](https://pypi.org/project/samplehooks/) plugin, made by
`samplehooks plugins new {name}`.

- per-call hook `sampling_iteration`: counts attempts per `sample()` call (`plugin.attempts`);
- provider hook `register_requirements`: the requirement kind `{kind}` (at most N lines;
  option `ignore_blank`, validated by the pydantic model `MaxLinesOptions`).

```bash
pip install -e .
python -m pytest tests               # samplehooks' pytest fixtures come with samplehooks
samplehooks plugins                  # lists "{name}" and the kind it registers
samplehooks sample "Write a haiku." --require {kind}:3 --plugin {name}:label=demo
```

In a run's YAML: `requirements: [{{{kind}: 3, ignore_blank: false}}]` and
`plugins: [{{name: {name}, options: {{label: demo}}}}]`.
"""

_INIT = '''\
"""The samplehooks plugin {name!r}."""

from {package}.plugin import MaxLinesOptions, Plugin, max_lines

__all__ = ["MaxLinesOptions", "Plugin", "max_lines"]
'''

_PLUGIN = '''\
"""The plugin {name!r}: one per-call hook and one provider hook."""

from __future__ import annotations

from collections.abc import Callable

from hook_specs import hookimpl
from hook_specs.payloads import SamplingIterationPayload
from pydantic import BaseModel, ConfigDict
from sampling_core import Requirement


class MaxLinesOptions(BaseModel):
    """The options of requirement kind ``{kind}``."""

    model_config = ConfigDict(extra="forbid")

    ignore_blank: bool = True


def max_lines(limit: int, *, ignore_blank: bool = True) -> Requirement:
    """The answer has at most ``limit`` lines (blank lines not counted unless asked)."""

    def check(text: str) -> bool:
        lines = text.strip().splitlines()
        if ignore_blank:
            lines = [line for line in lines if line.strip()]
        return len(lines) <= limit

    return Requirement(f"at most {{limit}} lines", check)


class Plugin:
    """Counts attempts per ``sample()`` call; registers a requirement kind.

    samplehooks calls the class with the plugin's options as keyword arguments:
    ``--plugin {name}:label=demo``, in YAML ``{{name: {name}, options: {{label: demo}}}}``.
    """

    def __init__(self, label: str = "{name}") -> None:
        self.label = label
        self.attempts: dict[str, int] = {{}}

    @hookimpl
    def sampling_iteration(self, payload: SamplingIterationPayload) -> None:
        """Count the completed attempt (an observe-only hook)."""
        self.attempts[payload.sampling_id] = self.attempts.get(payload.sampling_id, 0) + 1

    @staticmethod
    @hookimpl
    def register_requirements(register: Callable[..., None]) -> None:
        """Provider hooks are called on the class, so they are static methods."""
        register("{kind}", max_lines, options=MaxLinesOptions)
'''

_TEST = '''\
"""The plugin's tests, with samplehooks' pytest fixtures ``sampler`` and ``scripted_backend``."""

import pytest
from sampling_core.kinds import KindError, KindRegistry

from {package} import Plugin


def test_counts_attempts(sampler, scripted_backend):
    plugin = Plugin(label="test")
    backend = scripted_backend(["no", "yes"])
    result = sampler(backend, plugins=[plugin]).sample_sync(
        "Say yes.", requirements=[lambda text: text == "yes"], loop_budget=2
    )
    assert result.success and plugin.attempts == {{result.sampling_id: 2}}


def test_its_requirement_kind_with_options(sampler, scripted_backend):
    kinds = KindRegistry()
    kinds.add_plugin("{name}", Plugin)
    short = kinds.requirement("{kind}", 2)
    strict = kinds.requirement("{kind}", 2, ignore_blank=False)
    backend = scripted_backend(["one\\n\\ntwo"])
    assert sampler(backend).sample_sync("Hi.", requirements=[short]).success
    assert not sampler(backend).sample_sync("Hi.", requirements=[strict], loop_budget=1).success
    with pytest.raises(KindError, match="ignore_blnk"):
        kinds.requirement("{kind}", 2, ignore_blnk=True)
'''


def write_plugin(name: str, directory: Path) -> Path:
    """Write the distribution of plugin ``name`` into ``directory/samplehooks-NAME``.

    Returns the distribution's directory. Raises :class:`TemplateError` for a bad name (not
    the pattern, over :data:`MAX_NAME` characters, or a built-in plugin's name, under which
    it could never load), a ``directory`` that is not a folder, or a target that already
    holds files or is a file (nothing is written then).
    """
    _check_name(name)
    snake = name.replace("-", "_")
    dist = f"samplehooks-{name.replace('_', '-')}"
    package = f"samplehooks_{snake}"
    if directory.exists() and not directory.is_dir():
        raise TemplateError(f"--dir {directory} is a file, not a folder (nothing written)")
    root = directory / dist
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        held = "is a file" if not root.is_dir() else "already holds files"
        raise TemplateError(f"{root} {held}; choose another --dir (nothing written)")
    values = {"name": name, "dist": dist, "package": package, "kind": f"{snake}_max_lines"}
    files = {
        "pyproject.toml": _PYPROJECT,
        "README.md": _README,
        f"src/{package}/__init__.py": _INIT,
        f"src/{package}/plugin.py": _PLUGIN,
        "tests/test_plugin.py": _TEST,
    }
    made = not root.exists()
    try:
        for relative, template in files.items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(template.format(**values), encoding="utf-8")
    except OSError as exc:
        if made:  # nothing half-written is left behind
            shutil.rmtree(root, ignore_errors=True)
        raise TemplateError(
            f"cannot write {root}: {exc.strerror or exc} (nothing written)"
        ) from None
    return root


def _check_name(name: str) -> None:
    if len(name) > MAX_NAME:
        raise TemplateError(
            f"plugin name {name[:20]!r}... is {len(name)} characters long; use at most "
            f"{MAX_NAME} (it names the folder, the package and the entry point)"
        )
    if not re.fullmatch(NAME_PATTERN, name):
        raise TemplateError(
            f"plugin name {name!r}: use lower-case letters and digits, words joined by - or _ "
            "(e.g. my-checks)"
        )
    taken = {entry.name for entry in installed_plugins() if entry.builtin}
    clash = next((b for b in sorted(taken) if _same(b, name)), None)
    if clash is not None:
        raise TemplateError(
            f"plugin name {name!r} is taken by the built-in plugin {clash!r}: a plugin of "
            "that name would never load (the built-in keeps it); choose another name"
        )


def _same(one: str, other: str) -> bool:
    return one.replace("-", "_") == other.replace("-", "_")
