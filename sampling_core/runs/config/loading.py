"""Reading a run config from YAML, with errors that name the offending key's full path."""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from sampling_core.errors import exception_text
from sampling_core.kinds import KindError, KindRegistry, default_kinds
from sampling_core.redaction import register_url_secrets
from sampling_core.runs.config.classification import nested_model
from sampling_core.runs.config.components import check_kinds
from sampling_core.runs.config.config import RunConfig
from sampling_core.runs.errors import ConfigError

__all__ = [
    "describe_errors",
    "describe_yaml_error",
    "format_loc",
    "load_config",
    "load_yaml",
    "parse_config",
    "refuse_unwritable",
]

_SECRET_HINTS = ("api_key", "apikey", "token", "secret", "password")
# Fields whose rejected value may be a secret (a key given as the variable's name, a URL
# with credentials): their errors never repeat the value.
_NEVER_SHOWN = frozenset({"api_key_env", "base_url"})
_SECRET_NAME_HINTS = ("key", "token", "secret", "password")


def load_config(path: str | Path, *, kinds: KindRegistry | None = None) -> RunConfig:
    """Read and validate the YAML run config at ``path``.

    A relative dataset path is taken relative to the config file's folder and made absolute.
    Its kinds are checked against ``kinds`` (default: the installed plugins' kinds).
    Raises :class:`ConfigError` with one line per problem.
    """
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the config {source}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{source}: not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8"
        ) from exc
    return parse_config(text, source=source, kinds=kinds)


def parse_config(
    text: str, *, source: Path | None = None, kinds: KindRegistry | None = None
) -> RunConfig:
    """Validate YAML ``text``; ``source`` names it in errors and anchors relative paths.

    Its kinds are checked against ``kinds`` (default: the installed plugins' kinds).
    """
    where = str(source) if source is not None else "the config"
    try:
        data = load_yaml(text)
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise ConfigError(f"{where}: not valid YAML{describe_yaml_error(exc)}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: the config must be a YAML mapping (dataset:, backend:, ...)")
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError("\n".join(f"{where}: {line}" for line in describe_errors(exc))) from exc
    _refuse_secrets(config, where)
    if kinds is None:
        try:
            kinds = default_kinds()
        except KindError as exc:
            raise ConfigError(f"{where}: {exception_text(exc)}") from exc
    check_kinds(config, kinds, f"{where}: ")
    if source is not None and not config.dataset.path.is_absolute():
        anchored = (source.parent / config.dataset.path).resolve()
        config = config.model_copy(
            update={"dataset": config.dataset.model_copy(update={"path": anchored})}
        )
    cache = config.run.cache
    if source is not None and cache is not None and not cache.expanduser().is_absolute():
        anchored = (source.parent / cache).resolve()
        config = config.model_copy(
            update={"run": config.run.model_copy(update={"cache": anchored})}
        )
    return config


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that repeats a key (PyYAML keeps the last)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # keys merged in (<<) may be overridden: that is their point
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:
                    continue  # an unhashable key: the base class says what is wrong
                if first is not key_node:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping",
                        node.start_mark,
                        f"the key {key!r} is given twice (first on line "
                        f"{first.start_mark.line + 1}); keep one",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` that refuses repeated keys (a run config is never last-wins)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)


def describe_yaml_error(exc: BaseException) -> str:
    """Where and what, on one line: `` (line 3, column 7): mapping values are not allowed``.

    PyYAML's own errors carry a mark; a tagged value it cannot build (``!!int x``, an
    impossible date) raises ``ValueError``; nesting too deep raises ``RecursionError``.
    """
    if isinstance(exc, RecursionError):
        return ": nested too deeply"
    mark = getattr(exc, "problem_mark", None)
    at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    return f"{at}: {problem}"


def secret_values() -> frozenset[str]:
    """The values of the environment variables whose names say they hold a secret.

    A config value equal to one of them is a key put where it does not belong: it is
    refused (never written to a run directory) and never repeated in a message.
    """
    return frozenset(
        value
        for name, value in os.environ.items()
        if len(value) >= 8 and any(hint in name.lower() for hint in _SECRET_NAME_HINTS)
    )


def _refuse_secrets(config: RunConfig, where: str) -> None:
    secrets = secret_values()
    if not secrets:
        return
    for path, value in _strings(config.model_dump(mode="json"), ()):
        if value in secrets:
            raise ConfigError(
                f"{where}: {format_loc(path)} holds the value of a secret from the "
                "environment; secrets never go in a config: give the variable's NAME as "
                "backend.api_key_env"
            )


def refuse_unwritable(config: RunConfig, where: str = "") -> None:
    """Raise :class:`ConfigError` naming the first value of ``config`` that no file can hold
    (a lone surrogate: what Python makes of bytes that are not UTF-8, or a ``\\udc80`` escape
    in YAML), before anything of the run is written. The credentials of URLs in its values
    become secrets (:func:`~sampling_core.redaction.register_url_secrets`)."""
    for path, value in _strings(config.model_dump(mode="json"), ()):
        register_url_secrets(value)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = value[exc.start].encode("utf-8", "backslashreplace").decode()
            raise ConfigError(
                f"{where}{format_loc(path)}: holds {bad}, a lone surrogate no file can hold "
                "(bytes that are not UTF-8?); write the character you mean, in UTF-8"
            ) from None


def _strings(value: Any, path: tuple[str | int, ...]) -> Any:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, (*path, index))


def format_loc(loc: Sequence[str | int]) -> str:
    """``("requirements", 1, "max_words")`` -> ``requirements[1].max_words``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def describe_errors(
    exc: ValidationError, model: type[BaseModel] = RunConfig, prefix: Sequence[str | int] = ()
) -> list[str]:
    """One readable line per problem: the key's full path, then what is wrong."""
    lines = []
    secrets = secret_values()
    for err in exc.errors():
        loc = [*prefix, *err["loc"]]
        path = format_loc(loc)
        if err["type"] == "extra_forbidden":
            lines.append(f"{path}: unknown key{_hint(model, list(err['loc']))}")
        elif err["type"] == "missing":
            lines.append(f"{path}: required key is missing")
        else:
            message = str(err["msg"]).removeprefix("Value error, ")
            hidden = (
                isinstance(err.get("input"), dict | list)
                or (bool(err["loc"]) and err["loc"][-1] in _NEVER_SHOWN)
                or (isinstance(err.get("input"), str) and err["input"] in secrets)
            )
            shown = "" if hidden else f" (got {err['input']!r})"
            lines.append(f"{path}: {message}{shown}")
    return lines


def _hint(model: type[BaseModel], loc: list[Any]) -> str:
    name = str(loc[-1])
    current: type[BaseModel] | None = model
    for part in loc[:-1]:
        if isinstance(part, int) or current is None:
            continue
        info = current.model_fields.get(part)
        current = nested_model(info.annotation)[0] if info is not None else None
    if any(word in name.lower() for word in _SECRET_HINTS):
        return (
            "; secrets never go in a config: put the key in an environment variable and "
            "give its NAME as backend.api_key_env"
        )
    if current is None:
        return ""
    allowed = list(current.model_fields)
    close = difflib.get_close_matches(name, allowed, n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (allowed: {', '.join(allowed)})"
