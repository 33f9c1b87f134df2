"""The sampling loop: subsamples, attempts, early exit, cancellation and selection.

One :class:`SamplingCall` runs one ``sample()`` call. It runs ``concurrency_budget``
subsamples, each in a task the call owns (see :mod:`sampling_core.subsample_tasks`; a lone
subsample runs in the caller's task); each makes up to ``loop_budget`` attempts:

    request -> generation_pre_call -> backend -> generation_post_call -> checks
            -> sampling_iteration -> (stop | repair -> sampling_repair -> next attempt)

An attempt is *completed* once validated. From then on it is shielded: it gets its
``sequence`` number, is judged, and its ``sampling_iteration`` event is delivered (one event
at a time, in ``sequence`` order) even if a sibling's success cancels the group meanwhile.
Nothing started here outlives :meth:`SamplingCall.run`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Coroutine, Mapping, Sequence
from contextlib import AbstractContextManager
from contextvars import Context, ContextVar
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import anyio
import structlog

from hook_specs.errors import StopSampling
from hook_specs.names import HookName
from hook_specs.payloads import (
    GenerationErrorPayload,
    GenerationPostCallPayload,
    GenerationPreCallPayload,
    SamplingIterationPayload,
    SamplingLoopEndPayload,
    SamplingLoopStartPayload,
    SamplingRepairPayload,
    StopReason,
)
from hook_specs.records import Attempt, Generation, IterationInfo, Message, Usage, ValidationResult
from sampling_core.backends.base import (
    Backend,
    GenerationRequest,
    as_generation,
    generate_within,
)
from sampling_core.budgets import check_budget
from sampling_core.check_context import CheckContext
from sampling_core.context import _current
from sampling_core.dispatch import HookDispatcher, PluginFault
from sampling_core.errors import PluginError
from sampling_core.requirements import Requirement, parse_model, validate_all
from sampling_core.results import AttemptError, SamplingResult
from sampling_core.seeds import derive_seed
from sampling_core.strategies import Strategy
from sampling_core.subsample_tasks import SubsampleTasks, subsample_tasks
from sampling_core.transport import RetryPolicy, is_transient

logger = structlog.get_logger("samplehooks")
_bind = structlog.contextvars.bind_contextvars


def _structlog_var(key: str) -> ContextVar[Any]:
    """The context variable structlog keeps ``key`` in (bound in a throwaway context)."""
    return Context().run(_bind, **{key: None})[key].var


# Set directly: cheaper than bind_contextvars, and the very variables it would set.
_SAMPLING_ID_VAR = _structlog_var("sampling_id")
_SUBSAMPLE_VAR = _structlog_var("subsample_index")
_ATTEMPT_VAR = _structlog_var("attempt")
_ITERATION_VAR = _structlog_var("iteration")

H = HookName
# Members looked up once: reading an enum member off its class is slow on a hot path.
_LOOP_START, _LOOP_END = H.SAMPLING_LOOP_START, H.SAMPLING_LOOP_END
_ITERATION, _REPAIR = H.SAMPLING_ITERATION, H.SAMPLING_REPAIR
_PRE_CALL, _POST_CALL, _ERROR = H.GENERATION_PRE_CALL, H.GENERATION_POST_CALL, H.GENERATION_ERROR

_description = attrgetter("description")
_NO_HOOK_FIELDS: dict[str, Any] = {}  # an attempt's fields when no payload will be built

# Each payload class's builder, made once (see HookPayload.builder).
_new_loop_start = SamplingLoopStartPayload.builder()
_new_iteration = SamplingIterationPayload.builder()
_new_repair = SamplingRepairPayload.builder()
_new_loop_end = SamplingLoopEndPayload.builder()
_new_pre_call = GenerationPreCallPayload.builder()
_new_post_call = GenerationPostCallPayload.builder()
_new_error = GenerationErrorPayload.builder()


@dataclass(slots=True)
class CallSettings:
    """Everything one call needs, already validated by the ``Sampler``."""

    sampling_id: str
    backend: Backend
    messages: list[Message]
    requirements: tuple[Requirement, ...]
    strategy: Strategy
    loop_budget: int
    concurrency_budget: int
    selection: str
    seed: int | None
    options: dict[str, Any]
    format: Any
    dispatcher: HookDispatcher
    retry: RetryPolicy
    attempt_timeout: float | None
    max_loop_budget: int
    max_concurrency_budget: int
    row: Mapping[str, Any] | None = None  # the dataset line checks see (CheckContext.row)


class _BackendFailed(Exception):
    """Internal: the attempt's backend call raised for good (already reported)."""


