"""Reading what OpenTelemetry's in-memory metric reader collected."""

from __future__ import annotations

from typing import Any


def metrics_by_name(reader: Any) -> dict[str, Any]:
    """Every metric ``reader`` (an ``InMemoryMetricReader``) collected so far, by name."""
    return {
        metric.name: metric
        for resource in reader.get_metrics_data().resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
