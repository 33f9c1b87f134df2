"""Options: a pydantic model of a factory's keyword parameters, and one-line option errors.

Used for the options of kinds (:mod:`sampling_core.kinds`) and of plugin classes
(``plugins=[("budget_guard", {"max_tokens_total": 5000})]``).
"""

from __future__ import annotations

import difflib
import inspect
import math
import warnings
from collections.abc import Callable
from functools import partial
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, create_model

__all__ = [
    "as_kwargs",
    "first_problem",
    "number_as_written",
    "number_kinds",
    "options_model",
    "signature_of",
    "validate_options",
]

# An option whose rejected value may be a secret put in the wrong place is never repeated.
_NEVER_SHOWN = frozenset({"api_key_env", "base_url"})
_SECRET_HINTS = ("api_key", "apikey", "secret", "password", "auth_token", "access_token")


def _secret(name: str) -> bool:
    return name in _NEVER_SHOWN or any(hint in name.lower() for hint in _SECRET_HINTS)


def number_kinds(annotation: Any) -> set[type]:
    """The plain number types an annotation allows (``Annotated[int | None, ...]`` -> ``{int}``)."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if annotation in (int, float):
        return {annotation}
    if get_origin(annotation) in (Union, UnionType):
        return {a for a in get_args(annotation) if a in (int, float)}
    return set()


def number_as_written(kinds: set[type], value: Any) -> Any:
    """``value`` unchanged, or ValueError: numbers are taken as written, never coerced.

    For ``kinds`` (see :func:`number_kinds`) with int but not float, an int (not ``2.0``,
    ``"2"`` or a bool); with float, a finite number (not a string, a bool, inf or nan).
    ``None`` passes (the field's own type decides whether it is allowed).
    """
    if value is None or not kinds:
        return value
    if int in kinds and float not in kinds:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"must be a whole number (an int), not {type(value).__name__}")
    elif float in kinds:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"must be a number, not {type(value).__name__}")
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
    return value


def first_problem(exc: ValidationError, model: type[BaseModel]) -> str:
    """The first problem of ``exc``, in one line: the option's name and what is wrong.

    A misspelt option comes first (its did-you-mean explains the missing one too).
    """
    err = _first(exc)
    name = ".".join(str(part) for part in err["loc"]) or "(options)"
    if err["type"] == "extra_forbidden":
        allowed = list(model.model_fields)
        close = difflib.get_close_matches(name, allowed, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"options: {', '.join(allowed)}"
        if _secret(name):
            hint = (
                "secrets never go in options: put the key in an environment variable and "
                "give its NAME, e.g. as api_key_env"
            )
        return f"unknown option {name!r} ({hint})" if allowed else f"takes no option {name!r}"
    if err["type"] == "missing":
        return f"option {name!r} is required"
    hidden = _secret(name) or isinstance(err.get("input"), dict)
    shown = "" if hidden else f" (got {err.get('input')!r})"
    return f"option {name!r}: {str(err['msg']).removeprefix('Value error, ')}{shown}"


def options_model(name: str, factory: Callable[..., Any], area: str = "backend") -> type[BaseModel]:
    """A pydantic model of the factory's keyword parameters (a requirement's VALUE excluded).

    ``**kwargs`` in the signature lets any further option through unchecked.
    """
    params = list(signature_of(factory).parameters.values())
    if area == "requirement" and params and params[0].kind is not params[0].KEYWORD_ONLY:
        params = params[1:] if params[0].kind is not params[0].VAR_KEYWORD else params
    fields: dict[str, Any] = {}
    extra = "forbid"
    for p in params:
        if p.kind is p.VAR_KEYWORD:
            extra = "allow"
        elif p.kind is not p.VAR_POSITIONAL:
            annotation = Any if p.annotation is p.empty else p.annotation
            numbers = number_kinds(annotation)
            if numbers:  # as written: "0.1", 2.0 for an int, inf and nan are refused
                annotation = Annotated[
                    annotation, BeforeValidator(partial(number_as_written, numbers))
                ]
            fields[p.name] = (annotation, ... if p.default is p.empty else p.default)
    config = ConfigDict(  # type: ignore[typeddict-item]
        extra=extra, arbitrary_types_allowed=True, allow_inf_nan=False
    )
    with warnings.catch_warnings():  # a type pydantic cannot check is taken as it is
        warnings.simplefilter("ignore")
        try:
            return create_model(f"{name}_options", __config__=config, **fields)
        except Exception:  # an annotation pydantic cannot build a schema for: unchecked
            loose = {key: (Any, default) for key, (_, default) in fields.items()}
            return create_model(f"{name}_options", __config__=config, **loose)


def signature_of(factory: Callable[..., Any]) -> inspect.Signature:
    """``factory``'s signature with string annotations resolved where they can be."""
    try:
        return inspect.signature(factory, eval_str=True)
    except (NameError, TypeError, SyntaxError):
        return inspect.signature(factory)


def validate_options(
    model: type[BaseModel], options: dict[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """``(keyword arguments, None)``, or ``(None, what is wrong)`` in one line."""
    try:
        validated = model.model_validate(dict(options))
    except ValidationError as exc:
        return None, first_problem(exc, model)
    return as_kwargs(validated), None


def problem_option(exc: ValidationError) -> str:
    """The name of the option the first problem of ``exc`` is about."""
    return ".".join(str(part) for part in _first(exc)["loc"])


def _first(exc: ValidationError) -> Any:
    errors = exc.errors()
    return next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])


def as_kwargs(validated: BaseModel) -> dict[str, Any]:
    """The options a caller set on a validated options model (and its extras), as keyword
    arguments: defaults the caller did not give are left to the factory."""
    out = {name: getattr(validated, name) for name in validated.model_fields_set}
    out.update(validated.model_extra or {})
    return out
