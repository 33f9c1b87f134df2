"""The run directory on disk: its files, the records and their whole texts in whole lines, what the
files must hold, and the index a run is read through.

Internal: a part of batch runs, whose public surface is ``sampling_core.runs.__all__``; each
module's ``__all__`` is what it offers the others. Its modules, downhill (each imports only
those after it): ``index``, ``record_fields``, ``meta_hashes``, ``store``, ``record``,
``record_writer``, ``shapes``, ``attempt_entry``, ``caps``, ``kept_texts``, ``files``,
``votes``.

- ``index`` — A run's records as tables on disk, so that reading a run takes memory bounded by
  what it shows.
- ``record_fields`` — A ``sample()`` call's outcome as a record's fields: what a run writes of
  each prompt.
- ``meta_hashes`` — ``meta.json`` read without holding its per-prompt hashes: they are handed on
  as they are read.
- ``store`` — The run directory: its files, the append-only records, progress, and the run lock.
- ``record`` — The run record and its attempt entry: what a line of ``records.jsonl`` holds,
  defined once.
- ``record_writer`` — Appending records to ``records.jsonl`` (and their whole texts to
  ``texts.jsonl``) in whole lines, and holding interrupts meanwhile.
- ``shapes`` — What a run directory's meta and progress files must hold to be read back
  (records: :func:`sampling_core.runs.store.record.read_record`).
- ``attempt_entry`` — A record's attempt entry: one attempt as a run keeps it, in the one JSON
  shape of an attempt.
- ``caps`` — How big one record may get: long texts and long attempt lists are cut, with a note.
- ``kept_texts`` — Every attempt's whole text, kept beside the records in ``texts.jsonl``.
- ``files`` — File helpers of the run directory: finding the last whole line, clearing stale
  staging.
- ``votes`` — The answers of a prompt's samples, as a run keeps them for maj@k.
"""
