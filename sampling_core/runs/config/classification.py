"""The resume labels of the run config, walked: the one place resume rules are derived from.

:func:`walk_config` is the one walk of the config tree: every field of :class:`RunConfig`,
nested ones included, with its label and, when configs are given, its value in each (the
resume comparison walks two configs, the recorded result settings one).
:func:`classified_fields` is the walk of the model alone; :func:`unclassified_fields` is
what a test checks is empty; :func:`classification_table` is the table in
``docs/batch-runs.md`` (``tests/runs/test_config.py`` checks the page holds exactly this
table).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from sampling_core.redaction import mask_url_credentials
from sampling_core.runs.config.config import LABELS, STRICTNESS, Label, RunConfig

if TYPE_CHECKING:
    from sampling_core.kinds import KindRegistry

__all__ = [
    "ClassifiedField",
    "as_json",
    "classification_table",
    "classified_fields",
    "inconsistent_blocks",
    "label_of",
    "nested_model",
    "option_label",
    "unclassified_fields",
    "walk_config",
]


@dataclass(frozen=True, slots=True)
class ClassifiedField:
    """One field of the config model, by its dotted path, with its label.

    ``values``: the field's value in each config walked (in their order; empty when only
    the model is walked). ``descends``: the walk goes on into this field's nested model
    (its fields come right after it, their paths starting with ``path`` and a dot).
    """

    path: str
    label: Label | None
    model: type[BaseModel]
    name: str
    info: FieldInfo
    sub_model: type[BaseModel] | None
    is_list: bool
    values: tuple[Any, ...] = ()
    descends: bool = False


def as_json(value: Any) -> Any:
    """A config value as JSON data, as the resume comparison and the recorded result
    settings both see it: a model dumped (its ``None`` fields left out), lists, tuples and
    dicts walked, numbers, booleans and ``None`` as they are, strings with the credentials
    of any URL in them masked (:func:`~sampling_core.redaction.mask_url_credentials`: a
    setting never shows them, and a key is no result setting), anything else (a ``Path``)
    as its text."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, list | tuple):
        return [as_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): as_json(v) for k, v in value.items()}
    if isinstance(value, str):
        return mask_url_credentials(value)
    return value if isinstance(value, int | float | bool | None) else str(value)


def option_label(kinds: KindRegistry | None, area: Any, kind: str, option: str) -> str:
    """The resume label of ``option`` of the ``area`` kind ``kind`` (a backend, strategy or
    requirement): as that kind labels it, or ``"result"`` when ``kinds`` does not know it."""
    if kinds is None or kind not in kinds.kinds[area]:
        return "result"
    return kinds.kinds[area][kind].label(option)


def label_of(info: FieldInfo) -> Label | None:
    """The resume label in a field's metadata, or ``None`` when it has none."""
    extra = info.json_schema_extra
    if isinstance(extra, dict):
        label = extra.get("resume")
        if label in LABELS:
            return label  # type: ignore[return-value]
    return None


def nested_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The BaseModel inside ``annotation`` (``M``, ``M | None``, ``list[M]``), and if a list."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin = get_origin(annotation)
    for arg in get_args(annotation):
        found, in_list = nested_model(arg)
        if found is not None:
            return found, in_list or origin is list
    return None, False


def walk_config(
    model: type[BaseModel] = RunConfig,
    configs: Sequence[BaseModel] = (),
    prefix: str = "",
) -> Iterator[ClassifiedField]:
    """Every field of ``model`` and of the models nested in it, depth first, each block
    before its fields.

    Without ``configs``, the model alone: the walk enters every nested model, those inside
    a list too (their fields are named ``list[].field``). With ``configs`` (instances of
    ``model``, e.g. a run's config and its resume's), each field carries its value in each,
    and the walk enters a nested block only when every config holds one (a list of models,
    or a block one config leaves out, is a value like any other).
    """
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        sub, is_list = nested_model(info.annotation)
        values = tuple(getattr(config, name) for config in configs)
        if configs:
            descends = sub is not None and not is_list and all(v is not None for v in values)
        else:
            descends = sub is not None
        yield ClassifiedField(
            path, label_of(info), model, name, info, sub, is_list, values, descends
        )
        if sub is not None and descends:
            yield from walk_config(sub, values, f"{path}[]." if is_list else f"{path}.")


def classified_fields(model: type[BaseModel] = RunConfig) -> Iterator[ClassifiedField]:
    """Every field of ``model`` and of the models nested in it (:func:`walk_config` of the
    model alone)."""
    return walk_config(model)


def unclassified_fields(model: type[BaseModel] = RunConfig) -> list[str]:
    """The paths of fields without a resume label (must be empty)."""
    return [f.path for f in classified_fields(model) if f.label is None]


def inconsistent_blocks(model: type[BaseModel] = RunConfig) -> list[str]:
    """Blocks whose label is not the strictest label among their fields (must be empty)."""
    fields = list(classified_fields(model))
    out = []
    for block in fields:
        if block.sub_model is None or block.label is None:
            continue
        inner = [f.label for f in classified_fields(block.sub_model) if f.label is not None]
        strictest = max(inner, key=STRICTNESS.__getitem__, default=block.label)
        if block.label != strictest:
            out.append(f"{block.path} is {block.label!r} but holds {strictest!r} fields")
    return out


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        return "(block)" if isinstance(info.default_factory, type) else "`[]`"
    if info.default is PydanticUndefined:
        return "required"
    if info.default is None:
        return "—"
    value = info.default
    if isinstance(value, bool):
        value = str(value).lower()
    return f"`{value}`" if value != [] else "`[]`"


def classification_table(model: type[BaseModel] = RunConfig) -> str:
    """A Markdown table of every config field: its path, label, default and meaning."""
    lines = [
        "| field | on resume | default | meaning |",
        "|---|---|---|---|",
    ]
    for f in classified_fields(model):
        label = f.label or "UNCLASSIFIED"
        shown = {"throughput": "throughput (may change)", "result": "result (must match)"}
        label_text = shown.get(label, "location (not compared)" if label == "location" else label)
        name = f"**`{f.path}`**" if f.sub_model is not None else f"`{f.path}`"
        default = "(block)" if f.sub_model is not None and not f.is_list else _default(f.info)
        description = (f.info.description or "").replace("|", "\\|")
        lines.append(f"| {name} | {label_text} | {default} | {description} |")
    return "\n".join(lines) + "\n"
