"""One attempt's generation step: ``generation_pre_call``, the backend call (or the
``generation_call`` hook around it, or a stream read with prefix checks), transport
retries, ``generation_post_call``, ``generation_error`` and ``generation_cancelled``.

:class:`GenerationStep` is the part of :class:`~sampling_core.engine.loop.SamplingCall`
that makes one backend call for an attempt (or for a check's judge call): the loop's
``_attempt`` awaits :meth:`GenerationStep._generate` and goes on with the checks.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

import anyio

from hook_specs.errors import StopSampling
from hook_specs.records import (
    NOTHING_SPENT,
    UNKNOWN_USAGE,
    Generation,
    IterationInfo,
    Message,
)
from sampling_core.backends.base import (
    Answered,
    Backend,
    GenerationRequest,
    as_generation,
    generate_within,
)
from sampling_core.backends.transport import is_transient
from sampling_core.engine.seeds import derive_seed
from sampling_core.engine.settings import CallSettings
from sampling_core.engine.streaming import (
    Failed,
    Flight,
    judge_whole,
    read_stream,
    read_stream_within,
    readers_of,
)
from sampling_core.engine.suspension import YieldClock, finish, note_yield
from sampling_core.engine.tally import Tally
from sampling_core.errors import CheckCallFailed
from sampling_core.hooks.call_hooks import CallHooks
from sampling_core.hooks.faults import describe

NO_CHECKS: frozenset[Any] = frozenset()
"""``generation_call``'s ``prefix_checks`` when none judges the call (not streamed)."""

ASKED = Generation("", UNKNOWN_USAGE)
"""In ``answered`` while ``generation_call``'s innermost call awaits the backend's own answer
(not streamed): cancelled then, the call spent what is unknown. Not there: no backend call
began (a plugin was answering, or working out whether it would), and nothing was spent."""


class BackendFailed(Exception):
    """Internal: the attempt's backend call raised for good (already reported)."""


