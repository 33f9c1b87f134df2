"""``equals_field`` / ``contains_field``: answers compared with the dataset line."""

from __future__ import annotations

import pytest

from sampling_core import CheckContext
from sampling_core.kinds import KindError, requirement
from sampling_core.requirements.fields import contains_field, equals_field, normalize_text


def verdict(req, text: str, row: dict | None):
    return req.check(text, CheckContext(row=row))


def test_equals_compares_normalised_text() -> None:
    req = equals_field("city")
    assert verdict(req, "  paris. ", {"city": "Paris"}).passed
    assert not verdict(req, "Paris, France", {"city": "Paris"}).passed
    assert normalize_text(" The  Answer!\n") == "the answer"


def test_contains_and_extract() -> None:
    assert verdict(contains_field("city"), "I think it is PARIS.", {"city": "Paris"}).passed
    last = equals_field("answer", extract="last_number")
    assert verdict(last, "2 plus 3 is 5.", {"answer": "5"}).passed
    assert verdict(last, "It is 1,000.0", {"answer": 1000}).passed
    assert not verdict(last, "It is 6", {"answer": "5"}).passed
    assert not verdict(last, "no digits", {"answer": "5"}).passed
    group = equals_field("answer", extract=r"ANSWER: (\w+)")
    assert verdict(group, "work... ANSWER: yes", {"answer": "Yes"}).passed
    with pytest.raises(ValueError, match="exactly one group"):
        equals_field("answer", extract=r"(a)(b)")
    # the pattern comes from a run's YAML: it runs on RE2 (linear time), like `matches`
    with pytest.raises(ValueError, match="lookaround and backreferences are not supported"):
        equals_field("answer", extract=r"(?=x)(\d+)")
    nested = equals_field("answer", extract=r"((?:a+)+)b")  # catastrophic on backtracking re
    assert not verdict(nested, "a" * 5000 + "!", {"answer": "a"}).passed


def test_the_reason_names_the_expected_value_only_when_revealed() -> None:
    hidden = verdict(equals_field("answer"), "6", {"answer": "5"})
    assert not hidden.passed and "'5'" not in hidden.reason and "'answer'" in hidden.reason
    shown = verdict(equals_field("answer", reveal=True), "6", {"answer": "5"})
    assert "'5'" in shown.reason


def test_without_a_row_or_field_the_check_fails_with_a_reason() -> None:
    assert "no dataset line" in verdict(equals_field("a"), "x", None).reason
    assert "no field 'a'" in verdict(equals_field("a"), "x", {"b": 1}).reason


def test_through_the_sampler_with_a_row(sampler, scripted_backend) -> None:
    req = requirement("equals_field", "answer", extract="last_number")
    s = sampler(scripted_backend(["it is 4", "it is 5"]))
    result = s.sample_sync("2+3?", requirements=[req], loop_budget=2, row={"answer": "5"})
    assert result.success and result.iterations_used == 2
    with pytest.raises(KindError, match="extract"):
        requirement("equals_field", "answer", extract="(a)(b)")
