"""What a plugin did wrong: an isolated fault, a timeout, an awaitable not awaited.

Isolated faults are kept in a :class:`Faults` list, which bounds them: of one plugin in one
hook the first :data:`KEPT_PER_HOOK` are kept (and logged), the rest counted on the last one
kept (:attr:`PluginFault.more`); a kept fault holds no payload: its exception is kept
without its traceback (whose frames hold the payload), and the log line says where it was
raised. An observer that raises on every chunk of a long
stream costs a few faults, not one (with the text so far) per chunk.

One formatter for every exception shown or recorded: :func:`sampling_core.errors.exception_text`.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, replace
from types import FrameType, TracebackType
from typing import Any

import structlog

from sampling_core.errors import exception_text

__all__ = [
    "KEPT_PER_HOOK",
    "Faults",
    "PluginFault",
    "PluginTimeout",
    "describe",
    "left_running",
    "log_fault",
    "not_awaited",
    "not_delivered",
]

logger = structlog.get_logger("samplehooks")


@dataclass(frozen=True, slots=True)
class PluginFault:
    """A plugin's exception, isolated in an observe-only hook."""

    plugin_name: str
    hook: str
    exception: BaseException
    more: int = 0
    """Faults of the same plugin in the same hook after this one, counted and not kept."""

    def __str__(self) -> str:
        text = f"{self.plugin_name}, {self.hook}: {exception_text(self.exception)}"
        if self.more:
            text += f" (and {self.more} more in this hook, not kept)"
        return text


class PluginTimeout(TimeoutError):
    """An async hook implementation ran longer than the dispatcher's timeout."""


def not_awaited(pending: Any) -> TypeError:
    """The fault of a plain function that returned an awaitable: the awaitable is closed, not
    run, on every delivery path (inline or background)."""
    close = getattr(pending, "close", None)
    if close is not None:
        close()
    return TypeError(
        f"returned {type(pending).__name__} from a plain function; an implementation "
        "whose work must be awaited is declared `async def`"
    )


def left_running(timeout: float, grace: float | None, behind: bool) -> PluginTimeout:
    """The fault of a background observer whose event the delivery stopped waiting for: at
    its ``timeout``, or (``grace``: the program was interrupted and hurried) ``grace``
    seconds after the interruption, stuck in that event or only ``behind``."""
    if grace is None:
        ran = f"did not return within {timeout:g}s"
    elif behind:
        ran = (
            f"was behind, not stuck, {grace:g}s after the program was interrupted (it "
            "returned from an event meanwhile)"
        )
    else:
        ran = f"had not returned {grace:g}s after the program was interrupted"
    return PluginTimeout(
        f"{ran}; it was left running and its later events are not delivered until it returns"
    )


def not_delivered(count: int, hook: str, behind: bool) -> PluginTimeout:
    """The fault counting the ``count`` events a background observer left running (see
    :func:`left_running`) did not get."""
    events = "1 later event was" if count == 1 else f"{count} later events were"
    if behind:
        return PluginTimeout(
            f"{events} not delivered: it was behind when the program stopped waiting"
        )
    return PluginTimeout(f"{events} not delivered: its {hook} call is stuck")


def log_fault(
    plugin_name: str, hook: str, exc: BaseException, raised_at: str | None = None
) -> None:
    """Log an isolated plugin fault (``plugin.error``, with the plugin's name, and where the
    exception was raised when known)."""
    fields = {"raised_at": raised_at} if raised_at is not None else {}
    logger.warning(
        "plugin.error",
        plugin=plugin_name,
        hook=hook,
        error_type=type(exc).__name__,
        error=exception_text(exc),
        **fields,
    )


def describe(exc: BaseException) -> str:
    """``Type: message`` (or just ``Type``)."""
    text = exception_text(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


KEPT_PER_HOOK = 3
"""How many faults of one plugin in one hook a :class:`Faults` list keeps."""


class Faults(list[PluginFault]):
    """Isolated plugin faults, bounded: the first :data:`KEPT_PER_HOOK` of each plugin in each
    hook, each without the payload it was raised over (nor its traceback, whose frames hold
    it); the later ones counted on the last kept.

    Add to it with :meth:`add` only (it is a plain list to everyone who reads it).
    """

    def __init__(self) -> None:
        super().__init__()
        self._last: dict[tuple[str, str], int] = {}  # (plugin, hook) -> its last kept, by index
        self._kept: dict[tuple[str, str], int] = {}

    def add(self, plugin_name: str, hook: str, exc: BaseException) -> None:
        """Keep (and log) ``exc`` raised by ``plugin_name`` in ``hook``, or count it."""
        key = (plugin_name, hook)
        kept = self._kept.get(key, 0)
        if kept < KEPT_PER_HOOK:
            self._kept[key] = kept + 1
            self._last[key] = len(self)
            exc, raised_at = _without_frames(exc)
            self.append(PluginFault(plugin_name, hook, exc))
            log_fault(plugin_name, hook, exc, raised_at)
            return
        index = self._last[key]
        last = self[index]
        self[index] = replace(last, more=last.more + 1)
        if not last.more:
            logger.warning(
                "plugin.error.repeated",
                plugin=plugin_name,
                hook=hook,
                note=f"later faults of this plugin in {hook} are counted, not kept or logged",
            )


def _without_frames(exc: BaseException) -> tuple[BaseException, str | None]:
    """``exc`` without its traceback, and where it was raised (``file:line in function``).

    A traceback keeps its frames, and a frame its variables and its caller's frame: the
    delivery's, which holds the payload (cleared frames still point at their callers). The
    exceptions the plugin handled on the way (``__context__``, ``__cause__``, caught in one
    of its frames) lose theirs too; one raised before the hook ran (the engine's, while it
    fires ``sampling_loop_end`` on an error) is not the plugin's and is left as it is.
    """
    tb = exc.__traceback__
    if tb is None:
        return exc, None
    last = traceback.extract_tb(tb)[-1]
    frames = _frames(tb.tb_next)  # the plugin's: below the delivery's frame that caught it
    exc.__traceback__ = None
    chain = [exc.__cause__, exc.__context__]
    seen: set[int] = {id(exc)}  # by id: a chain set by hand may loop
    while chain:
        error = chain.pop()
        if error is None or id(error) in seen or error.__traceback__ is None:
            continue
        seen.add(id(error))
        if not any(error.__traceback__.tb_frame is frame for frame in frames):
            continue  # caught outside the plugin: not its own
        frames += _frames(error.__traceback__)
        error.__traceback__ = None
        chain += (error.__cause__, error.__context__)
    return exc, f"{last.filename}:{last.lineno} in {last.name}"


def _frames(tb: TracebackType | None) -> list[FrameType]:
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames
