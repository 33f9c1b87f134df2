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
``last_number`` (the last number in it, e.g. ``"... so 12."`` -> ``12``; commas count as
thousands separators only in groups of three, so ``"3,4,5"`` ends in ``5``) or a regular
expression with one group (the group of its first match). Numbers are compared exactly
(``12.50`` equals ``12.5``; two 20-digit integers are equal only when every digit is).
A verdict names the answer it compared (``ValidationResult.answer``: extracted and
normalised, ``""`` when nothing could be extracted): samples with the same answer vote
together in maj@k (``docs/comparing-runs.md``).

The expected value is a string, a number or a boolean; a list of them accepts any one.
An expected value that cannot be compared fails the check with the reason: ``null``, an
object, or a value with nothing left after normalising (``""``, ``"..."``), which would
otherwise equal an empty answer and be contained in every answer. The fields a check reads
are its requirement's ``row_fields``: a batch run refuses, before any generation, a dataset
whose first line lacks one.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from hook_specs.records import ValidationResult
from sampling_core.requirements.checks import Requirement
from sampling_core.requirements.context import CheckContext
from sampling_core.requirements.linear_regex import compile_linear

__all__ = ["contains_field", "equals_field", "normalize_text"]

_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?")
"""A number: digits (commas only between groups of three), then maybe a fraction."""
_EDGES = string.punctuation + string.whitespace + "\u2018\u2019\u201c\u201d"


def normalize_text(text: str) -> str:
    """Lower case, surrounding white space and punctuation stripped, inner white space one."""
    return re.sub(r"\s+", " ", str(text).lower()).strip(_EDGES)


def _number(text: str) -> str:
    """A number written one way (``1,000.0`` -> ``1000``, ``12.50`` -> ``12.5``), exactly;
    ``text`` itself when it is not a finite number."""
    cleaned = text.strip().replace(",", "")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return text
    if not value.is_finite():
        return text
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


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


def _expected(value: Any, numeric: bool) -> list[str] | str:
    """The accepted answers, normalised; or why the value cannot be compared."""
    values = value if isinstance(value, list) else [value]
    if not values:
        return "is an empty list (no accepted answer)"
    accepted = []
    for one in values:
        if one is None:
            return "is null (no expected answer)"
        if isinstance(one, dict | list):
            return (
                f"holds a {'list' if isinstance(one, list) else 'JSON object'}; give a string, "
                "a number, or a list of them (any one is accepted)"
            )
        raw = str(one).lower() if isinstance(one, bool) else str(one)
        normal = normalize_text(_number(raw) if numeric else raw)
        if not normal:
            return f"is {raw!r}: nothing is left to compare once normalised"
        accepted.append(normal)
    return accepted


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
        accepted = _expected(row[field], numeric)
        if isinstance(accepted, str):
            return ValidationResult(False, f"the dataset's {field!r} {accepted}")
        part = take(text)
        if part is None:  # no answer: a vote for "no answer" in maj@k
            return ValidationResult(
                False, f"nothing to extract ({extract}) from the answer", answer=""
            )
        got = normalize_text(part)
        if any(got == one if whole else one in got for one in accepted):
            return ValidationResult(True, score=1.0, answer=got)
        verb = "equal" if whole else "contain"
        # The expected value stays out of the reason unless asked: a reason is fed back to
        # the model by the repair strategies, and would hand it the answer.
        wanted = repr(row[field]) if reveal else f"the dataset's {field!r}"
        return ValidationResult(
            False, f"The answer must {verb} {wanted} (got {part.strip()[:80]!r}).", 0.0, answer=got
        )

    return check


def equals_field(field: str, *, extract: str | None = None, reveal: bool = False) -> Requirement:
    """The answer (or the part ``extract`` takes) equals the dataset line's ``field``.

    A failure's reason names the expected value only with ``reveal`` (reasons are fed back
    to the model by repair strategies).
    """
    how = f" ({extract})" if extract else ""
    check = _field_check(field, extract, whole=True, reveal=reveal)
    return Requirement(f"equals field {field!r}{how}", check, row_fields=(field,))


def contains_field(field: str, *, extract: str | None = None, reveal: bool = False) -> Requirement:
    """The answer (or the part ``extract`` takes) contains the dataset line's ``field``.

    A failure's reason names the expected value only with ``reveal``.
    """
    how = f" ({extract})" if extract else ""
    check = _field_check(field, extract, whole=False, reveal=reveal)
    return Requirement(f"contains field {field!r}{how}", check, row_fields=(field,))
