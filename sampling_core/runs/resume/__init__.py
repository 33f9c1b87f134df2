"""Continuing a run: whether the directory is what it says it is, and what may change.

Internal: a part of batch runs, whose public surface is ``sampling_core.runs.__all__``; each
module's ``__all__`` is what it offers the others. Its modules, downhill (each imports only
those after it): ``resume``, ``integrity``.

- ``resume`` — Resuming a run: the effective config file, the config comparison, lineage notes,
  refusals.
- ``integrity`` — Is this run directory what it says it is? Records of this run only, and the
  same settings.
"""
