"""The ``tracing`` plugin: one structlog event per hook call, and OpenTelemetry spans.

Enable it by name (``plugins=["tracing"]``, ``--plugin tracing``,
``SAMPLEHOOKS_PLUGINS=tracing``) or as an object::

    from builtin_plugins.tracing import TracingPlugin

    result = await sample(prompt, backend=backend, plugins=[TracingPlugin()])

Events are emitted on the ``samplehooks.trace`` logger and carry data, not prose:
``sampling_id``, ``iteration``, ``subsample_index``, ``attempt``, ``sequence``, ``passed``,
``latency_s`` and token counts where the hook knows them. Prompts and generated text are
left out unless ``capture_content=True``. The plugin never configures structlog: an
application that configured it decides how (and whether) events are rendered; when
nothing configured structlog, the events are printed on stderr (never stdout).

When the ``otel`` extra is installed, the same plugin also emits OpenTelemetry spans (see
:mod:`builtin_plugins.otel`): pass ``otel=False`` to turn them off, ``otel=True`` to
require them.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import structlog

from hook_specs import (
    AttemptPayload,
    CallPayload,
    GenerationCallPayload,
    GenerationCancelledPayload,
    GenerationChunkPayload,
    GenerationErrorPayload,
    GenerationPostCallPayload,
    GenerationPreCallPayload,
    PromptEndPayload,
    PromptStartPayload,
    RunEndPayload,
    RunStartPayload,
    SamplingCallPayload,
    SamplingIterationPayload,
    SamplingLoopEndPayload,
    SamplingLoopStartPayload,
    SamplingRepairPayload,
    SamplingValidatePayload,
    hookimpl,
)
from hook_specs.records import count_passed, failure_reasons
from sampling_core.errors import exception_text
from sampling_core.redaction import ScrubbedLogger
from sampling_core.runs import read_record

__all__ = ["EVENT_NAMES", "LOGGER_NAME", "TracingPlugin"]

LOGGER_NAME = "samplehooks.trace"
"""The structlog logger name every tracing event is emitted on."""

EVENT_NAMES = {
    "sampling_loop_start": "sampling.loop.start",
    "sampling_validate": "sampling.validate",
    "sampling_iteration": "sampling.iteration",
    "sampling_repair": "sampling.repair",
    "sampling_loop_end": "sampling.loop.end",
    "generation_pre_call": "generation.pre_call",
    "generation_post_call": "generation.post_call",
    "generation_error": "generation.error",
    "run_start": "run.start",
    "prompt_start": "prompt.start",
    "prompt_end": "prompt.end",
    "run_end": "run.end",
    "generation_chunk": "generation.chunk",
    "sampling_call": "sampling.call",
    "generation_call": "generation.call",
    "generation_cancelled": "generation.cancelled",
}
"""The event name emitted for each hook."""

_TRUE = {"1", "true", "yes", "on"}


class TracingPlugin:
    """Emits one structlog event per hook call, and OpenTelemetry spans when available.

    ``capture_content`` adds prompts (``messages``), generated ``text`` and failure
    reasons to the events (and the spans); off by default, or as
    ``SAMPLEHOOKS_TRACE_CONTENT=1`` says when the plugin is enabled by name.
    ``otel``: ``None`` (default) emits spans when ``opentelemetry`` is importable,
    ``True`` requires it, ``False`` never emits spans. ``tracer_provider`` and
    ``meter_provider`` are passed on to :class:`~builtin_plugins.otel.OtelPlugin`
    (default: the global providers).
    """

    affects_results = False  # an observer: may be added, removed or reconfigured on --resume
    reads_environment = ("SAMPLEHOOKS_TRACE_CONTENT",)

    def __init__(
        self,
        capture_content: bool | None = None,
        *,
        otel: bool | None = None,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        logger_name: str = LOGGER_NAME,
    ) -> None:
        if capture_content is None:
            capture_content = os.environ.get("SAMPLEHOOKS_TRACE_CONTENT", "").lower() in _TRUE
        self.capture_content = capture_content
        self._configured_logger = ScrubbedLogger(structlog.get_logger(logger_name))
        self._stderr_logger: Any = None
        self._stderr: Any = None
        self.otel: Any = None
        if otel or otel is None:
            try:
                from builtin_plugins.otel import OtelPlugin
            except ImportError as exc:
                if otel:
                    raise ImportError(
                        "TracingPlugin(otel=True) needs OpenTelemetry: "
                        "pip install 'samplehooks[otel]'"
                    ) from exc
            else:
                self.otel = OtelPlugin(
                    capture_content=capture_content,
                    tracer_provider=tracer_provider,
                    meter_provider=meter_provider,
                )

    @property
    def logger(self) -> Any:
        """Where events go: the application's structlog setup, else stderr.

        An application that configured structlog decides everything (rendering, level,
        destination). One that did not still sees the events, on stderr with structlog's
        default rendering, so a script's stdout stays its own.
        """
        if structlog.is_configured():
            return self._configured_logger
        if self._stderr is not sys.stderr:  # created once per stream (tests swap it)
            config = structlog.get_config()
            self._stderr = sys.stderr
            self._stderr_logger = ScrubbedLogger(
                structlog.wrap_logger(
                    structlog.PrintLogger(sys.stderr),
                    processors=config["processors"],
                    wrapper_class=config["wrapper_class"],
                    context_class=config["context_class"],
                )
            )
        return self._stderr_logger

    @hookimpl
    def sampling_loop_start(self, payload: SamplingLoopStartPayload) -> None:
        """Emit ``sampling.loop.start`` (and open the loop's span)."""
        if self.otel is not None:
            self.otel.sampling_loop_start(payload)
        extra = {"messages": payload.messages} if self.capture_content else {}
        self.logger.info(
            "sampling.loop.start",
            **_call_fields(payload),
            loop_budget=payload.loop_budget,
            concurrency_budget=payload.concurrency_budget,
            selection=payload.selection,
            seed=payload.seed,
            requirement_count=len(payload.requirements),
            **extra,
        )

    @hookimpl
    def generation_pre_call(self, payload: GenerationPreCallPayload) -> None:
        """Emit ``generation.pre_call`` (and open the backend call's span)."""
        if self.otel is not None:
            self.otel.generation_pre_call(payload)
        extra = {"messages": payload.messages} if self.capture_content else {}
        self.logger.debug(
            "generation.pre_call",
            **_attempt_fields(payload),
            retry=payload.retry,
            **extra,
        )

    @hookimpl
    def generation_post_call(self, payload: GenerationPostCallPayload) -> None:
        """Emit ``generation.post_call`` with latency and the tokens spent (none for an
        answer the cache or another plugin gave: ``answered_by`` names it)."""
        generation = payload.generation
        extra = {"text": generation.text} if self.capture_content else {}
        if generation.answered_by is not None:
            extra["answered_by"] = generation.answered_by
        spent = generation.spent
        self.logger.debug(
            "generation.post_call",
            **_attempt_fields(payload),
            retry=payload.retry,
            latency_s=payload.latency_s,
            input_tokens=spent.input_tokens,
            output_tokens=spent.output_tokens,
            finish_reason=generation.finish_reason,
            model=generation.model,
            **extra,
        )

    @hookimpl
    def generation_chunk(self, payload: GenerationChunkPayload) -> None:
        """Emit ``generation.chunk`` (debug): a piece of a streamed generation."""
        extra: dict[str, Any] = {"delta": payload.delta} if self.capture_content else {}
        if payload.answered_by is not None:
            extra["answered_by"] = payload.answered_by
        self.logger.debug(
            "generation.chunk",
            **_attempt_fields(payload),
            retry=payload.retry,
            index=payload.index,
            chars=len(payload.text),
            **extra,
        )

    @hookimpl
    def generation_error(self, payload: GenerationErrorPayload) -> None:
        """Emit ``generation.error``: a warning when the call is not retried."""
        if self.otel is not None:
            self.otel.generation_error(payload)
        log = self.logger.info if payload.will_retry else self.logger.warning
        log(
            "generation.error",
            **_attempt_fields(payload),
            retry=payload.retry,
            error_type=payload.error_type,
            error=exception_text(payload.exception),
            will_retry=payload.will_retry,
            retry_in_s=payload.retry_in_s,
        )

    @hookimpl
    def generation_cancelled(self, payload: GenerationCancelledPayload) -> None:
        """Emit ``generation.cancelled``: a backend call cut short, and why, with the tokens
        it spent (none when a plugin was answering instead: ``answered_by`` names it), and
        end its spans as cancelled."""
        if self.otel is not None:
            self.otel.generation_cancelled(payload)
        extra: dict[str, Any] = {"text": payload.text} if self.capture_content else {}
        if payload.answered_by is not None:
            extra["answered_by"] = payload.answered_by
        self.logger.info(
            "generation.cancelled",
            **_attempt_fields(payload),
            retry=payload.retry,
            reason=payload.reason,
            latency_s=payload.latency_s,
            output_tokens=payload.usage.output_tokens,
            **extra,
        )

    @hookimpl(wrapper=True)
    def sampling_call(self, payload: SamplingCallPayload) -> Any:
        """Emit ``sampling.call`` (debug) as the call's work begins (the call's span is the
        current span while it runs)."""
        self.logger.debug("sampling.call", **_call_fields(payload))
        if self.otel is not None:
            return (yield from self.otel.sampling_call(payload))
        return (yield)

    @hookimpl(wrapper=True)
    def generation_call(self, payload: GenerationCallPayload) -> Any:
        """Emit ``generation.call`` (debug) as the backend call begins (in its span)."""
        self.logger.debug("generation.call", **_attempt_fields(payload), retry=payload.retry)
        if self.otel is not None:
            return (yield from self.otel.generation_call(payload))
        return (yield)

    @hookimpl(trylast=True)
    def sampling_validate(self, payload: SamplingValidatePayload) -> None:
        """Emit ``sampling.validate``: an attempt's verdicts, as the plugins before left them."""
        results = payload.well_formed_results()
        if results is None:  # a plugin wrote something else: the engine names it
            return
        passed = count_passed(results)
        extra: dict[str, Any] = {}
        if self.capture_content:
            extra = {"failure_reasons": failure_reasons(results)}
        self.logger.debug(
            "sampling.validate",
            **_attempt_fields(payload),
            passed=passed == len(results),
            valid_count=passed,
            total_count=len(results),
            **extra,
        )

    @hookimpl
    def sampling_iteration(self, payload: SamplingIterationPayload) -> None:
        """Emit ``sampling.iteration``: one completed attempt, its verdict and cost."""
        if self.otel is not None:
            self.otel.sampling_iteration(payload)
        extra = {"text": payload.text} if self.capture_content else {}
        self.logger.info(
            "sampling.iteration",
            **_attempt_fields(payload),
            passed=payload.passed,
            valid_count=payload.valid_count,
            total_count=payload.total_count,
            latency_s=payload.latency_s,
            input_tokens=payload.usage.input_tokens,
            output_tokens=payload.usage.output_tokens,
            stopped_early=payload.stopped_early,
            provenance=payload.provenance.as_json(),
            **extra,
        )

    @hookimpl
    def sampling_repair(self, payload: SamplingRepairPayload) -> None:
        """Emit ``sampling.repair``: a failed attempt is about to be retried."""
        if self.otel is not None:
            self.otel.sampling_repair(payload)
        extra: dict[str, Any] = {}
        if self.capture_content:
            extra = {
                "text": payload.text,
                "failure_reasons": payload.failure_reasons,
                "messages": payload.messages,
            }
        self.logger.info(
            "sampling.repair",
            **_attempt_fields(payload),
            next_attempt=payload.next_attempt,
            failed_checks=len(payload.failure_reasons),
            **extra,
        )

    @hookimpl
    def sampling_loop_end(self, payload: SamplingLoopEndPayload) -> None:
        """Emit ``sampling.loop.end`` with the outcome and the call's totals."""
        if self.otel is not None:
            self.otel.sampling_loop_end(payload)
        extra: dict[str, Any] = {"text": payload.text} if self.capture_content else {}
        if payload.exception is not None:
            extra["error_type"] = type(payload.exception).__name__
        self.logger.info(
            "sampling.loop.end",
            **_call_fields(payload),
            success=payload.success,
            stop_reason=payload.stop_reason,
            iterations_used=payload.iterations_used,
            cancelled=payload.cancelled,
            not_started=payload.not_started,
            error_count=payload.error_count,
            loop_budget=payload.loop_budget,
            concurrency_budget=payload.concurrency_budget,
            input_tokens=payload.usage.input_tokens,
            output_tokens=payload.usage.output_tokens,
            elapsed_s=payload.elapsed_s,
            picked=payload.picked,
            failure_reason=payload.failure_reason,
            **extra,
        )

    # -- a batch run's hooks

    @hookimpl
    def run_start(self, payload: RunStartPayload) -> None:
        """Emit ``run.start``: a session of a batch run begins."""
        self.logger.info(
            "run.start",
            run_dir=payload.run_dir,
            session=payload.session,
            resumed=payload.resumed,
            executor=payload.executor,
            total=payload.total,
            done=payload.done,
        )

    @hookimpl
    def prompt_start(self, payload: PromptStartPayload) -> None:
        """Emit ``prompt.start``: a dataset prompt is about to be sampled."""
        extra = {"row": payload.row} if self.capture_content else {}
        self.logger.info("prompt.start", prompt_key=payload.key, session=payload.session, **extra)

    @hookimpl
    def prompt_end(self, payload: PromptEndPayload) -> None:
        """Emit ``prompt.end``: the prompt's record is written (read as every reader reads
        one); ``failure_reason`` is its one failure label, the loop end's."""
        record = read_record(payload.record)
        if record is None:  # none was written: the session ended first ("interrupted")
            raw = payload.record
            self.logger.info(
                "prompt.end",
                prompt_key=payload.key,
                session=payload.session,
                status=raw.get("status"),
                failure_reason=raw.get("reason"),
            )
            return
        self.logger.info(
            "prompt.end",
            prompt_key=payload.key,
            session=payload.session,
            status=record.status,
            sampling_id=record.sampling_id,
            attempts=record.count("used"),
            failure_reason=record.reason,
        )

    @hookimpl
    def run_end(self, payload: RunEndPayload) -> None:
        """Emit ``run.end``: the session is over (a warning when it was interrupted)."""
        totals = payload.totals
        log = self.logger.warning if payload.interrupted else self.logger.info
        log(
            "run.end",
            run_dir=payload.run_dir,
            session=payload.session,
            interrupted=payload.interrupted,
            error=payload.error,
            elapsed_s=payload.elapsed_s,
            done=totals.get("done"),
            ok=totals.get("ok"),
            failed=totals.get("failed"),
            errored=totals.get("error"),  # prompts whose record is an error
            success_rate=totals.get("success_rate"),
        )


def _call_fields(payload: CallPayload) -> dict[str, Any]:
    """The fields every event of a call carries (``prompt_key`` inside a batch run)."""
    fields: dict[str, Any] = {
        "sampling_id": payload.sampling_id,
        "strategy_name": payload.strategy_name,
    }
    if payload.prompt_key is not None:
        fields["prompt_key"] = payload.prompt_key
    return fields


def _attempt_fields(payload: AttemptPayload) -> dict[str, Any]:
    """The fields every per-attempt event carries."""
    return {
        **_call_fields(payload),
        "iteration": payload.iteration,
        "subsample_index": payload.subsample_index,
        "attempt": payload.attempt,
        "sequence": payload.sequence,
    }
