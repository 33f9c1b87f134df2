"""Reading a JSONL dataset: one prompt per line, each with its key and content hash."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from sampling_core.backends.base import content_text
from sampling_core.runs.config import DatasetConfig, RequirementSpec

if TYPE_CHECKING:
    from sampling_core.kinds import KindRegistry
from sampling_core.runs.errors import DatasetError
from sampling_core.runs.loading import describe_errors

__all__ = ["Dataset", "PromptItem", "content_hash", "read_dataset"]

_SPECS = TypeAdapter(list[RequirementSpec])


@dataclass(frozen=True, slots=True)
class PromptItem:
    """One prompt of the dataset.

    ``key`` is the id field's value, or ``line:N`` without an id field; ``content_hash``
    covers the whole line's JSON object, so a changed prompt or requirement changes it.
    """

    key: str
    line: int
    prompt: str | list[dict[str, Any]]
    requirements: tuple[RequirementSpec, ...]
    content_hash: str
    row: dict[str, Any] | None = None
    """The whole line, as checks see it (``CheckContext.row``)."""


@dataclass(frozen=True, slots=True)
class Dataset:
    """The prompts of one dataset file, in file order, and the fingerprint of the whole."""

    path: Path
    items: tuple[PromptItem, ...]
    fingerprint: str

    def hashes(self) -> dict[str, str]:
        """Each key's content hash."""
        return {item.key: item.content_hash for item in self.items}


def content_hash(obj: Any) -> str:
    """A stable hash of a JSON value (keys sorted, no white space)."""
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


def read_dataset(config: DatasetConfig, kinds: KindRegistry | None = None) -> Dataset:
    """Read every line of the dataset; a malformed line raises :class:`DatasetError` naming it.

    A line's own requirements are checked against ``kinds`` (default: the installed ones).
    """
    path = config.path
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"cannot read the dataset {path}: {exc.strerror or exc}") from exc
    items: list[PromptItem] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        item = _parse_line(path, number, line, config)
        _check_kinds(f"{path}:{number}", item, kinds)
        if item.key in first_line:
            raise DatasetError(
                f"{path}:{number}: id {item.key!r} was already used on line "
                f"{first_line[item.key]}; ids must be unique"
            )
        first_line[item.key] = number
        items.append(item)
    if not items:
        raise DatasetError(f"{path}: the dataset has no prompts")
    fingerprint = content_hash([[item.key, item.content_hash] for item in items])
    return Dataset(path, tuple(items), fingerprint)


def _parse_line(path: Path, number: int, line: bytes, config: DatasetConfig) -> PromptItem:
    where = f"{path}:{number}"
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{where}: not valid JSON ({exc})") from exc
    except RecursionError:
        raise DatasetError(f"{where}: not valid JSON (nested too deeply)") from None
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: each line must be a JSON object, got {type(obj).__name__}")
    prompt = obj.get(config.prompt_field)
    if not _is_prompt(prompt):
        raise DatasetError(
            f"{where}: {config.prompt_field!r} must be a non-empty string or a list of "
            'messages ({"role": "user", "content": "..."}, both strings, or content as '
            '[{"type": "text", "text": "..."}]), got '
            f"{'nothing' if prompt is None else repr(prompt)[:60]}"
        )
    if config.id_field is None:
        key = f"line:{number}"
    else:
        raw_id = obj.get(config.id_field)
        if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or raw_id == "":
            raise DatasetError(f"{where}: {config.id_field!r} must be a string or an integer id")
        key = str(raw_id)
    if isinstance(prompt, list):  # OpenAI-style text parts become the message's text
        prompt = [{**m, "content": content_text(m["content"])} for m in prompt]
    try:
        digest = content_hash(obj)
    except UnicodeEncodeError as exc:
        raise DatasetError(
            f"{where}: holds text that is not valid Unicode (a lone surrogate escape such as "
            f"\\u{ord(exc.object[exc.start]):04x}); fix or remove it"
        ) from None
    specs: tuple[RequirementSpec, ...] = ()
    if config.requirements_field in obj:
        try:
            specs = tuple(_SPECS.validate_python(obj[config.requirements_field]))
        except ValidationError as exc:
            problems = "; ".join(
                describe_errors(exc, RequirementSpec, prefix=(config.requirements_field,))
            )
            raise DatasetError(f"{where}: {problems}") from exc
    return PromptItem(key, number, prompt, specs, digest, obj)


def _check_kinds(where: str, item: PromptItem, kinds: KindRegistry | None) -> None:
    if not item.requirements:
        return
    from sampling_core.kinds import KindError, default_kinds

    registry = kinds or default_kinds()
    for index, spec in enumerate(item.requirements):
        try:
            registry.requirement(spec.kind, spec.value, **spec.options)
        except KindError as exc:
            sub = "" if exc.key is None else f".{exc.key}"
            raise DatasetError(f"{where}: require[{index}]{sub}: {exc}") from exc


def _is_text_parts(value: Any) -> bool:
    """OpenAI-style content: ``[{"type": "text", "text": "..."}, ...]``."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
            for p in value
        )
    )


def _is_prompt(value: Any) -> bool:
    if isinstance(value, str):
        return bool(value.strip())
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(m, dict)
            and isinstance(m.get("role"), str)
            and bool(m["role"])
            and (isinstance(m.get("content"), str) or _is_text_parts(m.get("content")))
            for m in value
        )
    )
