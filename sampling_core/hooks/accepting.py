"""What the engine accepts of a plugin's implementation, checked when it is registered.

Wrappers (``@hookimpl(wrapper=True)``: a generator, sync or async) on the call hooks only;
no old-style ``hookwrapper``; known hooks (or ``optionalhook``); ``@background`` on
observe-only hooks only. An async wrapper is handed to pluggy as a plain implementation
(:func:`async_wrapper_opts`), because pluggy accepts only sync generators as wrappers.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from hook_specs.contract import CALL_HOOKS, OBSERVE_ONLY_HOOKS, may_write
from hook_specs.markers import is_background
from hook_specs.names import HookName
from sampling_core.errors import PluginError
from sampling_core.hooks.table import ASYNC_WRAPPER, is_async_wrapper, is_wrapper

__all__ = ["HOOK_VALUES", "async_wrapper_opts", "check_implementation"]

HOOK_VALUES = frozenset(hook.value for hook in HookName)
"""Every hook's name (an implementation of another name is refused unless optional)."""
_CALL_HOOK_VALUES = frozenset(hook.value for hook in CALL_HOOKS)


def async_wrapper_opts(plugin: Any, name: str, opts: Any) -> Any:
    """``opts`` as pluggy parsed them, or for an async ``wrapper=True`` implementation a copy
    handed to pluggy as a plain one, marked :data:`~sampling_core.hooks.table.ASYNC_WRAPPER`
    (the marker's own dict is never changed)."""
    if opts is None or not opts.get("wrapper"):
        return opts
    function = getattr(plugin, name, None)
    if function is None or not is_async_wrapper(function):
        return opts
    return {**opts, "wrapper": False, ASYNC_WRAPPER: True}


_CALL_HOOK_NAMES = " and ".join(sorted(hook.value for hook in CALL_HOOKS))


def check_implementation(
    plugin_name: str, hook_name: str, function: Callable[..., Any], opts: Mapping[str, Any]
) -> None:
    """Refuse what the engine cannot honour: wrappers outside the call hooks, unknown hooks,
    misplaced ``@background`` (``opts``: the implementation's ``@hookimpl`` options, as the
    registry's manager parsed them)."""
    if hook_name in _CALL_HOOK_VALUES:
        _check_call_hook_implementation(plugin_name, hook_name, function, opts)
    elif is_wrapper(opts) or opts.get("hookwrapper"):
        raise PluginError(
            plugin_name,
            hook_name,
            f"wrapper implementations are accepted on the call hooks only ({_CALL_HOOK_NAMES}); "
            "here pair a start hook with its end (sampling_loop_start with sampling_loop_end, "
            "generation_pre_call with generation_post_call / generation_error / "
            "generation_cancelled), or wrap the work in a call hook",
        )
    if hook_name not in HOOK_VALUES:
        if not opts.get("optionalhook"):
            raise PluginError(
                plugin_name,
                hook_name,
                f"unknown hook {hook_name!r}; hooks are: {', '.join(sorted(HOOK_VALUES))} "
                "(mark it @hookimpl(optionalhook=True) if that is intended)",
            )
        return
    if is_background(function) and may_write(hook_name):
        raise PluginError(
            plugin_name,
            hook_name,
            "@background is only for observe-only hooks ("
            f"{', '.join(sorted(OBSERVE_ONLY_HOOKS))}): this hook's "
            "changes must be made before the engine goes on",
        )


def _check_call_hook_implementation(
    plugin_name: str, hook_name: str, function: Callable[..., Any], opts: Mapping[str, Any]
) -> None:
    """A call hook's implementation: a plain function, or a wrapper that is a generator (sync
    or async); not an old-style ``hookwrapper``, not ``@background``."""
    if opts.get("hookwrapper"):
        raise PluginError(
            plugin_name,
            hook_name,
            "old-style hookwrapper=True is not supported; use @hookimpl(wrapper=True): "
            "`result = yield` (sync) or `outcome = yield` (async generator)",
        )
    if is_background(function):
        raise PluginError(
            plugin_name, hook_name, "@background is refused on a call hook: it wraps the work"
        )
    if is_wrapper(opts):
        generator = inspect.isgeneratorfunction(inspect.unwrap(function))
        if not (generator or is_async_wrapper(function)):
            raise PluginError(
                plugin_name,
                hook_name,
                "a wrapper=True implementation is a generator function with one `yield` "
                "(def ...: result = yield, or async def ...: outcome = yield)",
            )
    elif is_async_wrapper(function):
        raise PluginError(
            plugin_name,
            hook_name,
            "an async generator here is a wrapper: mark it @hookimpl(wrapper=True)",
        )
