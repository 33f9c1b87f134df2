"""``CheckContext``: what a check may know besides the text, and how a check asks for it.

A check takes ``(text)`` or ``(text, context)``; which one is decided once, from its
signature, when the :class:`~sampling_core.requirements.checks.Requirement` is built. A
check whose verdict needs more than the text (the tokens' log-probabilities, a model's
reply) and does not have it raises :class:`CannotDecide`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FunctionType
from typing import Any

from hook_specs.records import Generation, IterationInfo, Message

__all__ = ["CannotDecide", "CheckContext", "takes_context"]


class CannotDecide(Exception):
    """A check cannot decide: the attempt lacks what its verdict needs besides the text.

    ``needs`` names it (``"token log-probabilities"``, ``"a model's reply"``). Inside
    ``sample()`` the backend gave none, so the attempt fails with the message as its
    reason; in a rescore the run did not keep it, so the attempt is **not known** (never
    passed, never failed for it: see ``docs/rescore.md``). A check of your own that reads
    ``context.generation`` (or makes a model call) raises it when what it reads is missing.
    """

    def __init__(self, message: str, needs: str = "more than the text") -> None:
        super().__init__(message)
        self.needs = needs

    @property
    def not_known(self) -> str:
        """The reason of its verdict in a rescore (the run did not keep what it needs)."""
        return f"(not known: the check needs {self.needs}, which the run did not keep)"


@dataclass(frozen=True, slots=True)
class CheckContext:
    """The attempt a check judges.

    ``messages``: the attempt's request (what the model was asked); ``row``: the dataset line
    in a batch run (``sample(..., row=...)``), else ``None``; ``iteration``: the attempt's
    :class:`IterationInfo`; ``options``: the backend call options of the attempt (its
    derived ``seed`` included). Messages and options are those the backend was sent, as
    ``generation_pre_call`` plugins left them;
    ``generate``: inside ``sample()``, ``await context.generate(request, backend=None)``
    makes a model call through the engine's backend path for this attempt (the generation
    hooks fire with ``payload.purpose == "judge"``, transient failures are retried, the
    tokens count in the call's ``usage``; ``backend`` defaults to the sampler's). ``None``
    outside a call (a check run on its own). ``generation``: what the backend returned
    for the attempt (its usage, finish reason, token log-probabilities), when known.
    """

    messages: Sequence[Message] = ()
    row: Mapping[str, Any] | None = None
    iteration: IterationInfo | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    generate: Callable[..., Awaitable[Any]] | None = None
    generation: Generation | None = None


def takes_context(check: Callable[..., Any]) -> bool:
    """Whether ``check`` accepts a second positional argument (the context).

    Worked out once per plain function's code and number of defaults (all the answer
    depends on: whether its second positional parameter has a default, never what the
    default is): the checks a factory makes (``max_words(40)``, made anew for each call)
    share their answer, without reading a signature each time."""
    if (
        type(check) is not FunctionType
        or hasattr(check, "__wrapped__")
        or hasattr(check, "__signature__")
    ):
        return _reads_context(check)
    defaults = check.__defaults__
    key = (check.__code__, len(defaults) if defaults else 0)
    known = _TAKES_CONTEXT.get(key)
    if known is None:
        known = _reads_context(check)
        if len(_TAKES_CONTEXT) >= _KEPT:
            _TAKES_CONTEXT.clear()
        _TAKES_CONTEXT[key] = known
    return known


_TAKES_CONTEXT: dict[tuple[Any, int], bool] = {}
_KEPT = 1024


def _reads_context(check: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(check).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: text only
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    return len(positional) >= 2 and positional[1].default is positional[1].empty
