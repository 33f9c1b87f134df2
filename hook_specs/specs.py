"""The hooks: one function each, in the order they fire for a call.

Every hook takes one argument, ``payload`` (see :mod:`hook_specs.payloads`). An
implementation may be a plain function or ``async def``; async ones are awaited before the
next implementation runs, and a change one implementation makes is seen by the next.
Implementations run in pluggy's order: ``tryfirst`` ones, then the rest (last registered
first), then ``trylast`` ones. The two call hooks, ``sampling_call`` and ``generation_call``, are
fired *around* a piece of work and take ``@hookimpl(wrapper=True)`` implementations (a
generator with one ``yield``, sync or async); every other hook refuses them.
"""

from __future__ import annotations

from collections.abc import Callable

from hook_specs.markers import hookspec
from hook_specs.payloads import (
    GenerationCallPayload,
    GenerationCancelledPayload,
    GenerationChunkPayload,
    GenerationErrorPayload,
    GenerationPostCallPayload,
    GenerationPreCallPayload,
    SamplingCallPayload,
    SamplingIterationPayload,
    SamplingLoopEndPayload,
    SamplingLoopStartPayload,
    SamplingRepairPayload,
    SamplingValidatePayload,
)
from hook_specs.run_payloads import (
    PromptEndPayload,
    PromptStartPayload,
    RunEndPayload,
    RunStartPayload,
)


@hookspec
def sampling_loop_start(payload: SamplingLoopStartPayload) -> None:
    """Once per ``sample()`` call, before any generation.

    A plugin may change ``payload.loop_budget`` and ``payload.concurrency_budget``; the
    engine validates both after every implementation ran and raises ``BudgetError`` naming
    the field, the value and the plugin that wrote it. Raising ``StopSampling`` here ends the
    call before any generation. A fault here fails closed as ``PluginError``.
    """


@hookspec
def sampling_call(payload: SamplingCallPayload) -> object:
    """Around one ``sample()`` call's work: after ``sampling_loop_start``, around its
    subsamples and the pick, before ``sampling_loop_end``.

    Takes ``wrapper=True`` implementations: a sync one is pluggy's new-style wrapper
    (``result = yield``, then ``return`` it or a replacement ``SamplingResult``, or raise);
    an async one is an async generator whose ``yield`` gives a ``pluggy.Result``
    (``outcome.force_result(other)`` replaces it). An error, ``StopSampling``, the caller's
    cancellation or Ctrl-C is raised at the ``yield``, so ``finally`` and ``async with``
    blocks run exactly once. A plain implementation is called before the work starts
    (its return value is ignored).
    """


@hookspec
def sampling_validate(payload: SamplingValidatePayload) -> None:
    """After an attempt's checks ran, before it counts as passed or failed.

    ``payload.results`` holds one ``ValidationResult`` per requirement; a plugin may
    replace a verdict (flip it, with a reason) or append a result of its own. The attempt
    passes when every result in the list passes (an empty list passes). A fault here, or a
    list holding anything but ``ValidationResult`` objects, fails closed (``PluginError``,
    naming the plugin that wrote it). A plugin that only reads the verdicts (``trylast``,
    after the others) uses ``payload.well_formed_results()``: the list, or ``None`` when
    an earlier plugin wrote something else. Not fired, and no payload built, when no
    plugin implements it.
    """


@hookspec
def sampling_iteration(payload: SamplingIterationPayload) -> None:
    """After each completed attempt (generated and validated), in completion order.

    Events of one call are delivered one at a time, in ``sequence`` order, and a delivery
    that has begun is not cut short by a sibling's success. Observe only: a fault is
    isolated and recorded in ``result.plugin_errors``.
    """


@hookspec
def sampling_repair(payload: SamplingRepairPayload) -> None:
    """After a failed attempt that will be retried, before its subsample's next generation.

    ``payload.messages`` holds what the strategy will send next; a plugin may replace or
    edit it. Never fires when ``loop_budget`` is 1. A fault here fails closed.
    """


@hookspec
def sampling_loop_end(payload: SamplingLoopEndPayload) -> None:
    """Once per call, on every path: success, budget exhausted, stopped, or error.

    On the error path ``payload.exception`` holds what ``sample()`` is about to raise.
    Observe only; ``StopSampling`` raised here is a plugin error (the loop is over).
    """


@hookspec
def generation_pre_call(payload: GenerationPreCallPayload) -> None:
    """Before each backend call, transport retries included.

    A plugin may change ``payload.messages`` (a list of messages) and ``payload.options``
    (a dict) for this call; a value of another kind fails the call with ``PluginError``
    naming the plugin that wrote it. A fault here fails closed.
    """


