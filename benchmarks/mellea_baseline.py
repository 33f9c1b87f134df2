"""Mellea 0.8's ``RejectionSamplingStrategy`` on the same fake model.

Mellea is optional (the ``bench`` extra): when it cannot be imported, :func:`available`
says why and the Mellea column of the table reads "n/a". Its logger is set to WARNING so
that it does not print a line per failed attempt (that would slow Mellea down and flood
the table). Mellea's backends implement ``_generate_from_context``; ours answers from the
shared :class:`~benchmarks.fakes.FakeModel`, like the engine's fake backend does.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks.fakes import PROMPT, FakeModel, passes

_missing: str | None = None
try:
    logging.getLogger("mellea").setLevel(logging.WARNING)
    from mellea.core import Backend, CBlock, GenerateLog, ModelOutputThunk, Requirement
    from mellea.stdlib.context import SimpleContext
    from mellea.stdlib.requirements import simple_validate
    from mellea.stdlib.sampling import RejectionSamplingStrategy
except ImportError as exc:  # pragma: no cover - depends on the environment
    _missing = f"{type(exc).__name__}: {exc}"


def available() -> str | None:
    """``None`` when Mellea can be used, else why not."""
    return _missing


def version() -> str | None:
    """The installed Mellea version, if any."""
    if _missing is not None:
        return None
    from importlib.metadata import version as dist_version

    return dist_version("mellea")


if _missing is None:

    class MelleaFakeBackend(Backend):
        """A Mellea backend answering from a :class:`FakeModel`."""

        def __init__(self, model: FakeModel) -> None:
            self.model = model
            self._model_id = "fake"
            self._provider = "fake"

        async def _generate_from_context(
            self,
            action: Any,
            ctx: Any,
            *,
            format: Any = None,
            model_options: dict | None = None,
            tool_calls: bool = False,
        ) -> tuple[Any, Any]:
            delay, text = self.model.next_call()
            if delay:
                await self.model.wait(delay)
            output = ModelOutputThunk(value=text)
            output._generate_log = GenerateLog(backend="fake", action=action, result=output)
            return output, ctx.add(action).add(output)

        async def _generate_from_raw(self, actions: Any, ctx: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmarks only sample from a context")


def mellea_runner(
    model: FakeModel, *, loop_budget: int, concurrency_budget: int
) -> Callable[[], Awaitable[Any]]:
    """A coroutine function running one Mellea rejection-sampling call."""
    if _missing is not None:
        raise RuntimeError(f"Mellea is not available: {_missing}")
    backend = MelleaFakeBackend(model)
    strategy = RejectionSamplingStrategy(
        loop_budget=loop_budget, concurrency_budget=concurrency_budget
    )
    requirement = Requirement(
        "the answer is the passing one", validation_fn=simple_validate(passes)
    )

    async def run() -> Any:
        return await strategy.sample(
            CBlock(PROMPT), SimpleContext(), backend, [requirement], show_progress=False
        )

    return run


def attempts_of(result: Any) -> int:
    """Completed attempts of a Mellea ``SamplingResult``."""
    return len(result.sample_generations)
