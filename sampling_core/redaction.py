"""Keeping secrets out of everything samplehooks writes: one place that knows them, one scrub.

Secrets are *registered* where they are read (the API key a backend sends, the token of an
``Authorization`` or ``api-key`` header, the credentials in a base URL), and the values of
environment variables whose names say they hold one (``*KEY*``, ``*TOKEN*``, ``*SECRET*``,
``*PASSWORD*``) count too. Every exit point (the records and events files, the tracing
plugin's log events, the command line's output, backend error messages, and what a backend
returned before the engine keeps it) goes through :func:`scrub` or :func:`scrub_data`.

A registered secret is matched by any piece of it at least :data:`MIN_PIECE` characters long:
a server or a truncation may show part of a key, and 8 random characters of a key are as good
as the key to whoever holds the rest, or can guess the prefix. A secret shorter than that is
matched whole. Values only known from the environment (never sent) are matched whole; they
are read when a backend, a records or events writer, a logger or a command starts
(:func:`refresh_environment`).

The same pass replaces text that cannot be written as UTF-8 (lone surrogates) with U+FFFD,
so one odd character in a model's reply never makes a file unwritable or unreadable.

URL-shaped settings (a backend's ``base_url``, a plugin's ``tracking_uri``, an environment
variable holding a URL) may carry credentials: a user and password, a query value named
like a key (``?api-key=...``). What samplehooks *shows* of settings (``effective_config.yaml``,
the settings in ``meta.json`` and in run hook payloads, MLflow params, log events, stdout
and stderr) goes through :func:`shown` / :func:`shown_data`, which scrub and also mask the
credentials of every URL (:func:`mask_url_credentials`), however short they are; and the
long credentials of URLs in the environment are secrets, scrubbed everywhere.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

__all__ = [
    "KNOWN_SECRETS",
    "MASK",
    "MIN_PIECE",
    "clean_text",
    "environment_secrets",
    "mask_url_credentials",
    "has_secrets",
    "json_text",
    "one_json_line",
    "printable",
    "refresh_environment",
    "register_headers",
    "register_secret",
    "register_url_secrets",
    "scrub",
    "scrub_data",
    "shown",
    "shown_data",
    "url_secrets",
    "without_credentials",
]

MASK = "***"
MIN_PIECE = 8
_NAME_HINTS = ("key", "token", "secret", "password")
_QUERY_HINTS = ("key", "token", "secret", "password", "sig", "auth", "code", "credential")
_AUTH_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key"})

_SURROGATE = re.compile("[\ud800-\udfff]")
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>`]+")
_QUERY_PAIR = re.compile(r"([?&;])([^=&#;]*)=([^&#;]*)")
_lock = threading.Lock()
_registered: set[str] = set()
_environment: frozenset[str] = frozenset()
_pieces: frozenset[str] = frozenset()


class KnownSecrets:
    """The secrets known now (:attr:`whole`: each matched whole, longest first), in one
    attribute: a reply's boundary reads it (``KNOWN_SECRETS.whole``) to decide whether
    there is anything to scrub, without a call per reply."""

    __slots__ = ("whole",)

    def __init__(self) -> None:
        self.whole: tuple[str, ...] = ()


KNOWN_SECRETS = KnownSecrets()
"""The process's :class:`KnownSecrets` (its tuple is replaced, under the lock, when a secret
is added)."""


def register_secret(value: str | None) -> None:
    """Remember ``value`` as a secret for the life of the process (empty values are ignored)."""
    global _pieces
    if not value or value in _registered:
        return
    with _lock:
        _registered.add(value)
        pieces = set(_pieces)
        if len(value) >= MIN_PIECE:
            pieces.update(value[i : i + MIN_PIECE] for i in range(len(value) - MIN_PIECE + 1))
        _pieces = frozenset(pieces)
        _update_whole()


def refresh_environment() -> None:
    """Read the environment's secrets again (done when a backend, a sampler, a writer or a
    command starts: reading ``os.environ`` on every scrub would cost more than the scrub)."""
    global _environment
    found = environment_secrets()
    if found != _environment:
        with _lock:
            _environment = found
            _update_whole()


def _update_whole() -> None:
    KNOWN_SECRETS.whole = tuple(sorted(_registered | _environment, key=len, reverse=True))


def register_headers(headers: Iterable[tuple[str, str]]) -> None:
    """Register the credentials of the authentication headers among ``headers``."""
    for name, value in headers:
        if name.lower() in _AUTH_HEADERS and value.strip():
            register_secret(value.split()[-1])
            register_secret(value.strip())


def register_url_secrets(text: str) -> None:
    """Register the credentials (8 characters or more) of every URL in ``text`` (a setting
    that may hold one: a base URL, a tracking URI), so that they are scrubbed everywhere,
    also where a library shows them without their URL."""
    if "://" in text:
        for url in _URL.findall(text):
            for secret in url_secrets(url):
                if len(secret) >= MIN_PIECE:
                    register_secret(secret)


def environment_secrets() -> frozenset[str]:
    """The values (8 characters or more) of environment variables named like secrets, and
    the credentials (8 characters or more) of URLs in any environment variable."""
    found = {
        value
        for name, value in os.environ.items()
        if len(value) >= MIN_PIECE and any(hint in name.lower() for hint in _NAME_HINTS)
    }
    for value in os.environ.values():
        if "://" in value:
            found.update(
                secret
                for url in _URL.findall(value)
                for secret in url_secrets(url)
                if len(secret) >= MIN_PIECE
            )
    return frozenset(found)


def mask_url_credentials(text: str) -> str:
    """``text`` with the credentials of every URL in it as ``***``: the user and password
    (``https://***@host/...``) and each query value named like a key (``?api-key=***``)."""
    if "://" not in text:
        return text
    return _URL.sub(_masked_url, text)


def _masked_url(found: re.Match[str]) -> str:
    url = found.group(0)
    scheme, rest = url.split("://", 1)
    ends = [at for at in (rest.find(c) for c in "/?#") if at >= 0]
    authority, tail = rest[: min(ends)] if ends else rest, rest[min(ends) :] if ends else ""
    if "@" in authority:
        authority = f"{MASK}@{authority.rsplit('@', 1)[1]}"
    if "?" in tail:
        path, query = tail.split("?", 1)
        tail = path + _QUERY_PAIR.sub(_masked_pair, "?" + query)
    return f"{scheme}://{authority}{tail}"


def _masked_pair(pair: re.Match[str]) -> str:
    separator, name, value = pair.groups()
    if value and any(hint in name.lower() for hint in _QUERY_HINTS):
        return f"{separator}{name}={MASK}"
    return pair.group(0)


def shown(text: str) -> str:
    """``text`` as samplehooks shows settings and messages: :func:`scrub`, and the
    credentials of every URL masked (:func:`mask_url_credentials`)."""
    return mask_url_credentials(scrub(text))


def shown_data(value: Any) -> Any:
    """A copy of JSON-like ``value`` with every string (and key) :func:`shown`."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {(shown(k) if isinstance(k, str) else k): shown_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [shown_data(v) for v in value]
    return value


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries: its user and password, and query values named like keys."""
    try:
        parts = urlsplit(url)
        found = [parts.username or "", parts.password or ""]
    except ValueError:
        return []
    for name, value in parse_qsl(parts.query, keep_blank_values=False):
        if any(hint in name.lower() for hint in _QUERY_HINTS):
            found.append(value)
    return [value for value in found if value]


def without_credentials(url: str) -> str:
    """``url`` with its user, password and query removed (what is safe to show and store)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port is not None else host
    except ValueError:
        return MASK
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def clean_text(text: str) -> str:
    """``text`` with what cannot be encoded as UTF-8 (lone surrogates) replaced by U+FFFD."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def has_secrets() -> bool:
    """Whether any secret is known (nothing to scrub otherwise, but unencodable text)."""
    return bool(KNOWN_SECRETS.whole)


def scrub(text: str) -> str:
    """``text`` with every secret (and every long piece of a registered one) as ``***``."""
    return _scrub(text, KNOWN_SECRETS.whole)


def scrub_data(value: Any) -> Any:
    """A copy of JSON-like ``value`` (dicts, lists, strings) with every string scrubbed."""
    return _scrub_data(value, KNOWN_SECRETS.whole)


def _scrub_data(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return _scrub(value, secrets)
    if isinstance(value, dict):
        return {
            (_scrub(k, secrets) if isinstance(k, str) else k): _scrub_data(v, secrets)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_scrub_data(v, secrets) for v in value]
    return value


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    text = clean_text(text)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    pieces = _pieces
    if not pieces or len(text) < MIN_PIECE or not any(p in text for p in pieces):
        return text
    hidden = bytearray(len(text))
    for start in range(len(text) - MIN_PIECE + 1):
        if text[start : start + MIN_PIECE] in pieces:
            hidden[start : start + MIN_PIECE] = b"\x01" * MIN_PIECE
    out, index = [], 0
    while index < len(text):
        if hidden[index]:
            out.append(MASK)
            while index < len(text) and hidden[index]:
                index += 1
        else:
            out.append(text[index])
            index += 1
    return "".join(out)


# What a terminal acts on instead of showing: C0 controls (ESC starts every escape
# sequence; \r and \b overwrite), DEL, C1 controls (0x9b is a one-byte CSI), the bidi
# overrides and isolates that reorder what is shown, and line and paragraph separators.
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_UNPRINTABLE = re.compile(f"[{_CONTROLS}]")
_UNPRINTABLE_LINE = re.compile(f"[\t\n{_CONTROLS}]")


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` as a terminal may show it: every control character a terminal would act on
    (an escape sequence's ESC, ``\r``, ``\b``, C1 controls, bidi overrides) written as its
    escape (``\x1b``, ``\u202e``), so text from a model, a dataset or a server can neither
    restyle, move nor rewrite what is on the screen. One line unless ``lines``: then
    newlines and tabs are kept."""
    pattern = _UNPRINTABLE if lines else _UNPRINTABLE_LINE
    if text.isprintable() or not pattern.search(text):
        return text
    return pattern.sub(_escaped, text)


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def json_text(data: Any, *, indent: int | None = None, default: Any = None) -> str:
    """``data`` as JSON for a terminal or a file: readable text (not ASCII-escaped), but
    every character :func:`printable` escapes (DEL, C1 controls such as a one-byte CSI,
    bidi overrides, line and paragraph separators) written as its ``\\uXXXX`` escape, so
    the JSON stays valid, one value per line where asked, and cannot drive a terminal.
    ``json.dumps(..., ensure_ascii=False)`` escapes C0 controls but not these."""
    separators = None if indent is not None else (",", ":")
    text = json.dumps(
        data, ensure_ascii=False, indent=indent, separators=separators, default=default
    )
    if text.isprintable() or not _UNPRINTABLE.search(text):
        return text
    # Outside strings JSON has only ASCII and the newlines of ``indent``, which are kept.
    return _UNPRINTABLE.sub(_json_escaped, text)


def _json_escaped(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group(0)):04x}"


def one_json_line(data: Any, default: Any = None) -> str:
    """``data`` as one JSON line (newline included), written by :func:`json_text`, so the
    characters some readers take for line ends (U+2028, U+2029, U+0085) are escaped and the
    line is one line for every reader."""
    return json_text(data, default=default) + "\n"


class ScrubbedLogger:
    """A structlog logger whose events' fields are scrubbed before they go anywhere."""

    def __init__(self, logger: Any) -> None:
        refresh_environment()
        self._logger = logger

    def _emit(self, method: str, event: str, fields: dict[str, Any]) -> Any:
        return getattr(self._logger, method)(event, **shown_data(fields))

    def debug(self, event: str, **fields: Any) -> Any:
        """Emit a debug event."""
        return self._emit("debug", event, fields)

    def info(self, event: str, **fields: Any) -> Any:
        """Emit an info event."""
        return self._emit("info", event, fields)

    def warning(self, event: str, **fields: Any) -> Any:
        """Emit a warning event."""
        return self._emit("warning", event, fields)

    def error(self, event: str, **fields: Any) -> Any:
        """Emit an error event."""
        return self._emit("error", event, fields)


class ScrubbedStream:
    """A text stream (stdout, stderr) that scrubs what is written to it, and writes text it
    cannot encode with replacement characters instead of raising."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: Any) -> int:
        """Write ``text`` :func:`shown` (bytes are passed through, as the stream takes them)."""
        if not isinstance(text, str):
            return self._stream.write(text)
        text = shown(text)
        encoding = getattr(self._stream, "encoding", None) or "utf-8"
        try:
            text.encode(encoding)
        except (UnicodeEncodeError, LookupError):
            text = text.encode(encoding, "replace").decode(encoding, "replace")
        self._stream.write(text)
        return len(text)

    def __getattr__(self, name: str) -> Any:
        if name == "buffer":  # bytes written there would skip the scrub
            raise AttributeError(name)
        return getattr(self._stream, name)
