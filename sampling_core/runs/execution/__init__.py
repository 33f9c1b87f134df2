"""Running a batch: the runner, its sessions and prompts, the run hooks, the progress bar, the
run's response cache and the Ray executor.

Internal: a part of batch runs, whose public surface is ``sampling_core.runs.__all__``; each
module's ``__all__`` is what it offers the others. Its modules, downhill (each imports only
those after it): ``runner``, ``ray_executor``, ``ray_worker``, ``session``, ``progress``,
``prompt_run``, ``run_cache``, ``run_hooks``.

- ``runner`` — The batch runner: every prompt of a dataset through one ``Sampler``, into a run
  directory.
- ``ray_executor`` — The Ray executor (``run.executor: ray``): the run's prompts sampled by
  workers on a cluster.
- ``ray_worker`` — The Ray executor's worker: a Ray actor that samples the prompts the driver
  sends it.
- ``session`` — One session of a batch run: the prompts still to do, and the records, progress
  and display.
- ``progress`` — The batch progress bar on stderr: one bar over the run's prompts, with
  ok/failed/error.
- ``prompt_run`` — One prompt of a batch run: the record a prompt ends in.
- ``run_cache`` — A batch run's response cache (``run.cache``, ``--cache``): opened before
  anything is written.
- ``run_hooks`` — The run hooks of one session: ``run_start``, ``prompt_start``, ``prompt_end``,
  ``run_end``.
"""
