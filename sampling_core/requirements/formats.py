"""JSON answers to a schema, and ``format=``: a pydantic model or a JSON schema.

``format`` given to ``sample()`` (or a run's ``format:``) is a parse check everywhere
(:func:`format_requirement`), the parsed ``result.value`` (:func:`parse_format`), and the
schema sent to backends that can constrain their decoding to it (:func:`format_schema`).
A JSON schema is checked with ``jsonschema`` (:func:`schema_validator`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from hook_specs.records import ValidationResult
from sampling_core.errors import exception_text
from sampling_core.requirements.checks import Requirement, parse_json, parse_model, parses_as

__all__ = [
    "format_requirement",
    "format_schema",
    "matches_schema",
    "parse_format",
    "schema_validator",
]


def schema_validator(schema: Any) -> Any:
    """A ``jsonschema`` validator of ``schema`` (``ValueError`` when it is no valid schema)."""
    import jsonschema

    if not isinstance(schema, dict):
        raise ValueError(f"a JSON schema is an object, not {type(schema).__name__}")
    try:
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"not a valid JSON schema: {exc.message}") from None
    return validator_class(schema)


def matches_schema(schema: dict[str, Any]) -> Requirement:
    """The text is JSON that is valid under the JSON ``schema`` (checked with
    ``jsonschema``; a bad schema is refused here with a ``ValueError``)."""
    validator = schema_validator(schema)
    title = schema.get("title") if isinstance(schema.get("title"), str) else None

    def check(text: str) -> ValidationResult:
        try:
            value = parse_json(text)
        except ValueError as exc:
            return ValidationResult(
                False, f"The answer must be valid JSON ({exception_text(exc)})."
            )
        problems = [
            f"{'.'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message}"
            for error in list(validator.iter_errors(value))[:5]
        ]
        if problems:
            return ValidationResult(
                False, f"The answer must be JSON matching the schema: {'; '.join(problems)}."
            )
        return ValidationResult(True)

    return Requirement(f"is JSON matching {title or 'the schema'}", check)


def parse_format(format: Any, text: str) -> Any:
    """``text`` parsed as ``format`` asks: a pydantic model's instance, or (for a JSON
    schema) the JSON value; raises ``ValueError`` when it does not parse."""
    if isinstance(format, dict):
        return parse_json(text)
    return parse_model(format, text)


def format_schema(format: Any) -> dict[str, Any]:
    """The JSON schema of ``format``: a pydantic model's, or the dict itself."""
    if isinstance(format, dict):
        return format
    return _model_format(format).model_json_schema()


def format_requirement(format: Any) -> Requirement:
    """The parse check of ``format``: :func:`parses_as` a model, :func:`matches_schema` a dict."""
    if isinstance(format, dict):
        return matches_schema(format)
    return parses_as(_model_format(format))


def _model_format(format: Any) -> type[BaseModel]:
    if isinstance(format, type) and issubclass(format, BaseModel):
        return format
    raise TypeError(
        f"format must be a pydantic model class or a JSON schema (a dict), not {format!r}"
    )
