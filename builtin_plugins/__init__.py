"""samplehooks' built-in plugins: ordinary plugins, enabled by name.

Each is an entry point of group ``samplehooks`` in samplehooks' own distribution, loaded
only when named (``plugins=["tracing"]``, ``SAMPLEHOOKS_PLUGINS=tracing``), and uses only
``hook_specs`` and ``sampling_core``'s public API:

* ``tracing`` — :class:`builtin_plugins.tracing.TracingPlugin`: a structlog event per hook
  call, and OpenTelemetry spans with the ``otel`` extra (:mod:`builtin_plugins.otel`).
* ``ordering`` — :class:`builtin_plugins.ordering.OrderingChecker`: the reference checker
  of iteration ordering.
* ``budget_guard`` — :class:`builtin_plugins.budget_guard.BudgetGuard`: budget caps and
  generation/token ceilings.
* ``progress`` — :class:`builtin_plugins.progress.ProgressPlugin`: rich progress bars.
* ``recorder`` — :class:`builtin_plugins.recorder.RecorderPlugin`: every hook event as a
  JSON line.
* ``mlflow`` — :class:`builtin_plugins.mlflow_export.MlflowExporter`: each batch run as an
  MLflow run (the ``mlflow`` extra; MLflow is imported when a run starts).
* ``cache`` — :class:`builtin_plugins.cache.ResponseCachePlugin`: the response cache, on
  ``generation_call`` (``Sampler(cache=...)``, ``run.cache`` and ``--cache`` enable it).
* ``kinds`` — :mod:`builtin_plugins.kinds`: the built-in requirement, backend and strategy
  kinds, through the provider hooks.
* ``llm`` — :mod:`builtin_plugins.llm_bridge`: backend kind ``llm`` (the ``llm`` extra).

The modules are not imported here, so enabling one plugin imports only that one. This
package's ``__all__`` names the plugin modules; each module's ``__all__`` is its public
surface. ``otel`` (the OpenTelemetry part of ``tracing``) needs the ``otel`` extra and is
left out of ``__all__`` for that reason; ``otel_metrics`` and ``otel_attributes`` are
internal (the OTel plugin's metrics, and its spans' attributes), and so is
``budget_inputs`` (the guard's count of streams cut short).
"""

__all__ = [
    "budget_guard",
    "cache",
    "kinds",
    "llm_bridge",
    "mlflow_export",
    "ordering",
    "progress",
    "recorder",
    "tracing",
]
