"""The errors a batch run raises on purpose; the CLI turns each into a message and exit code 2."""

from __future__ import annotations

from sampling_core.errors import SamplehooksError

__all__ = ["ConfigError", "DatasetError", "ResumeRefused", "RunDirError", "RunError"]


class RunError(SamplehooksError):
    """Something the user can fix: a bad config, dataset or run directory, a refused resume.

    Raised before anything is written to the run directory.
    """


class ConfigError(RunError):
    """The run config cannot be read or is invalid."""


class DatasetError(RunError):
    """The dataset cannot be read, or a line of it is malformed (the message names the line)."""


class RunDirError(RunError):
    """The run directory is missing, not a run directory, damaged, or already holds a run."""


class ResumeRefused(RunError):
    """A resume would change results: ``differences`` lists ``(path, old, new)``."""

    def __init__(self, message: str, differences: list[tuple[str, str, str]]) -> None:
        super().__init__(message)
        self.differences = differences
