"""Where the tracing plugin's events go: stderr unless the application configured structlog."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import sys
    import structlog
    from builtin_plugins.tracing import TracingPlugin
    from sampling_core import ScriptedBackend, sample_sync

    if sys.argv[1] == "configured":  # the application sends its logs to stdout, as JSON
        structlog.configure(
            processors=[structlog.processors.JSONRenderer()],
            logger_factory=structlog.PrintLoggerFactory(sys.stdout),
        )
    result = sample_sync(
        "q",
        backend=ScriptedBackend(["no", "yes"]),
        requirements=[lambda t: t == "yes"],
        loop_budget=2,
        plugins=[TracingPlugin(otel=False)],
    )
    print("ANSWER", result.text)
    """
)


def run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=120
    )


def test_unconfigured_structlog_sends_events_to_stderr_not_stdout() -> None:
    done = run("default")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ANSWER yes\n"  # the script's stdout is its own
    for event in ("sampling.loop.start", "sampling.iteration", "sampling.loop.end"):
        assert event in done.stderr
    assert "sampling_id=" in done.stderr  # structlog's own default rendering


def test_a_configured_application_keeps_full_control() -> None:
    done = run("configured")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "ANSWER yes"
    assert any('"event": "sampling.loop.end"' in line for line in lines[:-1])
    assert "sampling.loop" not in done.stderr
