"""Requirements: what an answer must satisfy, and the checks that decide it.

::

    from sampling_core.requirements import max_words, equals_field

This package's ``__all__`` is its public surface. Its modules: ``checks`` (``Requirement``
and the built-in checks), ``fields`` (checks that compare with the dataset line),
``context`` (``CheckContext``, what a check taking ``(text, context)`` is given, and
``CannotDecide``, what it raises when that lacks what it needs),
``formats`` (JSON answers to a schema, and ``format=``) and ``linear_regex`` (regular
expressions that run in linear time; internal).
"""

from sampling_core.requirements.checks import (
    Check,
    Prefix,
    Requirement,
    ValidationResult,
    as_requirements,
    contains,
    is_json,
    matches,
    max_chars,
    max_words,
    min_words,
    not_contains,
    parses_as,
)
from sampling_core.requirements.context import CannotDecide, CheckContext
from sampling_core.requirements.fields import contains_field, equals_field, normalize_text
from sampling_core.requirements.formats import matches_schema
from sampling_core.requirements.judge import llm_judge

__all__ = [
    "CannotDecide",
    "Check",
    "CheckContext",
    "Prefix",
    "Requirement",
    "ValidationResult",
    "as_requirements",
    "contains",
    "contains_field",
    "equals_field",
    "is_json",
    "llm_judge",
    "matches",
    "matches_schema",
    "max_chars",
    "max_words",
    "min_words",
    "normalize_text",
    "not_contains",
    "parses_as",
]
