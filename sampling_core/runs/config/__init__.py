"""What a run is made from: the run config, how it is read and classified for resume, the labelled
walk of what a run depends on, the engine objects it builds and the dataset.

Internal: a part of batch runs, whose public surface is ``sampling_core.runs.__all__``; each
module's ``__all__`` is what it offers the others. Its modules, downhill (each imports only
those after it): ``dataset``, ``labelled``, ``loading``, ``classification``, ``components``,
``config``.

- ``dataset`` — Reading a JSONL dataset: one prompt per line, each with its key and content
  hash.
- ``labelled`` — The labelled walk: every value a run's answers or files depend on, each with
  its resume label.
- ``loading`` — Reading a run config from YAML, with errors that name the offending key's full
  path.
- ``classification`` — The resume labels of the run config, walked: the one place resume rules
  are derived from.
- ``components`` — From config to engine objects: the backend, the strategy, requirements,
  plugins, seeds.
- ``config`` — The run configuration: a validated YAML file, every field classified for resume.
"""
