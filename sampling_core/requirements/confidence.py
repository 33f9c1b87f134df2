"""Token confidence, and ``min_confidence``: stop an answer the model is unsure of.

As DeepConf (Fu et al., 2025, "Deep Think with Confidence") measures it:

* a token's **confidence** is the negative mean log-probability of the ``k`` most likely
  tokens at its place (``TokenLogprob.top``): high when the model's choice there was
  peaked, low when it hesitated between many tokens;
* a **group confidence** is the mean token confidence over a sliding window of the last
  ``window`` tokens (the whole answer when it is shorter), and an answer's **lowest group
  confidence** the least of them.

``min_confidence`` fails an answer whose group confidence falls below a threshold; while
the answer streams, its prefix check stops the generation at the first window below it.
The threshold is fixed (``threshold=``), or calibrated per ``sample()`` call as DeepConf's
online mode does: the call's first ``warmup`` generations that run to their end are never
cut; the threshold is then the ``1 - keep`` quantile of their lowest group confidences
(``keep=0.9``: a generation as confident as 90% of the warm-up ones goes on), and every
window of every generation from then on is held to it (those running meanwhile too).

The requirement asks the backend for log-probabilities itself (options ``logprobs: true``,
``top_logprobs: k``, unless the call sets them); a backend that gives none fails the
attempt with a reason that says so (:class:`NoLogprobs`, a
:class:`~sampling_core.requirements.context.CannotDecide`: in a rescore of a run that kept
none, the attempt is not known).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Any

from hook_specs.records import Generation, TokenLogprob, ValidationResult
from sampling_core.requirements.checks import Requirement
from sampling_core.requirements.context import CannotDecide, CheckContext

__all__ = [
    "ConfidenceReader",
    "NoLogprobs",
    "WindowConfidence",
    "lowest_group_confidence",
    "mean_confidence",
    "min_confidence",
    "quantile",
    "token_confidence",
]

NO_LOGPROBS = (
    "min_confidence needs token log-probabilities, and the backend gave none: use a "
    "backend that returns them (OpenAI-compatible servers, the local llama.cpp one) and do "
    "not set the options logprobs/top_logprobs to false/0"
)


class NoLogprobs(CannotDecide, ValueError):
    """A generation came without the token log-probabilities a check needs."""

    def __init__(self, message: str, needs: str = "token log-probabilities") -> None:
        super().__init__(message, needs)


NO_TOP = (
    "min_confidence needs the top tokens' log-probabilities (option top_logprobs); "
    "the backend gave only the chosen tokens'"
)


def token_confidence(token: TokenLogprob) -> float:
    """DeepConf's token confidence: the negative mean log-probability of the top tokens."""
    top = token.top
    if not top:
        raise NoLogprobs(NO_TOP, "the top tokens' log-probabilities")
    total = 0.0
    for _, logprob in top:
        total += logprob
    return -total / len(top)


def mean_confidence(logprobs: Sequence[TokenLogprob]) -> float | None:
    """The mean token confidence of a generation (``None`` for no token)."""
    if not logprobs:
        return None
    return sum(token_confidence(t) for t in logprobs) / len(logprobs)


class WindowConfidence:
    """Group confidences over a sliding window, kept as tokens arrive (constant work per
    token): ``current`` is the last full window's, ``lowest`` the least so far."""

    __slots__ = ("_sum", "_window", "count", "current", "lowest", "scanned", "tokens")

    def __init__(self, window: int) -> None:
        self._window = window
        self.tokens: deque[float] = deque()
        self._sum = 0.0
        self.count = 0
        self.current: float | None = None
        self.lowest: float | None = None
        self.scanned = 0

    def add(self, token: TokenLogprob) -> float | None:
        """Take one token in; the group confidence of the window it completes, if any."""
        self.scanned += len(token.token) + len(token.top)
        confidence = token_confidence(token)
        tokens = self.tokens
        tokens.append(confidence)
        self._sum += confidence
        self.count += 1
        if len(tokens) > self._window:
            self._sum -= tokens.popleft()
        if len(tokens) < self._window:
            return None
        group = self._sum / self._window
        self.current = group
        if self.lowest is None or group < self.lowest:
            self.lowest = group
        return group

    def overall_lowest(self) -> float | None:
        """The lowest group confidence of the whole answer (its mean when shorter than a
        window; ``None`` for no token)."""
        if self.lowest is not None:
            return self.lowest
        return self._sum / len(self.tokens) if self.tokens else None