@hookspec(firstresult=True)
def generation_call(payload: GenerationCallPayload) -> object:
    """Around each backend call, after ``generation_pre_call`` (transport retries included).

    The backend is its innermost implementation. A plain implementation that returns
    something other than ``None`` answers instead of the backend (``firstresult``): a
    ``Generation`` (or a string; for a call with ``payload.streamed``, also an iterable or
    async iterable of ``Chunk`` objects ending with a ``Generation``), and the generation
    says which plugin answered (``generation.answered_by``). A ``wrapper=True``
    implementation runs around the plain ones and the backend: a sync one is pluggy's
    new-style wrapper (``generation = yield``, then ``return`` it or a replacement, or
    raise); an async one is an async generator whose ``yield`` gives a ``pluggy.Result``
    (``outcome.get_result()``; ``outcome.force_result(other)`` replaces it). An error or a
    cancellation of the call is raised at the ``yield``, so ``finally`` and ``async with``
    blocks run exactly once. What an implementation raises is the call's outcome, as if
    the backend raised it (``generation_error``, retried when transient).
    """


@hookspec
def generation_cancelled(payload: GenerationCancelledPayload) -> None:
    """When a backend call that began (its ``generation_pre_call`` fired) was cancelled
    before it answered or raised: ``payload.reason`` says why.

    Every ``generation_pre_call`` is followed by exactly one of ``generation_post_call``,
    ``generation_error`` and ``generation_cancelled``. Observe only; ``@background``
    allowed.
    """


@hookspec
def generation_chunk(payload: GenerationChunkPayload) -> None:
    """For each piece of text a streaming backend sends, in order, while it generates.

    Fires only when the backend streams, and backends stream only when someone needs the
    chunks: a plugin implementing this hook, or a requirement with a prefix check while
    early stop is on. ``payload.delta`` is the new text, ``payload.text`` all of it so far,
    ``payload.index`` the chunk's number (0-based). Observe only; ``@background`` allowed.
    """


@hookspec
def generation_post_call(payload: GenerationPostCallPayload) -> None:
    """After each backend call that returned. Observe only."""


@hookspec
def generation_error(payload: GenerationErrorPayload) -> None:
    """When a backend call raised; ``payload.will_retry`` says whether it is retried.

    Observe only.
    """


# -- run hooks: fired by a batch run (``samplehooks run``, ``run_batch``) around its calls ------


@hookspec
def run_start(payload: RunStartPayload) -> None:
    """Once per session of a batch run, after the run directory is ready, before any prompt.

    Fired in the process that writes the run directory (the driver, under Ray), for the
    plugins the run names. ``payload.resumed`` and ``payload.done`` say what earlier
    sessions did. Observe only: a fault is isolated and logged; ``@background`` is allowed.
    """


@hookspec
def prompt_start(payload: PromptStartPayload) -> None:
    """Before a prompt's ``sample()`` call, once per prompt this session runs.

    Prompts an earlier session finished are not announced. The call's hooks follow, their
    payloads carrying ``prompt_key``. Observe only.
    """


@hookspec
def prompt_end(payload: PromptEndPayload) -> None:
    """After a prompt's record is in ``records.jsonl``, once per prompt this session runs.

    Every prompt that got ``prompt_start`` gets one ``prompt_end``: when its record is
    written, also when its Ray worker died (the record then says why); a prompt still in
    flight when the session ends (Ctrl-C, SIGTERM, a fatal error) gets it then, before
    ``run_end``, with a record written nowhere whose ``status`` is ``"interrupted"``.
    Observe only.
    """


@hookspec
def run_end(payload: RunEndPayload) -> None:
    """Once per session, last: after every record is written, also after Ctrl-C or a fatal
    error (whenever ``run_start`` fired).

    ``payload.totals`` and ``payload.pass_at_k`` are what ``samplehooks report --json``
    gives for the whole run; ``payload.interrupted`` says whether the session ended early.
    Observe only.
    """


# -- provider hooks: called once when kinds are collected, with ``register`` -------------------


@hookspec
def register_requirements(register: Callable[..., None]) -> None:
    """Add requirement kinds: ``register(kind, factory, options=None)``.

    ``factory(VALUE, **options)`` returns a ``Requirement`` or a check callable; YAML writes
    the kind as ``- KIND: VALUE`` (other keys of that mapping are its options), the CLI as
    ``--require KIND:VALUE``. Options are validated by ``options`` (a pydantic model) or, when
    none is given, by the factory's own signature. Called for every installed plugin that is
    not disabled, with a ``register`` that knows the plugin's name.
    """


@hookspec
def register_backends(register: Callable[..., None]) -> None:
    """Add backend kinds: ``register(kind, factory, options=None)``.

    ``factory(**options)`` returns a backend; YAML writes ``backend: {kind: KIND, ...}``, the
    CLI ``--backend KIND --backend-option NAME=VALUE``.
    """


@hookspec
def register_strategies(register: Callable[..., None]) -> None:
    """Add strategies: ``register(name, factory, options=None)``.

    ``factory(**options)`` returns a ``Strategy``; YAML writes ``strategy: NAME`` or
    ``strategy: {name: NAME, ...options}``, the CLI ``--strategy NAME``.
    """


@hookspec
def register_scorers(register: Callable[..., None]) -> None:
    """Add scorer kinds: ``register(kind, factory, options=None)``.

    ``factory(**options)`` returns a scorer, ``scorer(text)`` or ``scorer(text, context)``
    (sync or async) returning a number, higher is better; strategies that rank or weigh
    answers use one (``strategy: {name: best_of_n, scorer: KIND}`` or ``scorer: {kind:
    KIND, ...options}``).
    """
