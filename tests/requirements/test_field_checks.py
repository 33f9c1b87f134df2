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


@pytest.mark.parametrize("value", [None, "", "...", "  ?! ", [], [None, "x"], {"a": 1}, [["x"]]])
def test_an_expected_value_that_cannot_be_compared_never_passes(value) -> None:
    """null is no answer (not "None"); an empty value would equal "..." and be in anything."""
    for req in (equals_field("a"), contains_field("a")):
        for answer in ("None", "...", "", "null", "anything at all", "x"):
            result = verdict(req, answer, {"a": value})
            assert not result.passed, (value, answer)
            assert result.reason.startswith("the dataset's 'a' ")


def test_a_list_of_accepted_answers_passes_on_any_of_them() -> None:
    row = {"a": ["Paris", "Paris, France", 75]}
    assert verdict(equals_field("a"), "paris.", row).passed
    assert verdict(equals_field("a"), "Paris, France", row).passed
    assert verdict(equals_field("a"), "75", row).passed
    assert not verdict(equals_field("a"), "Lyon", row).passed
    assert verdict(contains_field("a"), "It is Paris of course", row).passed
    assert verdict(equals_field("a", extract="last_number"), "about 75.0", row).passed
    assert verdict(equals_field("a"), "true", {"a": True}).passed  # JSON true is "true"


def test_last_number_reads_thousands_only_in_groups_of_three() -> None:
    last = equals_field("a", extract="last_number")
    assert verdict(last, "the sides are 3,4,5", {"a": 5}).passed
    assert not verdict(last, "the sides are 3,4,5", {"a": 345}).passed
    assert verdict(last, "a total of 12,345,678.50", {"a": "12345678.5"}).passed
    assert verdict(last, "in 1,234567", {"a": 234567}).passed  # not a thousands group
    assert verdict(last, "it is -0.50", {"a": "-.5"}).passed


def test_numbers_are_compared_exactly_however_many_digits() -> None:
    last = equals_field("a", extract="last_number")
    big = 12345678901234567890
    assert verdict(last, f"= {big}", {"a": big}).passed
    assert not verdict(last, f"= {big + 1}", {"a": big}).passed  # equal as floats
    assert not verdict(last, "= 0.30000000000000001", {"a": "0.3"}).passed
    assert verdict(last, "= 1e3 is 1000", {"a": "1E3"}).passed
