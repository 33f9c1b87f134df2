"""Whether a check takes the context is read from its signature once per function code."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from sampling_core.requirements import context as context_module
from sampling_core.requirements.checks import max_words
from sampling_core.requirements.context import takes_context


@pytest.fixture
def read(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The checks whose signature is read from now on (the cache starts empty)."""
    seen: list[object] = []
    real = context_module._reads_context

    def counted(check: Any) -> bool:
        seen.append(check)
        return real(check)

    monkeypatch.setattr(context_module, "_reads_context", counted)
    monkeypatch.setattr(context_module, "_TAKES_CONTEXT", {})
    return seen


def _factory(wants: bool) -> Any:
    if wants:

        def check(text: str, context: Any) -> bool:
            return True

    else:

        def check(text: str) -> bool:  # type: ignore[misc]
            return True

    return check


def test_checks_a_factory_makes_share_one_reading_of_the_signature(read: list[object]) -> None:
    answers = [takes_context(_factory(True)) for _ in range(5)]
    answers += [takes_context(_factory(False)) for _ in range(5)]
    assert answers == [True] * 5 + [False] * 5
    assert len(read) == 2  # one reading per code, not per function made
    for _ in range(3):
        max_words(40)  # a requirement made per call reads its check's signature once
    assert len(read) == 3


def test_what_a_function_declares_beyond_its_code_is_read_each_time() -> None:
    def check(text: str, context: Any = None) -> bool:  # the context has a default
        return True

    def plain(text: str) -> bool:
        return True

    plain.__signature__ = inspect.signature(lambda text, context: True)  # type: ignore[attr-defined]
    assert takes_context(check) is False
    assert takes_context(plain) is True  # its declared signature, not its code's


def _with_default(default: Any) -> Any:
    def check(text: str, context: Any, extra: Any = default) -> bool:
        return True

    return check


@pytest.mark.parametrize("default", [[], {}, "a value"])
def test_what_a_default_is_does_not_matter_only_how_many(read: list[object], default: Any) -> None:
    assert [takes_context(_with_default(default)) for _ in range(3)] == [True] * 3
    assert len(read) == 1  # an unhashable default too: read once per code
    # the cache keeps no default value alive (a check's default may be large)
    kept = [value for key in context_module._TAKES_CONTEXT for value in key]
    kept += [value for part in kept if isinstance(part, tuple) for value in part]
    assert not any(value is default for value in kept)