class SamplingCall:
    """The state of one ``sample()`` call while it runs."""

    def __init__(self, settings: CallSettings) -> None:
        self.s = settings
        self.hooks = settings.dispatcher
        self.faults: list[PluginFault] = []
        self.attempts: list[Attempt] = []
        self.errors: list[AttemptError] = []
        self._input_tokens = 0  # summed per attempt; `usage` makes the Usage
        self._output_tokens = 0
        self.sequence = 0
        self.in_flight = 0
        self.winner: Attempt | None = None
        self.best_key: tuple[int, int] | None = None  # selection="ordered": (attempt, subsample)
        self.stopped = False
        self.fatal: BaseException | None = None
        self.started = 0.0
        self._tasks: SubsampleTasks | None = None  # None while no subsample task runs
        self._current_attempt: list[int] = []
        self._delivery: anyio.Lock | None = None  # made when sampling_iteration is implemented
        # Each hook's caller, looked up once (the dispatcher never changes); None for a hook
        # nobody implements, whose payload is then never built.
        caller = self.hooks.caller
        self._call_error = caller(_ERROR)
        self._call_pre_call = caller(_PRE_CALL)
        self._call_post_call = caller(_POST_CALL)
        self._call_iteration = caller(_ITERATION)
        self._call_repair = caller(_REPAIR)
        self._per_attempt_hooks = bool(
            self._call_error
            or self._call_pre_call
            or self._call_post_call
            or self._call_iteration
            or self._call_repair
        )
        self._strategy_name = settings.strategy.name

    @property
    def usage(self) -> Usage:
        """Tokens spent so far, cancelled attempts included where the backend reported them."""
        return Usage(self._input_tokens, self._output_tokens)

    # -- the call -----------------------------------------------------------------------

    async def run(self) -> SamplingResult:
        """Run the call to its end and return the result (or raise, after loop end)."""
        self.started = time.perf_counter()
        try:
            await self._start()
            if not self.stopped:
                await self._run_subsamples()
            if self.fatal is not None:
                raise self.fatal
            result = self._result()
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await self._end(None, exc)
            raise
        await self._end(result, None)
        return result

    async def _start(self) -> None:
        call = self.hooks.caller(_LOOP_START)
        if call is None:
            return
        s = self.s
        payload = _new_loop_start(
            {
                "sampling_id": s.sampling_id,
                "strategy_name": self._strategy_name,
                "loop_budget": s.loop_budget,
                "concurrency_budget": s.concurrency_budget,
                "messages": list(map(dict, s.messages)),
                "requirements": list(map(_description, s.requirements)),
                "selection": s.selection,
                "seed": s.seed,
                "options": dict(s.options),
            }
        )
        try:
            pending = call(payload, self.faults)
            if pending is not None:
                await pending
        except StopSampling as stop:
            self._stop(stop)
            return
        loop_budget, concurrency_budget = payload.loop_budget, payload.concurrency_budget
        if loop_budget is s.loop_budget and concurrency_budget is s.concurrency_budget:
            return  # unchanged: checked when the call began
        for field, cap in (
            ("loop_budget", s.max_loop_budget),
            ("concurrency_budget", s.max_concurrency_budget),
        ):
            writer = payload.written_by(field)
            source = f"plugin {writer!r}" if writer else "the caller"
            check_budget(field, getattr(payload, field), cap, source)
        s.loop_budget, s.concurrency_budget = loop_budget, concurrency_budget

    async def _run_subsamples(self) -> None:
        count = self.s.concurrency_budget
        self._current_attempt = [0] * count
        if count == 1:
            # One subsample has no sibling to cancel or to be cancelled by: it runs in the
            # caller's task (and restores the caller's context variables when it ends).
            await self._subsample(0)
            return
        self._tasks = subsample_tasks(count)
        try:
            await self._tasks.run(self._subsample, count)
        except BaseExceptionGroup as group_error:
            # Subsamples catch every Exception; what is left (KeyboardInterrupt, SystemExit,
            # ...) is re-raised as itself rather than wrapped in a group, also when several
            # subsamples raised one at once.
            raise _one_of(group_error) from None

    def _stop(self, stop: StopSampling) -> None:
        self.stopped = True
        logger.info(
            "sampling.stopped_by_plugin", sampling_id=self.s.sampling_id, reason=stop.reason
        )
        if self._tasks is not None:
            self._tasks.cancel_all()

    def _fail(self, exc: BaseException) -> None:
        if self.fatal is None:
            self.fatal = exc
        if self._tasks is not None:
            self._tasks.cancel_all()

    # -- one subsample ------------------------------------------------------------------

    async def _subsample(self, index: int) -> None:
        s = self.s
        strategy, loop_budget = s.strategy, s.loop_budget
        failures: deque[Attempt] | None = None
        messages = s.messages
        # In a task of its own, the subsample's context is dropped when it ends; run inline,
        # it restores the caller's values from the first tokens of each variable.
        restore = self._tasks is None
        tokens = (_SAMPLING_ID_VAR.set(s.sampling_id), _SUBSAMPLE_VAR.set(index))
        current = None
        try:
            for number in range(1, loop_budget + 1):
                if self.best_key is not None and (number, index) > self.best_key:
                    return  # selection="ordered": this subsample can no longer win
                self._current_attempt[index] = number
                info = IterationInfo(s.sampling_id, index, number, index * loop_budget + number)
                if current is None:
                    current = (
                        _current.set(info),
                        _ATTEMPT_VAR.set(number),
                        _ITERATION_VAR.set(info.iteration),
                    )
                else:
                    _current.set(info)
                    _ATTEMPT_VAR.set(number)
                    _ITERATION_VAR.set(info.iteration)
                # The fields every payload of this attempt starts with, copied by each.
                where = _NO_HOOK_FIELDS
                if self._per_attempt_hooks:
                    where = {
                        "sampling_id": s.sampling_id,
                        "strategy_name": self._strategy_name,
                        "subsample_index": index,
                        "attempt": number,
                        "iteration": info.iteration,
                        "sequence": None,  # set once the attempt has completed
                    }
                attempt = await self._attempt(info, messages, where)
                if attempt is None or attempt.passed or self.stopped or self.fatal:
                    return
                if number == loop_budget:
                    return
                if failures is None:
                    failures = deque(maxlen=strategy.keep_failures)
                failures.append(attempt)
                messages = strategy.repair(s.messages, failures)
                messages = self._repair(attempt, messages, where)
                if not isinstance(messages, list):
                    messages = await messages  # an async sampling_repair implementation
        except StopSampling as stop:
            self._stop(stop)
        except Exception as exc:  # a plugin failing closed, or a bug in a strategy
            self._fail(exc)
        finally:
            if restore:
                if current is not None:
                    _current.reset(current[0])
                    _ATTEMPT_VAR.reset(current[1])
                    _ITERATION_VAR.reset(current[2])
                _SAMPLING_ID_VAR.reset(tokens[0])
                _SUBSAMPLE_VAR.reset(tokens[1])

    async def _attempt(
        self, info: IterationInfo, messages: list[Message], where: dict[str, Any]
    ) -> Attempt | None:
        """Generate and validate one attempt; ``None`` when its backend call failed."""
        self.in_flight += 1
        try:
            generation = await self._generate(info, messages, where)
        except _BackendFailed:
            self.in_flight -= 1
            return None
        context = None
        if any(r.wants_context for r in self.s.requirements):  # built only when a check asks
            context = CheckContext(messages, self.s.row, info, self.s.options)
        validations = validate_all(self.s.requirements, generation.text, context)
        if not isinstance(validations, tuple):
            validations = await validations  # an async check
        self.in_flight -= 1
        attempt, valid = self._record(info, messages, generation, validations)
        if self._call_iteration is not None:
            delivery = self._announce(attempt, valid, where)
            if delivery is not None:
                await delivery
        return attempt

    async def _generate(
        self, info: IterationInfo, messages: list[Message], where: dict[str, Any]
    ) -> Generation:
        s = self.s
        options = s.options
        if s.seed is not None:
            options = {**options, "seed": derive_seed(s.seed, info.subsample_index, info.attempt)}
        retry = 0
        while True:
            call_messages, call_options = messages, options
            if self._call_pre_call is not None:
                fields = where.copy()
                fields["messages"] = list(messages)
                fields["options"] = dict(options)
                fields["retry"] = retry
                pre = _new_pre_call(fields)
                pending = self._call_pre_call(pre, self.faults)
                if pending is not None:
                    await pending
                call_messages, call_options = pre.messages, pre.options
            request = GenerationRequest(call_messages, call_options, info)
            began = time.perf_counter()
            try:
                if s.attempt_timeout is None:
                    reply = await s.backend.generate(request)
                else:
                    reply = await generate_within(s.attempt_timeout, s.backend, request)
                generation = as_generation(reply, time.perf_counter() - began)
            except StopSampling:
                raise
            except Exception as exc:
                will_retry = is_transient(exc) and retry < s.retry.max_retries
                delay = (
                    s.retry.delay(retry + 1, getattr(exc, "retry_after", None))
                    if (will_retry)
                    else None
                )
                if self._call_error is not None:
                    fields = where.copy()
                    fields["exception"] = exc
                    fields["error_type"] = type(exc).__name__
                    fields["will_retry"] = will_retry
                    fields["retry_in_s"] = delay
                    fields["retry"] = retry
                    pending = self._call_error(_new_error(fields), self.faults)
                    if pending is not None:
                        await pending
                if not will_retry:
                    self._record_error(info, exc)
                    raise _BackendFailed from exc
                retry += 1
                await anyio.sleep(delay or 0.0)
                continue
            # Counted before post_call: a plugin stopping the loop there must not hide it.
            usage = generation.usage
            self._input_tokens += usage.input_tokens
            self._output_tokens += usage.output_tokens
            if self._call_post_call is not None:
                fields = where.copy()
                fields["generation"] = generation
                fields["latency_s"] = generation.latency_s
                fields["retry"] = retry
                post = _new_post_call(fields)
                pending = self._call_post_call(post, self.faults)
                if pending is not None:
                    await pending
            return generation

    def _record_error(self, info: IterationInfo, exc: BaseException) -> None:
        self.errors.append(AttemptError(info.subsample_index, info.attempt, info.iteration, exc))
        logger.warning(
            "sampling.backend_error",
            error_type=type(exc).__name__,
            error=str(exc),
        )

    def _record(
        self,
        info: IterationInfo,
        messages: list[Message],
        generation: Generation,
        validations: tuple[ValidationResult, ...],
    ) -> tuple[Attempt, int]:
        """Number, keep and judge a validated attempt; return it and its valid count."""
        self.sequence += 1
        valid = 0
        for verdict in validations:
            if verdict.passed:
                valid += 1
        passed = valid == len(validations)
        attempt = Attempt(
            info.subsample_index,
            info.attempt,
            info.iteration,
            self.sequence,
            generation.text,
            generation,
            validations,
            passed,
            messages,
        )
        self.attempts.append(attempt)
        if passed:
            self._judge_pass(attempt)
        return attempt, valid

    def _announce(
        self, attempt: Attempt, valid: int, where: dict[str, Any]
    ) -> Coroutine[Any, Any, None] | None:
        """Fire ``sampling_iteration`` for a recorded attempt; what is left to await, if any.

        Delivered one at a time, in sequence order, and shielded: the attempt is counted, so
        no cancellation may cut its delivery short. When no other delivery is under way,
        plain implementations run at once: with nothing awaited there is nothing to wait for
        and nothing to shield.
        """
        generation, validations = attempt.generation, attempt.validations
        fields = where.copy()
        fields["sequence"] = attempt.sequence
        fields["generation"] = generation
        fields["text"] = attempt.text
        fields["validations"] = list(validations)
        fields["passed"] = attempt.passed
        fields["valid_count"] = valid
        fields["total_count"] = len(validations)
        fields["latency_s"] = generation.latency_s
        fields["usage"] = generation.usage
        payload = _new_iteration(fields)
        try:
            delivery = self._delivery
            if delivery is None or not delivery.locked():
                pending = self._call_iteration(payload, self.faults)
                if pending is None:
                    return None
            else:
                pending = self.hooks.call(_ITERATION, payload, self.faults)
        except StopSampling as stop:
            self._stop(stop)
            return None
        except PluginError as exc:
            self._fail(exc)
            return None
        return self._deliver(attempt.subsample_index, pending)

    async def _deliver(self, index: int, delivery: Coroutine[Any, Any, None]) -> None:
        """Await an event's ``delivery``, shielded, under the delivery lock."""
        if self._delivery is None:
            self._delivery = anyio.Lock(fast_acquire=True)
        try:
            with self._shield(index):
                async with self._delivery:
                    await delivery
        except StopSampling as stop:
            self._stop(stop)
        except PluginError as exc:
            self._fail(exc)

    def _shield(self, index: int) -> AbstractContextManager[object]:
        if self._tasks is None:
            return anyio.CancelScope(shield=True)
        return self._tasks.shielded(index)

    def _judge_pass(self, attempt: Attempt) -> None:
        s = self.s
        if s.strategy.runs_whole_budget:
            return
        if s.selection == "first":
            if self.winner is None:
                self.winner = attempt
                if self._tasks is not None:
                    self._tasks.cancel_all()
            return
        key = (attempt.attempt, attempt.subsample_index)
        if self.best_key is None or key < self.best_key:
            self.best_key = key
            if self._tasks is None:
                return
            for index, number in enumerate(self._current_attempt):
                if index != attempt.subsample_index and (number, index) > key:
                    self._tasks.cancel(index)

    def _repair(
        self, failed: Attempt, messages: list[Message], where: dict[str, Any]
    ) -> list[Message] | Coroutine[Any, Any, list[Message]]:
        """The next attempt's messages once ``sampling_repair`` ran (a coroutine if it awaits)."""
        if self._call_repair is None:
            return messages
        fields = where.copy()
        fields["sequence"] = failed.sequence
        fields["text"] = failed.text
        fields["validations"] = list(failed.validations)
        fields["failure_reasons"] = failed.failure_reasons
        fields["next_attempt"] = failed.attempt + 1
        fields["messages"] = list(messages)
        payload = _new_repair(fields)
        pending = self._call_repair(payload, self.faults)
        if pending is not None:
            return _repaired_after(pending, payload)
        repaired = payload.messages
        return repaired if type(repaired) is list else _repaired(payload)

    # -- the end ------------------------------------------------------------------------

    def _result(self) -> SamplingResult:
        s = self.s
        attempts = sorted(self.attempts, key=_by_position)
        if not attempts and self.errors and not self.stopped:
            raise self.errors[0].exception
        picked = self._pick(attempts)
        success = picked is not None and picked.passed
        stop_reason: StopReason
        if self.stopped:
            stop_reason = "stopped_by_plugin"
        elif success:
            stop_reason = "success"
        else:
            stop_reason = "budget_exhausted"
        value = None
        if s.format is not None and picked is not None:
            try:
                value = parse_model(s.format, picked.text)
            except ValueError:
                value = None
        return SamplingResult(
            success=success,
            text=picked.text if picked is not None else None,
            stop_reason=stop_reason,
            attempts=attempts,
            iterations_used=len(attempts),
            cancelled=self.in_flight,
            usage=self.usage,
            sampling_id=s.sampling_id,
            elapsed_s=time.perf_counter() - self.started,
            loop_budget=s.loop_budget,
            concurrency_budget=s.concurrency_budget,
            strategy_name=s.strategy.name,
            picked=picked,
            value=value,
            errors=self.errors,
            plugin_errors=self.faults,
        )

    def _pick(self, attempts: Sequence[Attempt]) -> Attempt | None:
        s = self.s
        if not s.strategy.runs_whole_budget:
            if self.winner is not None:
                return self.winner
            if self.best_key is not None:
                attempt, index = self.best_key
                for candidate in attempts:
                    if candidate.subsample_index == index and candidate.attempt == attempt:
                        return candidate
        return s.strategy.pick(attempts)

    async def _end(self, result: SamplingResult | None, exc: BaseException | None) -> None:
        call = self.hooks.caller(_LOOP_END)
        if call is None:
            return
        s = self.s
        payload = _new_loop_end(
            {
                "sampling_id": s.sampling_id,
                "strategy_name": self._strategy_name,
                "success": result.success if result else False,
                "stop_reason": result.stop_reason if result else "error",
                "iterations_used": len(self.attempts),
                "cancelled": self.in_flight,
                "text": result.text if result else None,
                "usage": result.usage if result else self.usage,
                "loop_budget": s.loop_budget,
                "concurrency_budget": s.concurrency_budget,
                "elapsed_s": result.elapsed_s if result else time.perf_counter() - self.started,
                "error_count": len(self.errors),
                "exception": exc,
            }
        )
        pending = call(payload, self.faults)
        if pending is not None:
            await pending


def _repaired(payload: SamplingRepairPayload) -> list[Message]:
    messages = payload.messages
    if not isinstance(messages, list):
        writer = payload.written_by("messages") or "a plugin"
        raise PluginError(writer, _REPAIR.value, "payload.messages must be a list of messages")
    return messages


async def _repaired_after(
    pending: Coroutine[Any, Any, None], payload: SamplingRepairPayload
) -> list[Message]:
    await pending
    return _repaired(payload)


def _one_of(group: BaseExceptionGroup) -> BaseException:
    """The exception to raise for a group of them: the first that is not a cancellation,
    as itself, with the others named in a note (the group when all are cancellations)."""
    errors = group.exceptions
    if len(errors) == 1:
        return errors[0]
    cancelled = anyio.get_cancelled_exc_class()
    chosen = next((e for e in errors if not isinstance(e, cancelled)), None)
    if chosen is None:
        return group
    others = "; ".join(f"{type(e).__name__}: {e}" for e in errors if e is not chosen)
    chosen.add_note(f"other subsamples raised too: {others}")
    return chosen


def _by_position(attempt: Attempt) -> tuple[int, int]:
    return (attempt.subsample_index, attempt.attempt)
