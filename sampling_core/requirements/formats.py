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


MAX_SCHEMA_DEPTH = 64
"""How deeply a JSON schema may nest (objects and lists): deeper is refused when given."""

_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
_DATA = frozenset({"const", "enum", "default", "examples"})  # values, not schemas


class _NoRetrieval(Exception):
    """A reference to a document outside the schema: never fetched."""


def _refuse(uri: str) -> Any:
    raise _NoRetrieval(uri)


def schema_validator(schema: Any) -> Any:
    """A ``jsonschema`` validator of ``schema`` (``ValueError`` when it is no valid schema).

    A schema never causes network (or disk) access: every reference (``$ref``,
    ``$dynamicRef``, ``$recursiveRef``) must name a part of the schema itself, else the
    schema is refused here, as is a reference to a definition it does not hold and a schema
    nested deeper than :data:`MAX_SCHEMA_DEPTH`; and the validator returned cannot retrieve
    anything.
    """
    import jsonschema
    import referencing
    import referencing.jsonschema

    if not isinstance(schema, dict):
        raise ValueError(f"a JSON schema is an object, not {type(schema).__name__}")
    _check_depth(schema)
    try:
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"not a valid JSON schema: {exc.message}") from None
    specification = referencing.jsonschema.specification_with(
        str(validator_class.META_SCHEMA.get("$schema", "")),
        default=referencing.jsonschema.DRAFT202012,
    )
    root = specification.create_resource(schema)
    registry: Any = referencing.Registry(retrieve=_refuse).with_resource(root.id() or "", root)
    _check_references(schema, registry.resolver(root.id() or ""), specification)
    return validator_class(schema, registry=registry)


def _check_depth(schema: dict[str, Any]) -> None:
    """``ValueError`` when ``schema`` nests deeper than :data:`MAX_SCHEMA_DEPTH` (walked
    without recursion: a deep schema cannot overflow the stack here)."""
    level: list[Any] = [schema]
    for _ in range(MAX_SCHEMA_DEPTH):
        level = [
            inner
            for value in level
            for inner in (value.values() if isinstance(value, dict) else value)
            if isinstance(inner, dict | list)
        ]
        if not level:
            return
    raise ValueError(f"not a valid JSON schema: nested more than {MAX_SCHEMA_DEPTH} levels deep")


def _check_references(node: Any, resolver: Any, specification: Any) -> None:
    """``ValueError`` for the first reference in ``node`` that points outside the schema or
    to a definition it does not hold (each looked up as validation would, no retrieval)."""
    from referencing.exceptions import Unresolvable, Unretrievable

    if isinstance(node, list):
        for item in node:
            _check_references(item, resolver, specification)
        return
    if not isinstance(node, dict):
        return
    if isinstance(node.get("$id"), str):
        resolver = resolver.in_subresource(specification.create_resource(node))
    for keyword in _REFERENCES:
        reference = node.get(keyword)
        if not isinstance(reference, str):
            continue
        try:
            resolver.lookup(reference)
        except Unresolvable as exc:
            if isinstance(exc, Unretrievable) or isinstance(exc.__cause__, Unretrievable):
                raise ValueError(
                    f"not a valid JSON schema: {keyword} {reference!r} points outside the "
                    "schema; a schema is never fetched from the network or a file: put the "
                    "definition in the schema (under $defs) and refer to it as #/$defs/NAME"
                ) from None
            raise ValueError(
                f"not a valid JSON schema: {keyword} {reference!r} names no definition in the "
                "schema"
            ) from None
    for key, value in node.items():
        if key not in _DATA:
            _check_references(value, resolver, specification)


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
