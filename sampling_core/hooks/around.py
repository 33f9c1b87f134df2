"""The call loop of the call hooks (``sampling_call``, ``generation_call``): wrappers around
plain implementations around the engine's own work.

:func:`call_around` runs one call hook the way pluggy runs a hook with new-style wrappers,
with the differences that awaiting needs:

* the wrappers (``@hookimpl(wrapper=True)``) are entered first, outermost first, in
  pluggy's call order. A sync one is pluggy's new-style wrapper: a generator whose
  ``yield`` evaluates to the inner result; what it returns is the result (a replacement,
  or the same). An async one is an async generator whose ``yield`` evaluates to a
  ``pluggy.Result`` holding the inner result: ``outcome.force_result(other)`` replaces it
  (an async generator cannot return a value);
* then the plain implementations, in call order, until one returns something other than
  ``None`` (pluggy's ``firstresult``): that is the *answer*, and its plugin the one that
  answered;
* then the innermost work, ``inner(answer, plugin_name)``, which the engine provides (the
  backend call, or the sampling loop): it uses the answer instead of its own work when
  there is one;
* then the wrappers are left, innermost first. An exception or a cancellation raised
  inside is thrown in at each wrapper's ``yield``, so its ``finally`` and ``async with``
  blocks run, exactly once, whatever ended the call. A sync wrapper may turn an
  exception into a result (return one) or raise another; a cancellation or a
  ``KeyboardInterrupt`` goes on whatever a wrapper does (structured concurrency needs it
  to reach its scope), and what the wrapper raised meanwhile is logged as its fault.

Nothing here runs when no plugin implements the hook: the engine reads its firing flag
first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pluggy

from sampling_core.errors import PluginError
from sampling_core.hooks.faults import log_fault
from sampling_core.hooks.table import HookImplementation

__all__ = ["Inner", "call_around"]

T = TypeVar("T")

Inner = Callable[[Any, "str | None"], Awaitable[T]]
"""The engine's own work: ``inner(answer, answered_by)`` (``answer`` is ``None`` when no
plain implementation answered)."""


async def call_around(
    hook: str,
    wrappers: tuple[HookImplementation, ...],
    plain: tuple[HookImplementation, ...],
    payload: Any,
    inner: Inner[T],
    valid: Callable[[Any], bool],
) -> T:
    """Run ``hook``'s implementations around ``inner`` (see the module's docstring);
    the outcome, as the outermost wrapper left it.

    ``valid(result)`` says whether a result a wrapper returned may stand (a wrapper that
    returned anything else fails closed as :class:`PluginError` naming it).
    """
    opened: list[tuple[HookImplementation, Any]] = []
    result: Any = None
    error: BaseException | None = None
    try:
        for impl in wrappers:
            step = impl.call(payload)
            try:
                if impl.is_async:
                    await step.__anext__()
                else:
                    next(step)
            except (StopIteration, StopAsyncIteration):
                raise PluginError(
                    impl.plugin_name, hook, "the wrapper ended without a `yield`"
                ) from None
            opened.append((impl, step))
        answer, answered_by = None, None
        for impl in plain:
            out = impl.call(payload)
            if impl.is_async:
                out = await out
            if out is not None:
                answer, answered_by = out, impl.plugin_name
                break
        result = await inner(answer, answered_by)
    except BaseException as exc:
        error = exc
    for impl, step in reversed(opened):
        handed, failed = result, error is not None
        if impl.is_async:
            result, error = await _leave_async(impl, hook, step, result, error)
        else:
            result, error = _leave_sync(impl, hook, step, result, error)
        # what a wrapper left in place of what it was handed must be an outcome
        if error is None and (failed or result is not handed) and not valid(result):
            error = PluginError(
                impl.plugin_name,
                hook,
                f"the wrapper left {type(result).__name__} as the outcome; a sync wrapper "
                "returns what its `yield` gave (`return (yield)`) or a replacement",
            )
    if error is not None:
        raise error
    return result  # type: ignore[no-any-return]


def _must_go_on(error: BaseException | None) -> bool:
    """Whether ``error`` stands whatever a wrapper does: a cancellation, a Ctrl-C, an exit."""
    return error is not None and not isinstance(error, Exception)


def _kept(
    impl: HookImplementation, hook: str, result: Any, error: BaseException, raised: BaseException
) -> tuple[Any, BaseException]:
    """A wrapper raised ``raised`` while ``error`` was thrown in: ``raised`` replaces an
    ordinary exception; a cancellation (or Ctrl-C) goes on, ``raised`` logged as a fault."""
    if raised is error or not _must_go_on(error):
        return result, raised
    if isinstance(raised, Exception):
        log_fault(impl.plugin_name, hook, raised)
    return result, error


def _leave_sync(
    impl: HookImplementation, hook: str, step: Any, result: Any, error: BaseException | None
) -> tuple[Any, BaseException | None]:
    """Resume a sync wrapper with the inner outcome; the outcome it leaves."""
    try:
        if error is None:
            step.send(result)
        else:
            step.throw(error)
    except StopIteration as returned:
        if error is not None and not isinstance(error, Exception):  # _must_go_on, inlined
            return result, error
        return returned.value, None
    except BaseException as raised:
        if error is None:
            return result, raised
        return _kept(impl, hook, result, error, raised)
    step.close()
    return result, _twice(impl, hook, error)


async def _leave_async(
    impl: HookImplementation, hook: str, step: Any, result: Any, error: BaseException | None
) -> tuple[Any, BaseException | None]:
    """Resume an async wrapper with the inner outcome (a ``pluggy.Result``, or the error
    thrown in); the outcome it leaves. It cannot turn an error into a result: an async
    generator that ends quietly after an error leaves that error."""
    outcome = None
    try:
        if error is None:
            outcome = pluggy.Result.from_call(lambda: result)
            await step.asend(outcome)
        else:
            await step.athrow(error)
    except StopAsyncIteration:
        if outcome is None:
            return result, error
        if outcome.exception is not None:
            return result, outcome.exception
        return outcome.get_result(), None
    except BaseException as raised:
        if error is None:
            return result, raised
        return _kept(impl, hook, result, error, raised)
    await step.aclose()
    return result, _twice(impl, hook, error)


def _twice(impl: HookImplementation, hook: str, error: BaseException | None) -> BaseException:
    if _must_go_on(error):
        assert error is not None
        return error
    return PluginError(impl.plugin_name, hook, "the wrapper has a second `yield`; it may have one")
