"""What the response cache keys an answer by: the request as sent, the model and the server.

- The **body** of a call is what its backend sends
  (:func:`~sampling_core.backends.base.request_body`: the backend's own
  ``build_body(request)``, the very method its calls send with, so the key and the request
  cannot drift). Every field of it is in the key: the model, the messages
  (or the prompt of completions), every option with the backend's defaults merged,
  ``response_format`` from ``format=``, the seed.
- The **identity** (:func:`cache_identity`) is the backend's kind (its class) and what its
  ``cache_identity()`` says of the model and the server (the HTTP backend: its endpoint; the
  local backend: its model file; the scripted backend: its replies).
- Without a seed, the attempt's place (subsample, attempt) is in the key too, so that n
  samples of one prompt stay n samples.
- A generation cut by early stop is kept under its request's key and the identities of the
  prefix checks that cut it (:func:`check_identity`, :func:`cut_by`), and replayed only
  where all of those checks are in force.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sampling_core.backends.base import GenerationRequest, request_body
from sampling_core.errors import SamplehooksError

__all__ = [
    "CacheError",
    "cache_identity",
    "canonical",
    "check_identity",
    "cut_by",
    "cut_identity",
    "identity_digest",
    "request_key",
]


class CacheError(SamplehooksError, ValueError):
    """The response cache file cannot be used (the message names it and says what to do)."""


def cache_identity(backend: object) -> dict[str, Any]:
    """What identifies the model behind ``backend``: its class (the backend's kind), and
    what its own ``cache_identity()`` returns when it has one; else its model file (with
    its size) when it has one, else its model name (``model`` or ``model_id``) and server
    URL (``base_url``).

    Raises :class:`CacheError` for a backend that says none of these: the cache could not
    tell its models apart.
    """
    cls = type(backend)
    kind = f"{cls.__module__}.{cls.__qualname__}"
    identity: dict[str, Any] = {"kind": kind}
    own = getattr(backend, "cache_identity", None)
    if callable(own):
        identity.update(own())
        return identity
    model_path = getattr(backend, "model_path", None)
    if isinstance(model_path, str | os.PathLike):
        identity.update(model_file_identity(model_path))
        return identity  # a local server's URL is a new port every start: not the model
    for name in ("model", "model_id", "base_url"):
        value = getattr(backend, name, None)
        if isinstance(value, str | int | float | bool):
            identity[name] = value
    if len(identity) == 1:
        raise CacheError(
            f"the response cache cannot tell the models of backend {kind} apart: it has no "
            "model, model_id, base_url or model_path attribute and no cache_identity() "
            "method; give it one (see the response cache's docs), or use no cache"
        )
    return identity


def model_file_identity(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A model file as the cache tells it apart: its resolved path and its size in bytes."""
    file = Path(path).expanduser().resolve()
    identity: dict[str, Any] = {"model_file": str(file)}
    with contextlib.suppress(OSError):
        identity["model_file_bytes"] = file.stat().st_size
    return identity


def identity_digest(backend: object) -> str:
    """The SHA-256 of ``backend``'s :func:`cache_identity` (as :func:`canonical` JSON): what
    entries are stored under (a scripted backend's identity holds all its replies)."""
    return hashlib.sha256(
        canonical(cache_identity(backend)).encode("utf-8", "surrogatepass")
    ).hexdigest()


def canonical(value: Any) -> str:
    """``value`` as canonical JSON (sorted keys, no spaces): what keys and identities hash."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_stable)


def request_key(identity: str, backend: object, request: GenerationRequest) -> str:
    """The cache key of ``request`` to ``backend`` (whose identity is ``identity``, its
    :func:`identity_digest`): a SHA-256 of the identity, the body the backend sends for it,
    and the attempt's place when the request carries no seed."""
    body = request_body(backend, request)
    data: dict[str, Any] = {"identity": identity, "body": body}
    seeded = request.options.get("seed") is not None or body.get("seed") is not None
    if not seeded and request.iteration is not None:
        data["place"] = [request.iteration.subsample_index, request.iteration.attempt]
    return hashlib.sha256(canonical(data).encode("utf-8", "surrogatepass")).hexdigest()


def check_identity(requirement: Any) -> str:
    """A prefix check as the cache names it: the requirement's description and the qualified
    name of its prefix function (or of the prefix object's class; a requirement with only a
    ``reader``: the reader factory's)."""
    prefix = requirement.prefix if requirement.prefix is not None else requirement.reader
    named = prefix if hasattr(prefix, "__qualname__") else type(prefix)
    where = f"{getattr(named, '__module__', '?')}.{named.__qualname__}"
    return f"{requirement.description} [{where}]"


def cut_identity(checks: Iterable[str]) -> str:
    """The identities of the prefix checks that cut a generation, as one text (``""``: a
    whole generation)."""
    named = sorted(set(checks))
    return canonical(named) if named else ""


def cut_by(checks: Iterable[Any], text: str) -> str | None:
    """The :func:`cut_identity` of ``text``, a generation early stop cut: the identities of
    the prefix checks of ``checks`` (requirements) that fail it, as the engine judged it when
    it cut it (a prefix check answers for the text alone, so it answers alike again).

    ``None`` when that cannot be told, and the text is not to be kept: a check raised or
    answered anything but a bool (its verdict is unknown), or none fails it.
    """
    failing: list[str] = []
    for requirement in checks:
        if requirement.prefix is None:  # judged by other means than its text alone
            return None
        try:
            verdict = requirement.prefix(text)
        except Exception:
            return None
        if verdict is False:
            failing.append(check_identity(requirement))
        elif verdict is not True:
            if hasattr(verdict, "close"):
                verdict.close()  # a coroutine: never awaited
            return None
    return cut_identity(failing) if failing else None


def _stable(value: Any) -> Any:
    """A JSON stand-in for a value JSON cannot hold (a pydantic model class: its schema)."""
    schema = getattr(value, "model_json_schema", None)
    if isinstance(value, type) and callable(schema):
        return {"schema": schema()}
    return repr(value)