def lowest_group_confidence(logprobs: Sequence[TokenLogprob], window: int) -> float | None:
    """The lowest group confidence of a whole generation (see the module)."""
    groups = WindowConfidence(window)
    for token in logprobs:
        groups.add(token)
    return groups.overall_lowest()


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (linear between the closest ranks)."""
    ordered = sorted(values)
    place = q * (len(ordered) - 1)
    low, high = math.floor(place), math.ceil(place)
    return ordered[low] + (ordered[high] - ordered[low]) * (place - low)


class ConfidenceReader:
    """``min_confidence``'s prefix check for one streamed generation."""

    __slots__ = ("_fixed", "_groups", "_keep", "_notes", "_warmup")

    def __init__(
        self, notes: dict[str, Any], fixed: float | None, window: int, warmup: int, keep: float
    ) -> None:
        self._notes = notes
        self._fixed = fixed
        self._warmup = warmup
        self._keep = keep
        self._groups = WindowConfidence(window)

    @property
    def scanned(self) -> int:
        """What it examined: each token's text and top alternatives."""
        return self._groups.scanned

    def feed(self, delta: str, logprobs: tuple[TokenLogprob, ...]) -> bool:
        """Take the piece's tokens in: ``False`` at a window below the threshold."""
        if delta and not logprobs and self._groups.count == 0:
            raise NoLogprobs(NO_LOGPROBS)
        threshold = self._fixed if self._fixed is not None else self._notes.get("threshold")
        for token in logprobs:
            group = self._groups.add(token)
            if threshold is not None and group is not None and group < threshold:
                return False
        return True

    def finished(self, generation: Generation) -> None:
        """A whole generation: while calibrating, its lowest group confidence counts."""
        if self._fixed is not None or "threshold" in self._notes:
            return
        lowest = self._groups.overall_lowest()
        if lowest is None:
            return
        seen: list[float] = self._notes.setdefault("lowest", [])
        seen.append(lowest)
        if len(seen) >= self._warmup:
            self._notes["threshold"] = quantile(seen, 1.0 - self._keep)


def confidence_check(fixed: float | None, window: int) -> Any:
    """``min_confidence``'s check of a whole generation (``check(text, context)``)."""

    def check(text: str, context: CheckContext) -> ValidationResult:
        generation = context.generation
        if generation is None:
            return ValidationResult(True)  # no generation to judge (a check run on its own)
        logprobs = generation.logprobs
        if logprobs is None:
            raise NoLogprobs(NO_LOGPROBS)
        if fixed is None:
            if logprobs and not logprobs[0].top:  # what its reader needs
                raise NoLogprobs(NO_TOP, "the top tokens' log-probabilities")
            return ValidationResult(True)  # calibrated: judged while it streamed
        lowest = lowest_group_confidence(generation.logprobs, window)
        if lowest is not None and lowest < fixed:
            return ValidationResult(
                False,
                f"The answer's confidence fell to {lowest:.3g}, below {fixed:g}.",
            )
        return ValidationResult(True)

    return check


def min_confidence(
    threshold: float | None = None,
    *,
    window: int = 16,
    warmup: int = 4,
    keep: float = 0.9,
    top_k: int = 5,
) -> Requirement:
    """The answer's group confidence never falls below ``threshold`` (see the module);
    without one, the threshold is calibrated per call from its first ``warmup`` whole
    generations (the ``1 - keep`` quantile of their lowest group confidences). Asks the
    backend for ``top_k`` top log-probabilities per token."""
    for name, value, least in (("window", window, 1), ("warmup", warmup, 1), ("top_k", top_k, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"min_confidence({name}=...) must be an int >= {least}, not {value!r}")
    if threshold is not None and (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not math.isfinite(threshold)
    ):
        raise ValueError(f"min_confidence(threshold=...) must be a number, not {threshold!r}")
    if isinstance(keep, bool) or not isinstance(keep, int | float) or not 0.0 < keep <= 1.0:
        raise ValueError(f"min_confidence(keep=...) must be in (0, 1], not {keep!r}")
    fixed = None if threshold is None else float(threshold)

    def reader(notes: dict[str, Any]) -> ConfidenceReader:
        return ConfidenceReader(notes, fixed, window, warmup, float(keep))

    if fixed is None:
        description = f"token confidence not below the call's calibrated threshold ({keep:g} kept)"
    else:
        description = f"token confidence at least {fixed:g}"
    return Requirement(
        description,
        confidence_check(fixed, window),
        reader=reader,
        asks={"logprobs": True, "top_logprobs": top_k},
    )
