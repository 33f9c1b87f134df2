"""Plugins the Ray executor's tests give ``run_batch`` (copied to each worker, which imports
this module: the test cluster puts the checkout on the workers' ``PYTHONPATH``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hook_specs import background, hookimpl

MARKER_ENV = "SAMPLEHOOKS_TEST_EXIT_MARKER"


class ExitOnce:
    """Ends its own worker process (``os._exit``) on its 5th backend call, once per marker.

    The marker file (path in ``SAMPLEHOOKS_TEST_EXIT_MARKER``) is made just before, so
    the worker that replaces the dead one, and every later run, goes on normally.
    """

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def generation_pre_call(self, payload: Any) -> None:
        self.calls += 1
        marker = Path(os.environ.get(MARKER_ENV, ""))
        if self.calls == 5 and marker.name and not marker.exists():
            marker.write_text(str(os.getpid()))
            os._exit(1)


class ExitAlways:
    """Ends its worker process on every backend call."""

    @hookimpl
    def generation_pre_call(self, payload: Any) -> None:
        os._exit(1)


class RefusedOnWorker:
    """A plugin no sampler accepts (``@background`` on a hook that may write): the workers
    refuse it while they set up, which the driver must report plainly."""

    @hookimpl
    @background
    def generation_pre_call(self, payload: Any) -> None:
        pass
