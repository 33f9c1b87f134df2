"""Reading a JSONL dataset: one prompt per line, each with its key and content hash."""

from __future__ import annotations

import difflib
import hashlib
import json
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from sampling_core.backends.base import content_text
from sampling_core.errors import exception_text
from sampling_core.runs.config.config import DatasetConfig, RequirementSpec

if TYPE_CHECKING:
    from sampling_core.kinds import KindRegistry
from sampling_core.runs.config.loading import describe_errors
from sampling_core.runs.errors import DatasetError

__all__ = ["Dataset", "PromptIndex", "PromptItem", "content_hash", "read_dataset"]

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
    retry: int = 0
    """How many records the prompt has already: 0 when it is sampled for the first time, n
    when ``--retry-failed`` samples it again for the n-th time. A retry asks the backend
    again, never the response cache, with seeds of its own
    (:func:`~sampling_core.runs.config.components.prompt_seed`)."""


@dataclass(frozen=True, slots=True)
class Dataset:
    """A checked dataset file: how many prompts it holds and the fingerprint of the whole.

    The prompts themselves are not kept: iterating reads the file again, a line at a time,
    so a run's memory does not grow with its dataset.
    """

    path: Path
    config: DatasetConfig
    count: int
    fingerprint: str

    def __iter__(self) -> Iterator[PromptItem]:
        """The prompts, in file order."""
        for number, line in _lines(self.path):
            yield _parse_line(self.path, number, line, self.config)

    @property
    def items(self) -> tuple[PromptItem, ...]:
        """Every prompt at once (for small datasets; a run iterates instead)."""
        return tuple(self)

    def hashes(self) -> Iterator[tuple[str, str]]:
        """Each key and its content hash, in file order."""
        return ((item.key, item.content_hash) for item in self)

    def index(self) -> PromptIndex:
        """The prompts by line number, each read when asked for (see :class:`PromptIndex`)."""
        return PromptIndex(self)


class PromptIndex:
    """A dataset's prompts by line number, read from the file when asked for: memory holds
    the offset of each line (8 bytes a line), never the prompts."""

    def __init__(self, dataset: Dataset) -> None:
        self._dataset = dataset
        self._offsets = array("q")
        try:
            with dataset.path.open("rb") as handle:
                offset = 0
                for line in handle:
                    self._offsets.append(offset)
                    offset += len(line)
        except OSError as exc:
            raise DatasetError(
                f"cannot read the dataset {dataset.path}: {exception_text(exc)}"
            ) from exc

    def item(self, line: int) -> PromptItem | None:
        """The prompt on line ``line`` (1-based), or ``None`` when there is none."""
        if not 1 <= line <= len(self._offsets):
            return None
        with self._dataset.path.open("rb") as handle:
            handle.seek(self._offsets[line - 1])
            raw = handle.readline().rstrip(b"\n")
        if not raw.strip():
            return None
        return _parse_line(self._dataset.path, line, raw, self._dataset.config)


def content_hash(obj: Any) -> str:
    """A stable hash of a JSON value (keys sorted, no white space)."""
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


def read_dataset(
    config: DatasetConfig,
    kinds: KindRegistry | None = None,
    requirements: Sequence[RequirementSpec] = (),
) -> Dataset:
    """Check every line of the dataset, reading it once, a line at a time.

    A malformed line, an id used twice, or a line's own requirement that ``kinds`` (default:
    the installed ones) cannot build raises :class:`DatasetError` naming the line. So does a
    field a requirement reads (its ``row_fields``) that is missing: from the line, for the
    line's own requirements; from the first line, for ``requirements`` (the run's, which
    every line gets: a misspelt field name is found before any generation). The
    fingerprint is :func:`content_hash` of the list of ``[key, content_hash]`` pairs,
    computed as the lines go by.
    """
    path = config.path
    digest = hashlib.sha256(b"[")
    count = 0
    registry: KindRegistry | None = kinds  # the installed kinds are collected when needed
    seen = _KeysSeen(config) if config.id_field is not None else None  # line keys are unique
    for number, line in _lines(path):
        item = _parse_line(path, number, line, config)
        if not count and requirements:  # the run's requirements, on the first line
            registry = registry or _default_kinds()
            built = [registry.requirement(r.kind, r.value, **r.options) for r in requirements]
            _check_fields(f"{path}:{number}", "requirements", item, requirements, built)
        if item.requirements:
            if registry is None:
                registry = _default_kinds()
            _check_kinds(f"{path}:{number}", item, registry)
        if seen is not None:
            seen.check(path, number, item.key)
        pair = json.dumps([item.key, item.content_hash], ensure_ascii=False, separators=(",", ":"))
        digest.update((("," if count else "") + pair).encode("utf-8"))
        count += 1
    if not count:
        raise DatasetError(f"{path}: the dataset has no prompts")
    digest.update(b"]")
    return Dataset(path, config, count, "sha256:" + digest.hexdigest()[:32])


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of the file with their numbers (1-based)."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise DatasetError(f"cannot read the dataset {path}: {exc.strerror or exc}") from exc
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield number, line.rstrip(b"\n")
        except OSError as exc:
            raise DatasetError(f"cannot read the dataset {path}: {exc.strerror or exc}") from exc


