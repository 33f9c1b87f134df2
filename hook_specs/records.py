"""The plain values that travel through hooks: one generation, one check, one attempt.

They are slotted dataclasses rather than pydantic models because the engine builds several
of them for every attempt, plugin or no plugin; the hook payloads that carry them are
pydantic models.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import model_serializer

Message = dict[str, Any]
"""One chat message: ``{"role": "user" | "assistant" | "system", "content": str}``."""


def _slot_setter(cls: type, name: str) -> Any:
    """How a frozen, slotted record's own ``__init__`` sets field ``name``: its slot's
    ``__set__`` (what ``object.__setattr__`` ends in, without looking the name up)."""
    return vars(cls)[name].__set__


@dataclass(frozen=True, slots=True, init=False)
class Usage:
    """Tokens spent by one backend call, or summed over many. Add two with ``+``.

    Unknown is never zero: ``input_tokens`` / ``output_tokens`` are ``None`` when the
    backend did not say (a reply without usage: see :data:`UNKNOWN_USAGE`), and
    ``cost_usd`` is ``None`` unless the model's price is known (``0.0`` for a model run in
    this process). A sum is ``None`` in a field as soon as one of its parts is. An empty
    ``Usage()`` (0 and 0 tokens, no cost) adds nothing, so ``sum(usages, Usage())`` is
    the total.
    """

    input_tokens: int | None = 0
    output_tokens: int | None = 0
    cost_usd: float | None = None

    def __init__(
        self,
        input_tokens: int | None = 0,
        output_tokens: int | None = 0,
        cost_usd: float | None = None,
    ) -> None:
        # As IterationInfo's: one is made per call, and per backend call that reports usage.
        _set_input_tokens(self, input_tokens)
        _set_output_tokens(self, output_tokens)
        _set_cost_usd(self, cost_usd)

    @property
    def total_tokens(self) -> int | None:
        """Input and output tokens together (``None`` when either is unknown)."""
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens

    @property
    def known(self) -> bool:
        """Whether both token counts are known."""
        return self.input_tokens is not None and self.output_tokens is not None

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        if _empty(self):
            return other  # the empty start of a sum
        if _empty(other):
            return self
        cost = None
        if self.cost_usd is not None and other.cost_usd is not None:
            cost = self.cost_usd + other.cost_usd
        return Usage(
            add_counts(self.input_tokens, other.input_tokens),
            add_counts(self.output_tokens, other.output_tokens),
            cost,
        )


def _empty(usage: Usage) -> bool:
    return usage.input_tokens == 0 and usage.output_tokens == 0 and usage.cost_usd is None


def add_counts(one: int | None, other: int | None) -> int | None:
    """``one + other``, or ``None`` (unknown) when either is."""
    if one is None or other is None:
        return None
    return one + other


_set_input_tokens = _slot_setter(Usage, "input_tokens")
_set_output_tokens = _slot_setter(Usage, "output_tokens")
_set_cost_usd = _slot_setter(Usage, "cost_usd")

ZERO_USAGE = Usage()
UNKNOWN_USAGE = Usage(None, None, None)
"""The usage of a reply that did not report it: tokens and cost unknown (never zero)."""
NOTHING_SPENT = Usage(0, 0, 0.0)
"""What an answer that made no backend call spent: no token, no dollar (known, not unknown)."""


def spending(usage: Usage, answered_by: str | None) -> Usage:
    """What an answer adds to the tokens and cost spent (usage, ceilings, totals), whole or
    streamed so far, cancelled or not: ``usage`` when the backend answered
    (``answered_by`` is ``None``); nothing when the response cache or another plugin
    answered instead: that is no backend call, and generated no new token."""
    return usage if answered_by is None else NOTHING_SPENT


STOPPED_EARLY = "stopped_early"
"""The ``finish_reason`` of a generation the engine stopped because the text so far already
failed a requirement's prefix check (early stop)."""


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token: its text, its log-probability, and the most likely tokens at
    its place with theirs (``top``: ``(token, logprob)`` pairs, most likely first; empty
    unless ``top_logprobs`` was asked for)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(slots=True)
class Generation:
    """What a backend returned for one request.

    ``cached`` is true for a :class:`CachedGeneration`: the response cache answered
    instead of the backend. ``answered_by`` names the plugin whose ``generation_call``
    implementation answered instead of the backend (``None``: the backend answered).
    ``logprobs`` holds the generated tokens' log-probabilities when the request asked for
    them (options ``logprobs: true``, ``top_logprobs: N``) and the backend gave them; else
    ``None``. ``spent`` is what it adds to a call's tokens and cost.
    """

    text: str
    usage: Usage = UNKNOWN_USAGE
    finish_reason: str | None = None
    model: str | None = None
    latency_s: float = 0.0
    raw: Any = field(default=None, repr=False)
    answered_by: str | None = None
    logprobs: tuple[TokenLogprob, ...] | None = field(default=None, repr=False)
    cached: ClassVar[bool] = False

    @property
    def spent(self) -> Usage:
        """What it adds to the tokens and cost spent (usage, ceilings, totals): its
        ``usage`` when the backend answered; nothing when the response cache or another
        plugin answered instead (``answered_by``): that is no backend call, and generated
        no new token (its own ``usage``, and a cached one's ``cached_usage``, stay on it,
        reported apart): :func:`spending`, written out here without a call since it runs
        for every attempt a plugin sees."""
        return self.usage if self.answered_by is None else NOTHING_SPENT


