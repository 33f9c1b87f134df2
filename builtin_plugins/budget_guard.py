"""The ``budget_guard`` plugin: ceilings on budgets, generations and tokens.

* ``max_loop_budget`` / ``max_concurrency_budget`` cap the budgets of every call, after
  every other plugin wrote them (its ``sampling_loop_start`` runs last).
* ``max_generations_per_call`` / ``max_generations_total``: at most this many backend calls
  (transport retries included) per ``sample()`` call / in total. A backend call that would
  go over is not made: the guard raises ``StopSampling`` in ``generation_pre_call``. An
  answer the response cache or another plugin gave (``generation.answered_by``) is no
  backend call: it spends no token and no dollar, and it is not counted (it holds a place
  only while in flight, since whether it will be answered so is known only then).
* ``max_tokens_per_call`` (also written ``max_tokens``) / ``max_tokens_total``: input plus
  output tokens, as the backend reports them. Tokens are known only once spent, so the guard
  raises ``StopSampling`` in ``generation_post_call`` as soon as a total goes over its
  ceiling (cancelling what is in flight), and refuses any new backend call once a ceiling
  is reached. It listens to ``generation_chunk``, so backends that can stream do: a call's
  output tokens count as they arrive (a ceiling crossed mid-generation stops sampling
  there), and what attempts cancelled in flight spent is known; at a call's end the guard
  adds it (``sampling_loop_end``'s ``cancelled_usage``). Chunks a plugin streams instead of
  the backend (``answered_by``) are no backend call: they count nothing, and a call
  cancelled before the backend was asked (``generation_cancelled``'s ``backend_called``)
  gives its place back. A server other than llama.cpp says
  a stream's tokens only at its end: the input of an attempt stopped early or cancelled is
  then the input of its request, learned once for the call from an attempt that sent the
  same request and ran to its end (:mod:`builtin_plugins.budget_inputs`).
* ``max_usd_per_call`` / ``max_usd_total``: US dollars, as priced in ``usage.cost_usd``
  (see :mod:`sampling_core.pricing`), enforced like the token ceilings.

Unknown is never zero: a reply that did not report its tokens, or a model without a known
price, cannot be counted. The guard then fails closed: with a ceiling that can no longer be
checked (a token ceiling after unknown tokens, a dollar ceiling after an unknown cost) it
stops sampling and refuses every later backend call, saying why, rather than spend
without a limit (until :meth:`Totals.reset`).

Totals are shared by every guard of the process unless a guard is given its own
:class:`Totals`. The settings are the plugin's options (``plugins=[("budget_guard",
{"max_tokens": 5000})]``, ``--plugin budget_guard:max_tokens=5000``); a setting left out is
read from ``SAMPLEHOOKS_BUDGET_GUARD``, e.g. ``max_tokens_total=20000,max_usd_total=0.50``.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

from builtin_plugins.budget_inputs import CallPrice, RequestInputs, model_named
from builtin_plugins.budget_settings import (
    ENV_VAR,
    SETTINGS,
    alias,
    dollars,
    is_int,
    read_env,
    setting,
)
from hook_specs import (
    GenerationCallPayload,
    GenerationCancelledPayload,
    GenerationChunkPayload,
    GenerationErrorPayload,
    GenerationPostCallPayload,
    GenerationPreCallPayload,
    SamplingLoopEndPayload,
    SamplingLoopStartPayload,
    StopSampling,
    hookimpl,
)
from hook_specs.records import STOPPED_EARLY, Usage, spending

__all__ = ["ENV_VAR", "PROCESS_TOTALS", "BudgetGuard", "Totals"]


@dataclass(slots=True)
class Totals:
    """Generations and tokens counted so far; safe to share across threads.

    ``started`` counts backend calls begun (the generation ceiling is checked against
    it), ``generations`` those that returned or raised, ``tokens`` the tokens they
    reported, ``cost_usd`` what they cost. A call the response cache or another plugin
    answered is none of these (:attr:`~hook_specs.records.Generation.spent`).
    """

    started: int = 0
    generations: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    unknown_tokens: str | None = None
    """Why the tokens spent are no longer known (a reply did not report them), or ``None``."""
    unknown_cost: str | None = None
    """Why the dollars spent are no longer known (an unpriced call), or ``None``."""
    streaming: dict[int, int] = field(default_factory=dict, repr=False)
    """Output tokens of the streamed backend calls still running, by attempt (``iteration``)."""
    placed: dict[int, int] = field(default_factory=dict, repr=False)
    """Backend calls counted in ``started`` that have not ended yet, by attempt."""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def reset(self) -> None:
        """Start counting from zero again (and forget what was unknown)."""
        with self.lock:
            self.started = self.generations = self.tokens = 0
            self.cost_usd = 0.0
            self.unknown_tokens = self.unknown_cost = None
            self.streaming.clear()
            self.placed.clear()


PROCESS_TOTALS = Totals()
"""The totals every :class:`BudgetGuard` shares unless given its own."""


class BudgetGuard:
    """Caps budgets and stops sampling when a generation or token ceiling is crossed.

    Every ceiling is optional (``None``: no ceiling); left out, each is read from
    ``SAMPLEHOOKS_BUDGET_GUARD``. ``max_tokens`` is another name for ``max_tokens_per_call``
    (the tokens one ``sample()`` call may spend) and ``max_usd`` for ``max_usd_per_call``
    (the dollars one call may spend). ``totals`` holds the process-wide counts
    (default :data:`PROCESS_TOTALS`).
    """

    reads_environment = (ENV_VAR,)  # recorded and compared when a run is resumed

    def __init__(
        self,
        max_loop_budget: int | None = None,
        max_concurrency_budget: int | None = None,
        max_generations_per_call: int | None = None,
        max_tokens_per_call: int | None = None,
        max_generations_total: int | None = None,
        max_tokens_total: int | None = None,
        max_usd_per_call: float | None = None,
        max_usd_total: float | None = None,
        *,
        max_tokens: int | None = None,
        max_usd: float | None = None,
        totals: Totals | None = None,
        environ: dict[str, str] | None = None,
    ) -> None:
        env = read_env(os.environ if environ is None else environ)
        max_tokens_per_call = alias("max_tokens", max_tokens, max_tokens_per_call)
        max_usd_per_call = alias("max_usd", max_usd, max_usd_per_call)
        self.max_loop_budget = setting("max_loop_budget", max_loop_budget, env)
        self.max_concurrency_budget = setting("max_concurrency_budget", max_concurrency_budget, env)
        self.max_generations_per_call = setting(
            "max_generations_per_call", max_generations_per_call, env
        )
        self.max_tokens_per_call = setting("max_tokens_per_call", max_tokens_per_call, env)
        self.max_generations_total = setting("max_generations_total", max_generations_total, env)
        self.max_tokens_total = setting("max_tokens_total", max_tokens_total, env)
        self.max_usd_per_call = dollars("max_usd_per_call", max_usd_per_call, env)
        self.max_usd_total = dollars("max_usd_total", max_usd_total, env)
        self.totals = totals if totals is not None else PROCESS_TOTALS
        self._calls: dict[str, Totals] = {}
        self._inputs: dict[str, RequestInputs] = {}
        self._prices: dict[str, CallPrice] = {}

    @property
    def max_tokens(self) -> int | None:
        """The per-call token ceiling (``max_tokens_per_call``)."""
        return self.max_tokens_per_call

    @property
    def max_usd(self) -> float | None:
        """The per-call dollar ceiling (``max_usd_per_call``)."""
        return self.max_usd_per_call

    def __repr__(self) -> str:
        settings = ", ".join(
            f"{name}={getattr(self, name)}" for name in SETTINGS if getattr(self, name)
        )
        return f"BudgetGuard({settings})"

    def call_totals(self, sampling_id: str) -> Totals | None:
        """The counts of a call still running, or ``None``."""
        return self._calls.get(sampling_id)

    # -- hooks ----------------------------------------------------------------------------

    @hookimpl(trylast=True)
    def sampling_loop_start(self, payload: SamplingLoopStartPayload) -> None:
        """Cap the budgets others wrote; refuse the call if a process ceiling is reached."""
        for field_name, cap in (
            ("loop_budget", self.max_loop_budget),
            ("concurrency_budget", self.max_concurrency_budget),
        ):
            value = getattr(payload, field_name)
            if cap is not None and is_int(value) and value > cap:
                setattr(payload, field_name, cap)
        with self.totals.lock:
            self._check_total_before_call()
        self._calls[payload.sampling_id] = Totals()
        self._inputs[payload.sampling_id] = RequestInputs()
        self._prices[payload.sampling_id] = CallPrice()

    @hookimpl(trylast=True)
    def generation_pre_call(self, payload: GenerationPreCallPayload) -> None:
        """Refuse a backend call that would go over a ceiling; otherwise count it."""
        call = self._call(payload.sampling_id)
        total = self.totals
        with total.lock:
            self._check_total_before_call()
            if self.max_generations_per_call is not None and (
                call.started >= self.max_generations_per_call
            ):
                raise StopSampling(
                    "budget_guard: max_generations_per_call="
                    f"{self.max_generations_per_call} reached"
                )
            if self.max_tokens_per_call is not None and call.tokens >= self.max_tokens_per_call:
                raise StopSampling(
                    f"budget_guard: max_tokens_per_call={self.max_tokens_per_call} reached"
                )
            if self.max_usd_per_call is not None and call.cost_usd >= self.max_usd_per_call:
                raise StopSampling(
                    f"budget_guard: max_usd_per_call={self.max_usd_per_call} reached"
                )
            total.started += 1
            call.started += 1
            call.placed[payload.iteration] = call.placed.get(payload.iteration, 0) + 1
        if payload.purpose == "sample":
            self._requests(payload.sampling_id).sent(
                payload.iteration, payload.messages, payload.options
            )

    @hookimpl(tryfirst=True)
    def generation_call(self, payload: GenerationCallPayload) -> None:
        """Learn how the call's attempts are priced (the backend's model and URL); never
        answers for the backend."""
        if payload.purpose == "sample":
            self._price(payload.sampling_id).learn(payload.backend)

    @hookimpl
    def generation_chunk(self, payload: GenerationChunkPayload) -> None:
        """Count a streamed call's output as it arrives (one token a chunk; none for a
        plugin's chunks); stop when a token ceiling is crossed."""
        tokens = spending(Usage(None, payload.index + 1), payload.answered_by).output_tokens
        call = self._call(payload.sampling_id)
        total = self.totals
        with total.lock:
            call.streaming[payload.iteration] = tokens or 0
            streamed = sum(call.streaming.values())
            spent_call, spent_total = call.tokens + streamed, total.tokens + streamed
        for name, ceiling, spent, whose in (
            ("max_tokens_total", self.max_tokens_total, spent_total, "in total"),
            ("max_tokens_per_call", self.max_tokens_per_call, spent_call, "by this call"),
        ):
            if ceiling is not None and spent > ceiling:
                raise StopSampling(
                    f"budget_guard: {spent} tokens spent {whose} (counting those still "
                    f"streaming), over {name}={ceiling}"
                )

    @hookimpl
    def generation_post_call(self, payload: GenerationPostCallPayload) -> None:
        """Count the call and its tokens; stop when a token ceiling is crossed. An answer
        the cache or another plugin gave was no backend call: its place is given back."""
        call = self._call(payload.sampling_id)
        call.streaming.pop(payload.iteration, None)
        self._ended(call, payload.iteration)
        generation = payload.generation
        if generation.answered_by is not None:
            if payload.purpose == "sample":  # a cached one still says its request's input
                self._requests(payload.sampling_id).returned(payload.iteration, generation)
            self._given_back(call)
            return
        usage = generation.usage
        tokens, cost, unpriced = usage.total_tokens, usage.cost_usd, None
        if payload.purpose == "sample":
            tokens = self._requests(payload.sampling_id).returned(payload.iteration, generation)
            output = usage.output_tokens
            if (
                cost is None
                and generation.finish_reason == STOPPED_EARLY
                and tokens is not None
                and output is not None
            ):  # its output (and its input, if the call learned it already) priced now
                known = Usage(tokens - output, output)
                cost, unpriced = self._price(payload.sampling_id).cost(known, generation.model)
        self._spent(payload.sampling_id, tokens, cost, generation, unpriced)

    @hookimpl
    def generation_error(self, payload: GenerationErrorPayload) -> None:
        """Count a failed backend call (it returned no reply, so it spent no tokens)."""
        call = self._call(payload.sampling_id)
        call.streaming.pop(payload.iteration, None)
        self._ended(call, payload.iteration)
        if payload.purpose == "sample":
            self._requests(payload.sampling_id).failed(payload.iteration)
        self._spent(payload.sampling_id, 0, 0.0)

    @hookimpl
    def generation_cancelled(self, payload: GenerationCancelledPayload) -> None:
        """A call cancelled before the backend was asked (a plugin answering for it, or
        still working out whether it would; refused in ``generation_pre_call`` after the
        guard counted it) was no backend call: its place is given back. A backend call
        cancelled in flight keeps it; its tokens come at the call's end."""
        call = self._call(payload.sampling_id)
        held = self._ended(call, payload.iteration)
        if payload.backend_called:
            return
        call.streaming.pop(payload.iteration, None)
        if payload.purpose == "sample":
            self._requests(payload.sampling_id).failed(payload.iteration)  # not in flight
        if held:
            self._given_back(call)

    @hookimpl
    def sampling_loop_end(self, payload: SamplingLoopEndPayload) -> None:
        """Count what the call's attempts cancelled in flight spent (no
        ``generation_post_call`` saw it), then forget the call's counts."""
        self._calls.pop(payload.sampling_id, None)
        requests = self._inputs.pop(payload.sampling_id, None) or RequestInputs()
        price = self._prices.pop(payload.sampling_id, None) or CallPrice()
        spent, unknown = requests.at_end(payload.cancelled_usage)
        cost, unpriced = price.cost(spent)
        if unknown is not None and not price.free:
            cost, unpriced = None, f"{unknown}, so its cost is unknown"
        total = self.totals
        with total.lock:
            total.tokens += spent.total_tokens or 0
            total.cost_usd += cost or 0.0
            if unknown is not None and total.unknown_tokens is None:
                total.unknown_tokens = unknown
            if cost is None and total.unknown_cost is None:
                total.unknown_cost = unpriced

    # -- counting -----------------------------------------------------------------------

    def _requests(self, sampling_id: str) -> RequestInputs:
        requests = self._inputs.get(sampling_id)
        if requests is None:
            requests = self._inputs[sampling_id] = RequestInputs()
        return requests

    def _price(self, sampling_id: str) -> CallPrice:
        price = self._prices.get(sampling_id)
        if price is None:
            price = self._prices[sampling_id] = CallPrice()
        return price

    @staticmethod
    def _ended(call: Totals, iteration: int) -> bool:
        """A backend call of attempt ``iteration`` ended: whether the guard had counted it."""
        held = call.placed.pop(iteration, 0)
        if held > 1:
            call.placed[iteration] = held - 1
        return held > 0

    def _given_back(self, call: Totals) -> None:
        """A call's place, taken in ``generation_pre_call``, was no backend call after all."""
        total = self.totals
        with total.lock:
            total.started -= 1
            call.started -= 1

    def _call(self, sampling_id: str) -> Totals:
        call = self._calls.get(sampling_id)
        if call is None:
            call = self._calls[sampling_id] = Totals()
        return call

    def _check_total_before_call(self) -> None:
        """Raise ``StopSampling`` if a process ceiling is reached (hold ``totals.lock``)."""
        total = self.totals
        if self.max_generations_total is not None and (total.started >= self.max_generations_total):
            raise StopSampling(
                f"budget_guard: max_generations_total={self.max_generations_total} reached"
            )
        if self.max_tokens_total is not None and total.tokens >= self.max_tokens_total:
            raise StopSampling(f"budget_guard: max_tokens_total={self.max_tokens_total} reached")
        if self.max_usd_total is not None and total.cost_usd >= self.max_usd_total:
            raise StopSampling(f"budget_guard: max_usd_total={self.max_usd_total} reached")
        self._check_known()

    def _check_known(self) -> None:
        """Raise ``StopSampling`` if a ceiling can no longer be checked (hold the lock)."""
        total = self.totals
        for reason, ceilings in (
            (total.unknown_tokens, ("max_tokens_per_call", "max_tokens_total")),
            (total.unknown_cost, ("max_usd_per_call", "max_usd_total")),
        ):
            if reason is None:
                continue
            for name in ceilings:
                ceiling = getattr(self, name)
                if ceiling is not None:
                    raise StopSampling(
                        f"budget_guard: {reason}, so {name}={ceiling} cannot be checked; "
                        "no more calls are made (unknown is not zero: use a backend that "
                        "reports usage and a model with a known price, or a generation "
                        "ceiling)"
                    )

    def _spent(
        self,
        sampling_id: str,
        tokens: int | None,
        cost: float | None,
        generation: Any = None,
        unpriced: str | None = None,
    ) -> None:
        call = self._call(sampling_id)
        total = self.totals
        of_model = model_named(generation)
        with total.lock:
            total.generations += 1
            total.tokens += tokens or 0
            call.generations += 1
            call.tokens += tokens or 0
            total.cost_usd += cost or 0.0
            call.cost_usd += cost or 0.0
            if tokens is None and total.unknown_tokens is None:
                total.unknown_tokens = f"a reply{of_model} did not report its tokens"
            if cost is None and total.unknown_cost is None:
                total.unknown_cost = (
                    f"a reply{of_model} did not report its tokens, so its cost is unknown"
                    if tokens is None
                    else unpriced
                    or f"the price of {of_model[4:] or 'the model (not named)'} is unknown"
                )
            process_tokens, call_tokens = total.tokens, call.tokens
            process_usd, call_usd = total.cost_usd, call.cost_usd
            self._check_known()
        ceilings = (
            ("max_usd_total", self.max_usd_total, process_usd, "${:.6f} spent in total"),
            ("max_usd_per_call", self.max_usd_per_call, call_usd, "${:.6f} spent by this call"),
            ("max_tokens_total", self.max_tokens_total, process_tokens, "{} tokens spent in total"),
            (
                "max_tokens_per_call",
                self.max_tokens_per_call,
                call_tokens,
                "{} tokens spent by this call",
            ),
        )
        for name, ceiling, spent, shown in ceilings:
            if ceiling is not None and spent > ceiling:
                raise StopSampling(f"budget_guard: {shown.format(spent)}, over {name}={ceiling}")
