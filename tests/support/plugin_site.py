"""Installed plugin distributions for tests, and a subprocess that sees them installed.

A *site* is a directory laid out as an installer leaves site-packages: a distribution's
``NAME-VERSION.dist-info`` (``METADATA`` and ``entry_points.txt``) next to its modules. Put
on a subprocess's ``PYTHONPATH``, entry-point discovery finds it exactly as it finds anything
installed. :func:`write_site` writes one by hand; :func:`pip_install` has pip build and
install a real distribution into one. :func:`run_python` and :func:`run_cli` run Python or
``samplehooks`` in a subprocess that sees the site.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def write_site(
    root: Path,
    distribution: str,
    entry_points: Mapping[str, str],
    modules: Mapping[str, str],
    *,
    version: str = "1.0",
) -> Path:
    """Write ``distribution`` ``version`` as installed into ``root`` (made if missing).

    ``entry_points`` maps each entry point's name to its target (``module`` or
    ``module:attr``) in the ``samplehooks`` group; ``modules`` maps a module name to its
    source. Returns ``root``.
    """
    info = root / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
    )
    lines = [f"{name} = {target}" for name, target in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(["[samplehooks]", *lines]) + "\n")
    for module, source in modules.items():
        (root / f"{module}.py").write_text(source)
    return root


def pip_install(source: Path, target: Path) -> Path:
    """Build the distribution at ``source`` and install it into ``target`` with pip.

    No dependencies, no index and no build isolation: nothing is downloaded. Returns
    ``target``.
    """
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
    pip += ["--no-build-isolation", "--disable-pip-version-check", "--target", str(target)]
    done = subprocess.run([*pip, str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return target


def run_python(
    site: Path,
    *args: str | Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in a subprocess that sees ``site`` installed.

    No ``SAMPLEHOOKS_*`` variable of this process reaches it (``env`` adds variables);
    it writes no bytecode into the site, and ``COLUMNS=200`` keeps rich from wrapping lines.
    """
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SAMPLEHOOKS_")}
    environ.update(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", COLUMNS="200")
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, *map(str, args)],
        env=environ,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def run_cli(
    site: Path,
    *args: str | Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``samplehooks ARGS`` in a subprocess that sees ``site`` (as :func:`run_python`)."""
    return run_python(site, "-m", "sampling_core.cli", *args, cwd=cwd, env=env)
