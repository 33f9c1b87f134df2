"""A finished run's kept attempts checked against new requirements, with no generation.

Internal: a part of batch runs, whose public surface is ``sampling_core.runs.__all__``; each
module's ``__all__`` is what it offers the others. Its modules, downhill (each imports only
those after it): ``rescoring``, ``rescore_record``.

- ``rescoring`` — Rescoring a run: every kept attempt checked against new requirements, with no
  backend call.
- ``rescore_record`` — One record rescored: its kept attempts checked again, judged and picked
  as the engine would.
"""
