"""A run directory read once at the end of a session, for everything the end needs.

``run_end``'s payload (the report, and the rows a plugin may iterate), the summary the run
returns and ``samplehooks run`` prints, and the report it prints are all answered by one
:class:`~sampling_core.runs.store.index.RunIndex`, built on first use after the session's last
record is written (:class:`RunReading`), so ``records.jsonl`` is read once however many
plugins look at the end of the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sampling_core.runs.reports.report import RunReport, iter_rows, report_of
from sampling_core.runs.store.index import RunIndex
from sampling_core.runs.store.store import RunDirectory

__all__ = ["ReportRows", "RunReading"]


class ReportRows:
    """Each prompt's report row as a dict, read from the index each time it is iterated
    (what ``report --json`` lists under ``prompts``, in the order of the records)."""

    def __init__(self, index: RunIndex) -> None:
        self._index = index

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for row in iter_rows(self._index):
            yield row.as_dict()

    def __repr__(self) -> str:
        return f"ReportRows({self._index.run_dir.path})"


class RunReading:
    """The run in ``run_dir`` read once, when first asked (:meth:`index`), then kept until
    :meth:`close`.

    A resumed session read the run at its start: its index, given as ``resumed`` (which
    this then owns), took in every record the session appended, and once the session's
    records are all in the file (:meth:`written_whole`) it answers for the run as it is
    then, with no new reading; otherwise (the session's last write failed) the run is
    read again."""

    def __init__(self, run_dir: RunDirectory, resumed: RunIndex | None = None) -> None:
        self.run_dir = run_dir
        self._index: RunIndex | None = None
        self._resumed = resumed
        self._report: RunReport | None = None

    def written_whole(self, index: RunIndex) -> None:
        """Every record the session appended to ``index`` is in the file: use it."""
        if index is self._resumed and self._index is None:
            index.refresh()
            self._index, self._resumed = index, None

    def index(self) -> RunIndex:
        """The run's index (built on the first call, unless a resumed session's is
        complete: the one reading of its records)."""
        if self._index is None:
            self._close_resumed()
            self._index = RunIndex.build(self.run_dir)
        return self._index

    def report(self) -> RunReport:
        """The run's report (its first prompts not ok; the rows are in :meth:`rows`)."""
        if self._report is None:
            self._report = report_of(self.index())
        return self._report

    def rows(self) -> ReportRows:
        """Each prompt's row, read from the index as it is iterated."""
        return ReportRows(self.index())

    def close(self) -> None:
        """Close the index (its file goes with it)."""
        self._close_resumed()
        if self._index is not None:
            self._index.close()
            self._index = None

    def _close_resumed(self) -> None:
        if self._resumed is not None:
            self._resumed.close()
            self._resumed = None
