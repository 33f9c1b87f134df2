"""The sampling loop: subsamples, attempts, early exit, cancellation and selection.

One :class:`SamplingCall` runs one ``sample()`` call. It runs ``concurrency_budget``
subsamples, each in a task the call owns (see :mod:`sampling_core.engine.subsample_tasks`; a lone
subsample runs in the caller's task); each makes up to ``loop_budget`` attempts. One
attempt reads forward through :meth:`SamplingCall._attempt`:

    generation_pre_call -> backend -> generation_post_call -> checks -> sampling_validate -> record
            -> sampling_iteration -> (stop | repair: sampling_repair -> next attempt)

The backend call itself, from ``generation_pre_call`` to ``generation_post_call`` (retries,
``generation_call``, a cancelled call), is :mod:`sampling_core.engine.generation_step`.
When someone needs the pieces of a generation and the backend can stream, the backend call
is a stream read by :mod:`sampling_core.engine.streaming` (``generation_chunk`` per piece,
prefix checks, early stop). Subsamples after the first wait for their turn when the launch
policy says so (:mod:`sampling_core.engine.launch`).

Every hook is one call of the call's hook channel
(:class:`~sampling_core.hooks.call_hooks.CallHooks`), which builds the payload, calls the plugins
and applies the fault policy; it answers at once when no implementation must be awaited,
else with an awaitable the loop awaits. What the call has produced so far (attempts, errors, tokens,
the winner) is a :class:`~sampling_core.engine.tally.Tally`. An attempt is *completed* once
validated; its ``sampling_iteration`` event is then delivered even if a sibling's success
cancels the group meanwhile. Nothing started here outlives :meth:`SamplingCall.run`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable
from functools import partial
from operator import attrgetter
from typing import Any

import anyio
import structlog

from hook_specs.errors import StopSampling
from hook_specs.names import HookName as H
from hook_specs.records import (
    STOPPED_EARLY,
    WHOLE,
    Attempt,
    Generation,
    IterationInfo,
    Message,
    provenance_of,
)
from sampling_core.backends.base import (
    can_stream,
)
from sampling_core.engine.context import (
    Entered,
    enter_next_attempt,
    enter_subsample,
    leave_subsample,
)
from sampling_core.engine.generation_step import NO_CHECKS, BackendFailed, GenerationStep
from sampling_core.engine.launch import Launcher
from sampling_core.engine.loop_end import loop_end_fields
from sampling_core.engine.results import SamplingResult
from sampling_core.engine.settings import CallSettings
from sampling_core.engine.streaming import (
    call_notes,
    judge_whole,
    prefixes_in_force,
    readers_of,
    stopped_names,
    unmet_early,
)
from sampling_core.engine.subsample_tasks import one_of, subsample_tasks
from sampling_core.engine.suspension import note_yield, overdue, thread_clock
from sampling_core.engine.tally import Tally
from sampling_core.errors import CheckCallFailed
from sampling_core.hooks.call_hooks import CallHooks
from sampling_core.requirements.checks import validate_all
from sampling_core.requirements.context import CheckContext
from sampling_core.requirements.scorers import score_of

logger = structlog.get_logger("samplehooks")

_description = attrgetter("description")


def _is_result(outcome: object) -> bool:
    return isinstance(outcome, SamplingResult)


class SamplingCall(GenerationStep):
    """One ``sample()`` call while it runs: its settings, hook channel and tally (which holds
    the subsample tasks, ``None`` while none runs)."""

    __slots__ = (
        "after_notes",
        "answered",
        "clock",
        "hooks",
        "json_schema",
        "judged_after",
        "launcher",
        "prefix_checks",
        "prefix_notes",
        "prefixes",
        "s",
        "scorer",
        "streams",
        "tally",
        "wants_context",
    )

    def __init__(self, settings: CallSettings, hooks: CallHooks) -> None:
        self.s = settings
        self.hooks = hooks
        self.clock = thread_clock()  # the call runs in this thread: its event loop's
        self.tally = Tally(
            settings.sampling_id, settings.strategy, settings.selection, settings.early_exit
        )
        # Decided once (every attribute is set here: the attempt path reads them all, and an
        # attribute found on the instance is read faster than a default on the class).
        # A CheckContext is built only when a check asks for one; the backend streams when
        # someone needs the pieces (prefix checks, generation_chunk), and it can.
        self.wants_context = False
        for requirement in settings.requirements:  # a loop, not any(): no generator per call
            if requirement.wants_context:
                self.wants_context = True
                break
        prefixes = prefixes_in_force(settings.requirements, settings.tokens.early_stop)
        self.prefixes = prefixes
        # what the checks' readers keep per call; the readers that judge what no reader read
        self.prefix_notes, judged_after, self.after_notes = call_notes(
            settings.requirements, prefixes
        )
        self.scorer = settings.strategy.scorer  # scores every attempt (BestOfN, a weighted vote)
        if self.scorer is not None:
            self.wants_context = True
        # for generation_call's payload: the same set for each backend call of the call
        self.prefix_checks = frozenset(r for _, r in prefixes) if prefixes else NO_CHECKS
        self.json_schema: dict[str, Any] | None = settings.tokens.json_schema
        self.launcher: Launcher | None = None  # a launch policy other than "all"
        self.streams = bool(
            (prefixes or hooks.firing.generation_chunk) and can_stream(settings.backend)
        )
        # iteration -> the backend's answer while generation_call wrappers are still at work
        self.answered: dict[int, Generation] = {}
        # every generation of a streamed call with prefix checks is read as it arrives
        self.judged_after = () if self.streams and prefixes else judged_after
        if self.streams:
            self.tally.watch_streams()

    # -- the call -----------------------------------------------------------------------

    async def run(self) -> SamplingResult:
        """Run the call to its end and return the result (or raise, after loop end)."""
        try:
            if self.hooks.firing.sampling_loop_start:
                await self._start()
            if self.hooks.firing.sampling_call:  # plugins around the work and the pick
                result = await self.hooks.around_sampling(
                    self._call_fields(), self._around_work, _is_result
                )
            else:  # the work itself (as _work, without a coroutine of its own)
                if not self.tally.stopped:
                    await self._run_subsamples()
                if self.tally.fatal is not None:
                    raise self.tally.fatal
                s = self.s  # the pick (as _result, written out: one call less per call)
                result = self.tally.result(
                    s.loop_budget, s.concurrency_budget, s.format, self.hooks.faults, s.backend
                )
        except BaseException as exc:
            if self.hooks.firing.sampling_loop_end:
                with anyio.CancelScope(shield=True):
                    await self.hooks.fire(
                        H.SAMPLING_LOOP_END, loop_end_fields(self.tally, self.s, None, exc)
                    )
            raise
        if self.hooks.firing.sampling_loop_end:
            await self.hooks.fire(
                H.SAMPLING_LOOP_END, loop_end_fields(self.tally, self.s, result, None)
            )
        return result

    async def _around_work(self, answer: object, answered_by: str | None) -> SamplingResult:
        return await self._work()  # a plain sampling_call implementation answers nothing

    def _call_fields(self) -> dict[str, Any]:
        """``sampling_call``'s fields: the call's own messages and options, not copies (its
        payload is read-only all the way down, and the engine changes neither)."""
        s = self.s
        return {
            "messages": s.messages,
            "requirements": list(map(_description, s.requirements)),
            "loop_budget": s.loop_budget,
            "concurrency_budget": s.concurrency_budget,
            "selection": s.selection,
            "seed": s.seed,
            "options": s.options,
        }

    async def _start(self) -> None:
        s = self.s
        try:
            payload = await self.hooks.fire(
                H.SAMPLING_LOOP_START,
                {
                    "loop_budget": s.loop_budget,
                    "concurrency_budget": s.concurrency_budget,
                    "messages": list(map(dict, s.messages)),
                    "requirements": list(map(_description, s.requirements)),
                    "selection": s.selection,
                    "seed": s.seed,
                    "options": dict(s.options),
                    "provider_name": getattr(s.backend, "provider_name", None),
                },
            )
            loop_budget, concurrency_budget = payload.loop_budget, payload.concurrency_budget
            if loop_budget is not s.loop_budget or concurrency_budget is not s.concurrency_budget:
                # A plugin wrote a budget (the caller's were checked by the sampler).
                s.loop_budget, s.concurrency_budget = s.caps.check(
                    loop_budget, concurrency_budget, payload.written_by
                )
        except StopSampling as stop:
            self.tally.stop(stop)

    def _result(self) -> SamplingResult:
        """The tally's result under the call's settings (the pick, once the work is done)."""
        s = self.s
        return self.tally.result(
            s.loop_budget, s.concurrency_budget, s.format, self.hooks.faults, s.backend
        )

    async def _work(self) -> SamplingResult:
        """The call's subsamples, then its pick: what ``sampling_call`` wraps."""
        if not self.tally.stopped:
            await self._run_subsamples()
        if self.tally.fatal is not None:
            raise self.tally.fatal
        return self._result()

    def _run_subsamples(self) -> Awaitable[None]:
        """The subsamples: a lone one in the caller's task (its own coroutine, awaited by
        :meth:`_work`, no other), several in tasks the call owns."""
        count = self.s.concurrency_budget
        if count == 1:
            # One subsample has no sibling to cancel or to be cancelled by: it runs in the
            # caller's task (and restores the caller's context variables when it ends).
            self.tally.open_subsamples(1, None)
            return self._subsample(0)
        return self._in_tasks(count)

    async def _in_tasks(self, count: int) -> None:
        subsample = self._subsample
        tokens = self.s.tokens
        if tokens.launch != "all":
            self.launcher = Launcher(tokens.launch, tokens.stagger_s, count)  # type: ignore[arg-type]
            subsample = self._launched
        tasks = subsample_tasks(count)
        self.tally.open_subsamples(count, tasks)
        try:
            await tasks.run(subsample, count)
        except BaseExceptionGroup as group_error:
            # Subsamples catch every Exception; what is left (KeyboardInterrupt, ...) is
            # re-raised as itself rather than wrapped in a group.
            raise one_of(group_error) from None

    # -- one subsample ------------------------------------------------------------------

    async def _launched(self, index: int) -> None:
        """A subsample that waits for its turn (the launch policy) before it starts."""
        launcher = self.launcher
        assert launcher is not None
        try:
            await launcher.turn(index)
            await self._subsample(index)
        finally:  # however it ends (refused its start, cancelled waiting): its turn goes on
            launcher.attempt_ended()

    async def _subsample(self, index: int) -> None:
        s, tally, firing, launcher = self.s, self.tally, self.hooks.firing, self.launcher
        clock = self.clock
        failures: deque[Attempt] = deque(maxlen=s.strategy.keep_failures)
        messages = s.messages
        # In a task of its own, the subsample's context is dropped when it ends; run inline,
        # it restores the caller's values when it ends.
        inline = tally.tasks is None
        entered: Entered | None = None  # what the first attempt's bindings replaced
        try:
            for number in range(1, s.loop_budget + 1):
                if not tally.may_start(index, number):
                    return
                info = IterationInfo(s.sampling_id, index, number, index * s.loop_budget + number)
                if entered is None:  # the subsample's bindings and the first attempt's, at once
                    entered, running = enter_subsample(info)
                    if not inline:  # a task's context ends with it: nothing to restore
                        entered = ()
                else:
                    enter_next_attempt(running, info)
                attempt = await self._attempt(info, messages)
                ends = attempt is None or attempt.passed or number == s.loop_budget
                if launcher is not None and not ends and not tally.over:
                    launcher.attempt_ended()  # failed, and goes on (its end hands on too)
                if overdue(clock):  # a schedule point: see sampling_core.engine.suspension
                    # Noted before yielding: a sibling that runs meanwhile runs after it.
                    note_yield(clock, time.perf_counter())
                    await anyio.lowlevel.checkpoint()
                if ends or tally.over:
                    return
                failures.append(attempt)
                messages = s.strategy.repair(s.messages, failures)
                if firing.sampling_repair:
                    repaired = self.hooks.repair(info, attempt, messages)
                    messages = repaired if isinstance(repaired, list) else await repaired
        except StopSampling as stop:
            self.tally.stop(stop)
        except Exception as exc:  # a plugin failing closed, or a bug in a strategy
            self.tally.fail(exc)
        finally:
            if tally.votes_early:  # a vote with a consensus may be settled now
                tally.subsample_ended(index)
            if entered:  # run inline: the caller's values come back
                leave_subsample(entered)

    # -- one attempt --------------------------------------------------------------------

    async def _attempt(self, info: IterationInfo, messages: list[Message]) -> Attempt | None:
        """Generate, check, record and announce one attempt; ``None`` if its backend failed."""
        tally = self.tally
        try:
            generation, sent, stopped = await self._generate(info, messages)
        except BackendFailed:
            tally.dropped()
            return None
        context = None
        if self.wants_context:  # what the model was asked, as plugins left it
            context = CheckContext(
                sent.messages,
                self.s.row,
                info,
                sent.options,
                partial(self._judge_call, info),
                generation,
            )
        try:
            validations = validate_all(
                self.s.requirements, generation.text, context, self.s.check_timeout
            )
            if not isinstance(validations, tuple):
                validations = await validations  # an async check
        except CheckCallFailed:  # a judge's backend failed for good (kept in errors)
            tally.dropped()
            return None
        provenance = WHOLE
        if stopped:  # a prefix check failed it: that requirement is unmet
            requirements = self.s.requirements
            validations = unmet_early(validations, stopped, requirements)
        if stopped and generation.finish_reason == STOPPED_EARLY:  # and cut it short
            provenance = provenance_of(generation, stopped_names(stopped, self.s.requirements))
        elif generation.answered_by is not None or type(generation) is not Generation:
            # answered by a plugin, or the cache (whole: one the readers failed is not cut)
            provenance = provenance_of(generation)
        if self.judged_after:  # no reader read it as it arrived: they read it whole now
            failed = judge_whole(readers_of(self.judged_after, self.after_notes), generation)
            if failed:  # whole, and below what the reader holds it to: unmet, not cut
                validations = unmet_early(validations, failed, self.s.requirements)
        if self.hooks.firing.sampling_validate:  # plugins may change the verdicts
            judged = self.hooks.validate(info, sent.messages, generation, validations)
            validations = judged if isinstance(judged, tuple) else await judged
        scored = None
        if self.scorer is not None:
            assert context is not None
            scored = await score_of(self.scorer, generation.text, context)
        attempt = tally.record(info, messages, generation, validations, provenance, scored)
        if self.hooks.firing.sampling_iteration:
            pending = self.hooks.iteration(info, attempt, self._shield)
            if pending is not None:
                await pending
        return attempt
