"""The engine: one ``sample()`` call from its budgets to its result.

Internal: import the public names from :mod:`sampling_core`. Its modules, downhill:
``sampler`` (the public ``Sampler``, ``sample``, ``sample_sync``; validates the arguments
and budgets once) → ``loop`` (one call: subsamples, attempts, hooks fired, early exit;
``loop_end`` builds its end's fields) → ``generation_step`` (one backend call of an
attempt: ``generation_call`` around it, streaming, the prefix verdict) → ``tally`` (what a
call recorded, every cancellation, the pick) and ``subsample_tasks`` (the tasks, in one
task group) → ``settings``, ``budgets``, ``seeds``, ``context`` (the current attempt in
contextvars), ``results``, ``suspension``. Transport retries' policy is the backends'
(:mod:`sampling_core.backends.transport`).
"""