class GenerationStep:
    """The backend call of an attempt, as :class:`~sampling_core.engine.loop.SamplingCall`
    makes it (the attributes below are the call's, set by its ``__init__``)."""

    __slots__ = ()

    s: CallSettings
    hooks: CallHooks
    tally: Tally
    streams: bool
    json_schema: dict[str, Any] | None
    prefix_checks: frozenset[Any]
    prefixes: Any
    prefix_notes: list[dict[str, Any]]
    clock: YieldClock

    async def _judge_call(
        self, info: IterationInfo, request: GenerationRequest, backend: Backend | None = None
    ) -> Generation:
        """A check's model call (``CheckContext.generate``), through the backend path."""
        generation, _, _ = await self._generate(
            info, request.messages, backend or self.s.backend, "judge", dict(request.options)
        )
        return generation

    async def _generate(
        self,
        info: IterationInfo,
        messages: list[Message],
        backend: Backend | None = None,
        purpose: str = "sample",
        options: dict[str, Any] | None = None,
    ) -> tuple[Generation, GenerationRequest, Failed]:
        """The backend's answer, after ``generation_pre_call`` and transport retries, the
        request it answered (the messages and options as plugins left them), and the
        requirements whose prefix check stopped it early (none: it ran to its end).

        ``purpose="judge"``: a call a check makes for this attempt; it is no attempt of its
        own (not in flight): a failure for good is kept in ``result.errors`` and raises
        :class:`CheckCallFailed`, which ends the attempt as an error.
        """
        s, hooks = self.s, self.hooks
        firing = hooks.firing
        judging = purpose != "sample"
        backend = backend or s.backend
        if options is None:
            options = s.options
            if s.seed is not None:
                seed = derive_seed(s.seed, info.subsample_index, info.attempt)
                options = {**options, "seed": seed}
        retry = 0
        while True:
            call_messages, call_options = messages, options
            began = 0.0
            stopped: Failed = ()  # the prefix checks that stopped a streamed answer early
            try:
                if firing.generation_pre_call:
                    sent = hooks.pre_call(info, messages, options, retry, purpose)
                    call_messages, call_options = sent if isinstance(sent, tuple) else await sent
                request = GenerationRequest(call_messages, call_options, info, self.json_schema)
                began = time.perf_counter()
                if firing.generation_call:  # plugins around the call, or answering for it
                    streamed = self.streams and not judging
                    verdict: list[Failed] = []  # what the innermost call's stream says
                    answer = partial(
                        self._answer, info, request, backend, retry, judging, began, verdict
                    )
                    generation = await hooks.around_generation(
                        info,
                        request,
                        backend,
                        self.prefix_checks if streamed else NO_CHECKS,
                        streamed,
                        retry,
                        purpose,
                        answer,
                    )
                    self.answered.pop(info.iteration, None)
                    if verdict:
                        stopped = verdict[0]
                    # Counted at once: an answer the cache or a plugin gave spent nothing
                    self.tally.count_usage(generation.spent)
                elif self.streams and not judging:
                    generation, stopped = await self._stream(info, request, backend, retry)
                    ended = time.perf_counter()
                    note_yield(self.clock, ended)
                    generation = as_generation(generation, ended - began)
                    self.tally.count_usage(generation.usage)  # the backend's: all spent
                else:
                    # Awaited by hand to learn whether it suspended (see engine.suspension).
                    pending = (
                        backend.generate(request)
                        if s.attempt_timeout is None
                        else generate_within(s.attempt_timeout, backend, request)
                    )
                    try:
                        step = pending.send(None)  # up to its first suspension, if any
                    except StopIteration as answered:  # answered without suspending
                        reply = answered.value
                        ended = time.perf_counter()
                    else:
                        reply = await finish(pending, step)
                        ended = time.perf_counter()
                        note_yield(self.clock, ended)
                    generation = as_generation(reply, ended - began)
                    # Counted at once: a cancellation or a plugin stopping the loop must not
                    # hide it (the backend answered: all it used is spent).
                    self.tally.count_usage(generation.usage)
            except StopSampling as stop:
                if not began and retry == 0 and not judging:
                    self.tally.dropped()  # refused before its backend call: never in flight
                answered = self._answered_before(info, firing.generation_call)
                if firing.generation_cancelled:
                    await self._cancelled(info, stop, began, retry, purpose, answered)
                raise
            except Exception as exc:
                if firing.generation_call and self.answered:  # answered, then a wrapper raised
                    spent = self.answered.pop(info.iteration, None)
                    if spent is not None and spent is not ASKED:
                        self.tally.count_usage(spent.spent)
                if not began:  # generation_pre_call failed closed: no backend call began
                    if retry == 0 and not judging:
                        self.tally.dropped()  # never in flight
                    if firing.generation_cancelled:
                        await self._cancelled(info, exc, began, retry, purpose)
                    raise
                failed_after = time.perf_counter() - began
                will_retry = is_transient(exc) and retry < s.retry.max_retries
                delay = (
                    s.retry.delay(retry + 1, getattr(exc, "retry_after", None))
                    if will_retry
                    else None
                )
                if firing.generation_error:
                    await hooks.error(info, exc, failed_after, will_retry, delay, retry, purpose)
                if not will_retry:
                    self.tally.record_error(info, exc)
                    if judging:  # nothing was graded: the attempt ends as an error
                        raise CheckCallFailed(describe(exc)) from exc
                    raise BackendFailed from exc
                retry += 1
                await anyio.sleep(delay or 0.0)
                continue
            except BaseException as exc:  # cancelled (or interrupted) while the backend worked
                answered = self._answered_before(info, firing.generation_call)
                if not began:  # ...or before its backend call began: never in flight
                    if retry == 0 and not judging:
                        self.tally.dropped()
                elif not firing.generation_call and not judging and not self.streams:
                    self.tally.cut()  # what it spent is unknown (with plugins: see ASKED)
                if firing.generation_cancelled:
                    await self._cancelled(info, exc, began, retry, purpose, answered)
                raise
            if firing.generation_post_call:
                pending = hooks.post_call(info, generation, retry, purpose)
                if pending is not None:
                    await pending
            return generation, request, stopped

    async def _answer(
        self,
        info: IterationInfo,
        request: GenerationRequest,
        backend: Backend,
        retry: int,
        judging: bool,
        began: float,
        verdict: list[Failed],
        answer: Any,
        answered_by: str | None,
    ) -> Generation:
        """The innermost ``generation_call``: the backend's generation, or the answer of the
        plugin that answered for it (a ``Generation``, a string, or for a streamed call
        chunks read as the backend's stream would be), named by ``answered_by``. A
        ``Generation`` answered in a streamed call with prefix checks in force (or one
        stopped early) is read as a stream too (of no chunks), so that the prefix checks
        judge it as they judge the backend's. A streamed answer's prefix verdict goes into
        ``verdict``, for :meth:`_generate` to return."""
        streamed = self.streams and not judging
        if answer is None:
            if streamed:
                reply, failed = await self._stream(info, request, backend, retry)
                verdict.append(failed)
            else:
                if not judging:
                    self.answered[info.iteration] = ASKED
                if self.s.attempt_timeout is None:
                    reply = await backend.generate(request)
                else:
                    reply = await generate_within(self.s.attempt_timeout, backend, request)
        elif isinstance(answer, Generation | str):
            reply = answer
            if streamed and self.prefixes and isinstance(answer, Generation):
                # judged as read_stream judges a generation that arrives in one piece (with
                # nothing to await, it needs no stream of its own)
                verdict.append(judge_whole(readers_of(self.prefixes, self.prefix_notes), answer))
        elif streamed:
            reply, failed = await self._stream(info, request, Answered(answer), retry, answered_by)
            verdict.append(failed)
        else:
            raise TypeError(
                f"plugin {answered_by} answered generation_call with {type(answer).__name__}; "
                "answer with a Generation or a string (chunks only for a streamed call)"
            )
        ended = time.perf_counter()
        note_yield(self.clock, ended)
        generation = as_generation(reply, ended - began)
        if answered_by is not None:
            generation.answered_by = answered_by
        if not judging:  # until the wrappers around it return (see _answered_before)
            self.answered[info.iteration] = generation
        return generation

    def _answered_before(self, info: IterationInfo, wrapped: bool) -> Generation | None:
        """The answer to an attempt's call that ended without returning (a wrapper still at
        work after the answer was cancelled, or raised): what it spent is known, and
        counted as a cancelled attempt's spend (once); :data:`ASKED` when the backend's own
        call was cut short before it answered (what it spent is unknown)."""
        answered = self.answered.pop(info.iteration, None) if wrapped else None
        if answered is ASKED:
            self.tally.cut()
        elif answered is not None:
            self.tally.count_answered(answered.spent)
        return answered

    async def _cancelled(
        self,
        info: IterationInfo,
        exc: BaseException,
        began: float,
        retry: int,
        purpose: str,
        answered: Generation | None = None,
    ) -> None:
        """Fire ``generation_cancelled`` for a backend call that began (its
        ``generation_pre_call`` fired) and ends by ``exc`` without returning an answer
        (``answered``: the one the backend or a plugin gave, when wrappers were still at
        work; :data:`ASKED`: the backend's, not yet given). Its ``usage`` is what it spent."""
        flight = self.tally.flights.get(info.iteration) if self.streams else None
        text, usage, answered_by = None, UNKNOWN_USAGE, None
        called = True  # whether the backend itself was asked
        if answered is not None and answered is not ASKED:
            text, usage, answered_by = answered.text, answered.spent, answered.answered_by
            called = answered_by is None
        elif flight is not None and flight.info is info:
            free = bool(getattr(self.s.backend, "free_of_charge", False))
            text, usage, answered_by = flight.text, flight.spent(free), flight.answered_by
            called = answered_by is None
        elif not began or (
            answered is None and purpose == "sample" and self.hooks.firing.generation_call
        ):  # refused or cancelled before it, or a plugin was still at work (see ASKED)
            usage, called = NOTHING_SPENT, False
        latency = time.perf_counter() - began if began else 0.0
        reason = self.tally.cancel_reason(exc)
        with self._shield(info.subsample_index):
            pending = self.hooks.cancelled(
                info, reason, text, usage, latency, retry, purpose, answered_by, called
            )
            if pending is not None:
                await pending

    async def _stream(
        self,
        info: IterationInfo,
        request: GenerationRequest,
        backend: Backend,
        retry: int,
        answered_by: str | None = None,
    ) -> tuple[Generation, Failed]:
        """The backend's answer, streamed: chunks to plugins, prefix checks, early stop;
        and the prefix checks that stopped it (none when it ran to its end). ``backend``
        is the answer of the plugin ``answered_by`` when one streams instead of it.

        While it runs, its :class:`~sampling_core.engine.streaming.Flight` is in the tally:
        one left there when the call ends was cancelled, and counts what it streamed.
        """
        tally = self.tally
        flight = tally.take_off(info, answered_by)
        on_chunk = None
        if self.hooks.firing.generation_chunk:

            async def on_chunk(flight: Flight, delta: str, logprobs: tuple[Any, ...]) -> None:
                pending = self.hooks.chunk(
                    info, delta, flight.text, flight.chunks - 1, retry, logprobs, flight.answered_by
                )
                if pending is not None:
                    await pending

        free = bool(getattr(backend, "free_of_charge", False))
        timeout = self.s.attempt_timeout
        try:
            if timeout is None:
                generation, failed = await read_stream(
                    backend, request, flight, self.prefixes, self.prefix_notes, on_chunk, free
                )
            else:
                generation, failed = await read_stream_within(
                    timeout,
                    backend,
                    request,
                    flight,
                    self.prefixes,
                    self.prefix_notes,
                    on_chunk,
                    free,
                )
        except StopSampling:
            raise  # the flight stays: the loop ends, and it counts what it streamed
        except Exception:
            tally.landed(info)  # ended by an error: not cut short
            raise
        tally.landed(info)
        return generation, failed

    def _shield(self, index: int) -> AbstractContextManager[object]:
        tasks = self.tally.tasks
        if tasks is None:
            return anyio.CancelScope(shield=True)
        return tasks.shielded(index)