@dataclass(slots=True)
class CachedGeneration(Generation):
    """A generation the response cache answered: its text was generated earlier for the
    same request, and its ``usage`` holds no new tokens; ``cached_usage`` is what it took
    when it was generated, and ``entry`` the id of the cache's entry it came from (a class
    of its own, so that a generation that was not cached carries nothing more). One that
    early stop cut when it was generated keeps ``finish_reason="stopped_early"``."""

    cached_usage: Usage = ZERO_USAGE
    entry: str | None = None
    """Which entry of the cache answered (its key), when the cache says."""
    cached: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class Provenance:
    """How an attempt's text came to be (it travels with the attempt: payloads, records,
    trace, view).

    ``stopped_by`` names the requirements whose prefix check cut the generation short
    (empty: the text is whole, as the model ended it); then ``chars`` and ``tokens`` say how
    much was generated (tokens ``None`` when unknown). ``cached`` says the response cache
    answered (``cache_entry`` names the entry when the cache says which); ``answered_by``
    names the plugin that answered instead of the backend. A cut generation replayed from
    the cache is both cut and cached.
    """

    stopped_by: tuple[str, ...] = ()
    chars: int | None = None
    tokens: int | None = None
    cached: bool = False
    cache_entry: str | None = None
    answered_by: str | None = None

    @property
    def whole(self) -> bool:
        """Whether the text is all the model would have written (no check cut it)."""
        return not self.stopped_by

    @property
    def kind(self) -> str:
        """``"stopped_early"``, ``"cached"``, ``"plugin"`` or ``"whole"`` (the first that
        holds, in that order)."""
        if self.stopped_by:
            return "stopped_early"
        if self.cached:
            return "cached"
        return "plugin" if self.answered_by is not None else "whole"

    @model_serializer
    def as_json(self) -> dict[str, Any]:
        """As JSON data: ``kind`` and the facts that hold (what records, payload dumps and
        the trace write: pydantic serialises it so)."""
        data: dict[str, Any] = {"kind": self.kind}
        if self.stopped_by:
            data.update(stopped_by=list(self.stopped_by), chars=self.chars, tokens=self.tokens)
        if self.cached:
            data["cached"] = True
            if self.cache_entry is not None:
                data["cache_entry"] = self.cache_entry
        if self.answered_by is not None:
            data["answered_by"] = self.answered_by
        return data

    @classmethod
    def from_json(cls, data: Any, *, cut: bool = False, cached: bool = False) -> Provenance:
        """Read :meth:`as_json`'s data leniently (a field of the wrong type is left out);
        ``cut`` / ``cached``: what an older record said with its ``stopped_early`` and
        ``cached`` flags alone (the check that cut it is then not known: ``"?"``)."""
        if not isinstance(data, dict):
            data = {}
        names = data.get("stopped_by")
        stopped = tuple(str(n) for n in names) if isinstance(names, list) else ()
        if cut and not stopped:
            stopped = ("?",)
        entry = data.get("cache_entry")
        plugin = data.get("answered_by")
        return cls(
            stopped,
            _count(data.get("chars")),
            _count(data.get("tokens")),
            data.get("cached") is True or cached,
            entry if isinstance(entry, str) else None,
            plugin if isinstance(plugin, str) else None,
        )


WHOLE = Provenance()
"""The provenance of a text the backend generated whole (most attempts: shared, never copied)."""


