"""What a run's records say: a run read once at its end, the summary, the report, two runs
compared, and the files a command writes.

Internal: a part of batch runs, whose public surface is ``sampling_core.runs.__all__``; each
module's ``__all__`` is what it offers the others. Its modules, downhill (each imports only
those after it): ``compare``, ``outputs``, ``run_reading``, ``report``, ``summary``.

- ``compare`` — Two runs compared prompt by prompt (``samplehooks compare A B``): is B better
  than A?
- ``outputs`` — Writing a file a command makes (a view page, a report): never through a link,
  never over a run's own files, never half-written.
- ``run_reading`` — A run directory read once at the end of a session, for everything the end
  needs.
- ``report`` — A run's report: totals, one row per prompt, pass@k and pass^k, as text or JSON
  (``samplehooks report``).
- ``summary`` — The end-of-run summary, computed from a run directory's records (``samplehooks
  report``).
"""
