"""OpenTelemetry GenAI client metrics: token usage and operation duration per backend call.

Two histograms, as the GenAI semantic conventions define them:

* ``gen_ai.client.token.usage`` (``{token}``): one measurement per backend call and token
  type (``gen_ai.token.type`` = ``input`` / ``output``), for calls that returned;
* ``gen_ai.client.operation.duration`` (``s``): one per backend call, failed ones included
  (with ``error.type``); a call cut short because the loop ended is recorded with
  ``error.type="cancelled"``.

Both carry ``gen_ai.operation.name`` (``chat``), ``gen_ai.provider.name``,
``gen_ai.request.model`` when the request names one and ``gen_ai.response.model`` when
the answer does, and use the bucket boundaries the conventions advise.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from opentelemetry import metrics

__all__ = ["DURATION_BUCKETS", "TOKEN_BUCKETS", "GenAIMetrics"]

TOKEN_BUCKETS = [4**i for i in range(14)]  # 1, 4, 16, ... 67108864
DURATION_BUCKETS = [0.01 * 2**i for i in range(14)]  # 0.01, 0.02, ... 81.92


class GenAIMetrics:
    """The two GenAI client histograms, on ``meter_provider`` (default: the global one)."""

    def __init__(self, meter_provider: Any = None) -> None:
        try:
            version = metadata.version("samplehooks")
        except metadata.PackageNotFoundError:  # pragma: no cover - running from a checkout
            version = None
        meter = metrics.get_meter("samplehooks", version, meter_provider=meter_provider)
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )

    def record_call(
        self,
        attributes: dict[str, Any],
        duration_s: float,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        error_type: str | None = None,
    ) -> None:
        """Record one backend call: its duration, and its tokens when it returned."""
        if error_type is not None:
            attributes = {**attributes, "error.type": error_type}
        self.duration.record(max(duration_s, 0.0), attributes)
        if error_type is None:
            for kind, count in (("input", input_tokens), ("output", output_tokens)):
                if count is not None:
                    self.token_usage.record(count, {**attributes, "gen_ai.token.type": kind})