def provenance_of(generation: Generation, stopped_by: tuple[str, ...] = ()) -> Provenance:
    """The provenance of an attempt whose generation is ``generation`` and whose prefix
    checks named ``stopped_by`` cut short (:data:`WHOLE` when nothing is to be said)."""
    cached = generation.cached
    plugin = generation.answered_by
    if not stopped_by and not cached and plugin is None:
        return WHOLE
    entry = generation.entry if isinstance(generation, CachedGeneration) else None
    return Provenance(
        stopped_by,
        len(generation.text) if stopped_by else None,
        generation.usage.output_tokens if stopped_by else None,
        cached,
        entry if isinstance(entry, str) else None,
        plugin,
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass(frozen=True, slots=True, init=False)
class IterationInfo:
    """Which attempt is running: what :func:`sampling_core.current_iteration` returns.

    ``iteration = subsample_index * loop_budget + attempt`` is unique within one call
    (1 .. loop_budget * concurrency_budget); it is *not* monotonic in event order when
    subsamples run concurrently.
    """

    sampling_id: str
    subsample_index: int
    attempt: int
    iteration: int

    def __init__(
        self, sampling_id: str, subsample_index: int, attempt: int, iteration: int
    ) -> None:
        # What the generated __init__ of a frozen dataclass does, through each field's slot
        # (no attribute lookup by name): one is made for every attempt.
        _set_sampling_id(self, sampling_id)
        _set_subsample_index(self, subsample_index)
        _set_attempt(self, attempt)
        _set_iteration(self, iteration)


_set_sampling_id = _slot_setter(IterationInfo, "sampling_id")
_set_subsample_index = _slot_setter(IterationInfo, "subsample_index")
_set_attempt = _slot_setter(IterationInfo, "attempt")
_set_iteration = _slot_setter(IterationInfo, "iteration")


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """The verdict of one requirement on one output.

    ``reason`` says why it failed (strategies feed it back to the model); ``score``, when
    given, ranks failed outputs (higher is better). ``requirement`` is filled in by the
    engine with the requirement's description. ``answer``, when the check compares an
    answer (the dataset-field checks do), is that answer as compared (extracted and
    normalised; ``""`` when nothing could be extracted): samples of a prompt with the same
    answer vote together in maj@k, and this verdict says whether their answer is right.
    """

    passed: bool
    reason: str | None = None
    score: float | None = None
    requirement: str | None = None
    answer: str | None = None

    def __post_init__(self) -> None:
        if self.passed is not True and self.passed is not False:  # "false" would be truthy
            raise TypeError(
                f"ValidationResult(passed=...) must be True or False, not {self.passed!r} "
                f"({type(self.passed).__name__})"
            )

    def of(self, requirement: str) -> ValidationResult:
        """This verdict as the verdict of ``requirement`` (a copy with ``requirement`` set;
        every other field kept)."""
        return ValidationResult(self.passed, self.reason, self.score, requirement, self.answer)


def count_passed(validations: tuple[ValidationResult, ...] | list[ValidationResult]) -> int:
    """How many of ``validations`` passed (the one place that count is made)."""
    passed = 0
    for verdict in validations:
        if verdict.passed:
            passed += 1
    return passed


def failure_reasons(
    validations: tuple[ValidationResult, ...] | list[ValidationResult],
) -> list[str]:
    """The reason of every failed check (its requirement's description when it gave none)."""
    reasons = []  # a loop, not a comprehension: one frame less, for every repair
    for v in validations:
        if not v.passed:
            reasons.append(v.reason or v.requirement or "a requirement was not met")
    return reasons


@dataclass(slots=True)
class Attempt:
    """One completed attempt: generated and validated."""

    subsample_index: int
    attempt: int
    iteration: int
    sequence: int
    text: str
    generation: Generation
    validations: tuple[ValidationResult, ...]
    passed: bool
    messages: list[Message] = field(repr=False, default_factory=list)
    provenance: Provenance = WHOLE
    """How its text came to be: whole, cut by a prefix check, cached, answered by a plugin."""
    scored: float | None = None
    """The strategy's scorer's score (``BestOfN(scorer=...)``, ``MajorityVote(weight=...)``),
    when it has one; then it is also :attr:`score`."""

    @property
    def stopped_early(self) -> bool:
        """Whether its generation was cut short because the text so far already failed a
        requirement (a prefix check; see ``Requirement(prefix=...)``): its generation's
        ``finish_reason`` is :data:`STOPPED_EARLY`."""
        return self.generation.finish_reason == STOPPED_EARLY

    @property
    def valid_count(self) -> int:
        """How many requirements passed."""
        return count_passed(self.validations)

    @property
    def total_count(self) -> int:
        """How many requirements were checked."""
        return len(self.validations)

    @property
    def latency_s(self) -> float:
        """The backend latency of this attempt's generation."""
        return self.generation.latency_s

    @property
    def cached(self) -> bool:
        """Whether the response cache answered this attempt (no new tokens were spent)."""
        return self.generation.cached

    @property
    def score(self) -> float:
        """A rank for picking among attempts: the strategy's scorer's score when it has one
        (:attr:`scored`), else the mean of the checks' scores.

        A check without a score counts 1.0 when it passed and 0.0 when it failed; with no
        requirement at all the score is 1.0.
        """
        if self.scored is not None:
            return self.scored
        if not self.validations:
            return 1.0
        total = 0.0
        for v in self.validations:
            total += v.score if v.score is not None else (1.0 if v.passed else 0.0)
        return total / len(self.validations)

    @property
    def failure_reasons(self) -> list[str]:
        """The reason of every failed check (its requirement's description when it gave none)."""
        return failure_reasons(self.validations)
