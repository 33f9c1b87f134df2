"""Read-only views of the values an observe-only hook's payload carries.

A plugin observing ``sampling_iteration`` must not be able to change the answer through
``payload.generation.text`` or ``payload.validations[0]``. :func:`read_only` returns a
view of a value that refuses every write with :class:`~hook_specs.errors.ReadOnlyFieldError`
naming the path written (``generation.text``, ``validations[0].passed``) and the hook:

* a list becomes a :class:`ReadOnlyList` (a ``list``) of read-only items, a tuple a
  :class:`ReadOnlyTuple` (a ``tuple``, so that whatever serializes the original, such as
  pydantic, takes the view as it is, without a warning);
* a dict becomes a :class:`ReadOnlyDict` (a ``dict``) of read-only values;
* a dataclass instance becomes a copy of a read-only subclass of its class (equal to the
  original, ``isinstance`` of its class), with read-only field values;
* anything else (numbers, strings, exceptions, other objects) is returned as it is.

Payloads make the views lazily, on the first read of a field (see
:class:`hook_specs.payloads.ObserveOnlyPayload`), so a plugin that reads nothing pays
nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NoReturn

from hook_specs.errors import ReadOnlyFieldError

_PLAIN = frozenset({str, int, float, bool, bytes, type(None)})
"""Types whose values need no view (immutable): taken as they are, with no path made."""


def read_only(value: Any, path: str, hook: str) -> Any:
    """A view of ``value`` that refuses writes, naming ``path`` and ``hook``."""
    kind = type(value)
    if kind in _PLAIN or isinstance(value, _ReadOnly):
        return value
    if isinstance(value, list):
        return ReadOnlyList(value, path, hook)
    if isinstance(value, tuple):
        return ReadOnlyTuple(value, path, hook)
    if isinstance(value, dict):
        return ReadOnlyDict(value, path, hook)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _read_only_dataclass(value, path, hook)
    return value


class _ReadOnly:
    """Marks a read-only view (never wrapped twice)."""

    __slots__ = ()


def _refuse(path: str, hook: str) -> NoReturn:
    raise ReadOnlyFieldError(path, hook, frozenset())


class ReadOnlyList(list, _ReadOnly):  # type: ignore[type-arg]
    """A list whose items are read-only and that refuses every change."""

    __slots__ = ("_hook", "_path")

    def __init__(self, items: Any, path: str, hook: str) -> None:
        list.__init__(self, items)
        for i, item in enumerate(self):  # plain items stand as they are: no path is made
            if type(item) not in _PLAIN:
                list.__setitem__(self, i, read_only(item, f"{path}[{i}]", hook))
        self._path = path
        self._hook = hook

    def _refused(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self._path, self._hook)

    append = extend = insert = remove = pop = clear = sort = reverse = _refused
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refused

    def __reduce__(self) -> Any:  # copies and pickles are plain lists
        return (list, (list(self),))


class ReadOnlyTuple(tuple, _ReadOnly):  # type: ignore[type-arg]
    """A tuple whose items are read-only (a tuple refuses every change already)."""

    __slots__ = ()

    def __new__(cls, items: Any, path: str, hook: str) -> ReadOnlyTuple:
        return super().__new__(
            cls,
            (
                item if type(item) in _PLAIN else read_only(item, f"{path}[{i}]", hook)
                for i, item in enumerate(items)
            ),
        )

    def __reduce__(self) -> Any:  # copies and pickles are plain tuples
        return (tuple, (tuple(self),))


class ReadOnlyDict(dict, _ReadOnly):  # type: ignore[type-arg]
    """A dict whose values are read-only and that refuses every change."""

    __slots__ = ("_hook", "_path")

    def __init__(self, items: Any, path: str, hook: str) -> None:
        dict.__init__(self, items)
        for k, v in items.items():  # plain values stand as they are: no path is made
            if type(v) not in _PLAIN:
                dict.__setitem__(self, k, read_only(v, f"{path}[{k!r}]", hook))
        self._path = path
        self._hook = hook

    def _refused(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self._path, self._hook)

    update = setdefault = pop = popitem = clear = _refused
    __setitem__ = __delitem__ = __ior__ = _refused

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


_VIEW_TYPES: dict[type, tuple[type, tuple[str, ...]]] = {}


def _read_only_dataclass(value: Any, path: str, hook: str) -> Any:
    cls = type(value)
    made = _VIEW_TYPES.get(cls)
    if made is None:  # the view type, and the field names (read once: fields() is slow)
        made = _VIEW_TYPES[cls] = (
            _make_view_type(cls),
            tuple(f.name for f in dataclasses.fields(cls)),
        )
    view_type, names = made
    view = object.__new__(view_type)
    for name in names:
        inner = getattr(value, name)
        if type(inner) not in _PLAIN:
            inner = read_only(inner, f"{path}.{name}", hook)
        object.__setattr__(view, name, inner)
    object.__setattr__(view, "_ro_path", path)
    object.__setattr__(view, "_ro_hook", hook)
    return view


def _make_view_type(cls: type) -> type:
    names = tuple(f.name for f in dataclasses.fields(cls))

    def __setattr__(self: Any, name: str, value: Any) -> NoReturn:
        _refuse(f"{self._ro_path}.{name}", self._ro_hook)

    def __delattr__(self: Any, name: str) -> NoReturn:
        _refuse(f"{self._ro_path}.{name}", self._ro_hook)

    def __eq__(self: Any, other: object) -> bool:
        if not isinstance(other, cls):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in names)

    def __reduce__(self: Any) -> Any:  # copies and pickles are of the original class
        return (_rebuild, (cls, {n: getattr(self, n) for n in names}))

    namespace = {
        "__slots__": ("_ro_hook", "_ro_path"),
        "__setattr__": __setattr__,
        "__delattr__": __delattr__,
        "__eq__": __eq__,
        "__hash__": cls.__hash__,
        "__reduce__": __reduce__,
        "__doc__": f"A read-only view of a {cls.__name__}.",
    }
    return type(f"ReadOnly{cls.__name__}", (cls, _ReadOnly), namespace)


def _rebuild(cls: type, fields: dict[str, Any]) -> Any:
    plain = {k: _plain(v) for k, v in fields.items()}
    return cls(**plain)


def _plain(value: Any) -> Any:
    if isinstance(value, ReadOnlyList):
        return list(value)
    if isinstance(value, ReadOnlyTuple):
        return tuple(value)
    return value
