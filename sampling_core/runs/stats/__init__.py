"""Estimators over a run's prompts, pure arithmetic: pass@k and pass^k, maj@k, paired differences
of two runs, and their bootstrap intervals.

Internal: a part of batch runs, whose public surface is ``sampling_core.runs.__all__``; each
module's ``__all__`` is what it offers the others. Its modules, downhill (each imports only
those after it): ``majk``, ``paired``, ``passk``, ``bootstrap``.

- ``majk`` — maj@k: the chance that the majority answer of k samples is right, estimated from n.
- ``paired`` — Paired statistics of two runs over the same prompts: the difference, its
  interval, a test.
- ``passk`` — Unbiased pass@k and pass^k over a run's prompts, with bootstrap confidence
  intervals.
- ``bootstrap`` — The bootstrap of a mean over prompts, from how many prompts share each value.
"""