class _DigestSet:
    """A set of 64-bit numbers in a flat array (open addressing, at most half full): 16 bytes
    a member where a ``set`` of ints takes about 70, so a million ids take 16 MB."""

    def __init__(self) -> None:
        self._slots = array("Q", bytes(8 * 1024))
        self._count = 0

    def add(self, value: int) -> bool:
        """Add ``value``; ``False`` when it was there already."""
        value = value or 1  # 0 marks an empty slot
        slots, mask = self._slots, len(self._slots) - 1
        index = value & mask
        while slots[index]:
            if slots[index] == value:
                return False
            index = (index + 1) & mask
        slots[index] = value
        self._count += 1
        if 2 * self._count > len(slots):
            self._grow()
        return True

    def _grow(self) -> None:
        old, self._slots, self._count = self._slots, array("Q", bytes(16 * len(self._slots))), 0
        for value in old:
            if value:
                self.add(value)


class _KeysSeen:
    """The ids met so far, as 64-bit digests; a repeat is confirmed before it is reported."""

    def __init__(self, config: DatasetConfig) -> None:
        self._config = config
        self._digests = _DigestSet()

    def check(self, path: Path, number: int, key: str) -> None:
        short = int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest())
        if self._digests.add(short):
            return
        for first, line in _lines(path):  # rare: read again to name the first use
            if first >= number:
                break
            if _parse_line(path, first, line, self._config).key == key:
                raise DatasetError(
                    f"{path}:{number}: id {key!r} was already used on line {first}; "
                    "ids must be unique"
                )


def _parse_line(path: Path, number: int, line: bytes, config: DatasetConfig) -> PromptItem:
    where = f"{path}:{number}"
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{where}: not valid JSON ({exception_text(exc)})") from exc
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


def _default_kinds() -> KindRegistry:
    from sampling_core.kinds import default_kinds

    return default_kinds()


def _check_kinds(where: str, item: PromptItem, kinds: KindRegistry) -> None:
    from sampling_core.kinds import KindError
    from sampling_core.runs.config.components import sub_key

    built = []
    for index, spec in enumerate(item.requirements):
        try:
            built.append(kinds.requirement(spec.kind, spec.value, **spec.options))
        except KindError as exc:
            raise DatasetError(
                f"{where}: require[{index}]{sub_key(exc)}: {exception_text(exc)}"
            ) from exc
    _check_fields(where, "require", item, item.requirements, built)


def _check_fields(
    where: str, label: str, item: PromptItem, specs: Sequence[RequirementSpec], built: list[Any]
) -> None:
    """Every field the requirements read is in the line (else one error naming it)."""
    row = item.row or {}
    for index, (spec, requirement) in enumerate(zip(specs, built, strict=True)):
        missing = [name for name in getattr(requirement, "row_fields", ()) if name not in row]
        if missing:
            known = ", ".join(repr(k) for k in row)
            near = difflib.get_close_matches(missing[0], list(row), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise DatasetError(
                f"{where}: {label}[{index}] ({spec.kind}) reads the field {missing[0]!r}, "
                f"which the line does not have{hint}; its fields are {known}"
            )


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
