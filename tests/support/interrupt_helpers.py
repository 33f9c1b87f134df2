"""Child processes that a test interrupts with Ctrl-C (SIGINT), however the suite was started.

A shell starts a background job (``pytest ... &``) with SIGINT ignored, and an ignored signal
stays ignored across ``exec``: a Python child then installs no ``KeyboardInterrupt`` handler,
and a test's Ctrl-C does nothing. A test that sends SIGINT starts its Python child with
:func:`python_command`, which gives the child Ctrl-C handling as in a terminal, whatever
its parent ignores. (A test that raises SIGINT in its own process asks for the
``ctrl_c_raises`` fixture of ``conftest.py`` instead.)
"""

from __future__ import annotations

import sys

__all__ = ["python_command"]

_AS_IN_A_TERMINAL = """
import runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C raises KeyboardInterrupt
option, target = sys.argv[1:3]
del sys.argv[1:3]
if option == "-m":
    sys.argv[0] = target
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    sys.argv[0] = "-c"
    exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})
"""


def python_command(option: str, target: str, *args: str) -> list[str]:
    """The command line of ``python -c SCRIPT ARGS`` or ``python -m MODULE ARGS`` (``option``
    is ``-c`` or ``-m``) for a child that a Ctrl-C interrupts: it handles SIGINT as Python
    does when started from a terminal, whatever its parent ignores."""
    if option not in ("-c", "-m"):
        raise ValueError(f"python_command: -c or -m, not {option!r}")
    return [sys.executable, "-c", _AS_IN_A_TERMINAL, option, target, *args]
