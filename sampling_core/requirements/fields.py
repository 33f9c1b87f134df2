"""Checks against the dataset line: ``equals_field`` and ``contains_field``.

In a batch run every check that takes ``(text, context)`` sees the prompt's dataset line as
``context.row``; these two compare the answer with one of its fields, so a run is an eval::

    requirements:
      - equals_field: answer                      # the whole answer equals row["answer"]
      - {contains_field: capital}                 # the answer mentions row["capital"]
      - {equals_field: answer, extract: last_number}

Both compare normalised text: lower case, surrounding white space and punctuation removed,
inner white space collapsed. A failure's reason does not name the expected value unless
``reveal: true`` (a repair strategy feeds reasons back to the model, which would hand it
the answer). ``extract`` takes the part of the answer to compare first:
``last_number`` (the last number in it, e.g. ``"... so 12."`` -> ``12``) or a regular
expression with one group (the group of its first match).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable

from hook_specs.records import ValidationResult
from sampling_core.requirements.checks import Requirement
from sampling_core.requirements.context import CheckContext
from sampling_core.requirements.linear_regex import compile_linear

__all__ = ["contains_field", "equals_field", "normalize_text"]

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_EDGES = string.punctuation + string.whitespace + "\u2018\u2019\u201c\u201d"


def normalize_text(text: str) -> str:
    """Lower case, surrounding white space and punctuation stripped, inner white space one."""
    return re.sub(r"\s+", " ", str(text).lower()).strip(_EDGES)


def _number(text: str) -> str:
    cleaned = text.replace(",", "")
    try:
        value = float(cleaned)
    except ValueError:
        return text
    return str(int(value)) if value.is_integer() else str(value)


def _extractor(extract: str | None) -> Callable[[str], str | None]:
    if extract is None:
        return lambda text: text
    if extract == "last_number":

        def last_number(text: str) -> str | None:
            found = _NUMBER.findall(text)
            return _number(found[-1]) if found else None

        return last_number
    pattern = compile_linear(extract)  # a run's YAML gives it: linear time, cannot hang
    if pattern.groups != 1:
        raise ValueError(
            f"extract must be 'last_number' or a regular expression with exactly one group, "
            f"got {extract!r} ({pattern.groups} groups)"
        )

    def group(text: str) -> str | None:
        match = pattern.search(text)
        return match.group(1) if match else None

    return group


def _field_check(
    field: str, extract: str | None, *, whole: bool, reveal: bool = False
) -> Callable[[str, CheckContext], ValidationResult]:
    take = _extractor(extract)
    numeric = extract == "last_number"

    def check(text: str, context: CheckContext) -> ValidationResult:
        row = context.row
        if row is None:
            return ValidationResult(False, f"no dataset line to compare with (field {field!r})")
        if field not in row:
            return ValidationResult(False, f"the dataset line has no field {field!r}")
        expected_raw = str(row[field])
        expected = normalize_text(_number(expected_raw) if numeric else expected_raw)
        part = take(text)
        if part is None:
            return ValidationResult(False, f"nothing to extract ({extract}) from the answer")
        got = normalize_text(part)
        ok = got == expected if whole else (expected in got if expected else False)
        if ok:
            return ValidationResult(True, score=1.0)
        verb = "equal" if whole else "contain"
        # The expected value stays out of the reason unless asked: a reason is fed back to
        # the model by the repair strategies, and would hand it the answer.
        wanted = repr(expected_raw) if reveal else f"the dataset's {field!r}"
        return ValidationResult(
            False, f"The answer must {verb} {wanted} (got {part.strip()[:80]!r}).", 0.0
        )

    return check


def equals_field(field: str, *, extract: str | None = None, reveal: bool = False) -> Requirement:
    """The answer (or the part ``extract`` takes) equals the dataset line's ``field``.

    A failure's reason names the expected value only with ``reveal`` (reasons are fed back
    to the model by repair strategies).
    """
    how = f" ({extract})" if extract else ""
    check = _field_check(field, extract, whole=True, reveal=reveal)
    return Requirement(f"equals field {field!r}{how}", check)


def contains_field(field: str, *, extract: str | None = None, reveal: bool = False) -> Requirement:
    """The answer (or the part ``extract`` takes) contains the dataset line's ``field``.

    A failure's reason names the expected value only with ``reveal``.
    """
    how = f" ({extract})" if extract else ""
    check = _field_check(field, extract, whole=False, reveal=reveal)
    return Requirement(f"contains field {field!r}{how}", check)
