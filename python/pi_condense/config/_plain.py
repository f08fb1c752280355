"""The base of the config classes: frozen settings objects with pydantic's interface where the
package and its users touch it (construction by name or camelCase alias with validation,
``model_validate``, ``model_copy``, ``model_fields``, ``model_dump``, ``dict(obj)``), without
importing pydantic for the values that are already right.

Each field states its pydantic annotation and constraints once (:class:`FieldSpec`). A value of
the exact type within its constraints is taken as is, which is what pydantic returns for it;
anything else (a list for a tuple, an int for a float, a dict for a nested object, a wrong
value, an unknown key) is handed to the class's pydantic twin (:mod:`._twin`, built on first
use), which converts it as pydantic does or raises pydantic's own ``ValidationError``. So the
values and the error messages are pydantic's, and a command that reads its settings from a
normal file never imports pydantic (about 0.1 s of start-up).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any, Callable, ClassVar, Optional

from ..js.values import MISSING
from ._common import to_camel

__all__ = [
    "FieldSpec",
    "PlainSettings",
    "choice_check",
    "instance_check",
    "int_check",
    "is_bool",
    "is_str",
    "is_str_dict",
    "is_str_tuple",
    "optional_bool",
    "optional_fraction",
]


class FieldSpec:
    """One field: its name, camelCase alias, default (or factory), the pydantic annotation
    (evaluated by :mod:`._twin`) and constraints, and the check of values taken as they are."""

    __slots__ = ("alias", "annotation", "check", "constraints", "default", "factory", "name")

    def __init__(
        self,
        name: str,
        annotation: str,
        check: Callable[[Any], bool],
        default: Any = MISSING,
        *,
        factory: Optional[Callable[[], Any]] = None,
        **constraints: Any,
    ) -> None:
        self.name = name
        self.alias = to_camel(name)
        self.annotation = annotation
        self.check = check
        self.default = default
        self.factory = factory
        self.constraints = constraints

    def default_value(self) -> Any:
        return self.factory() if self.factory is not None else self.default

    def __repr__(self) -> str:
        return f"FieldSpec({self.name!r}, alias={self.alias!r}, annotation={self.annotation!r})"


class PlainSettings:
    """A frozen settings object (see the module docs). Subclasses list their fields in
    ``model_fields`` (``unknown_keys`` first) and their private attributes' factories in
    ``_PRIVATE``."""

    model_fields: ClassVar[dict[str, FieldSpec]] = {}
    _PRIVATE: ClassVar[dict[str, Callable[[], Any]]] = {}
    # (name or alias -> name, the aliases), per class (filled on first use).
    _KEYS: ClassVar[Optional[tuple[dict[str, str], frozenset[str]]]] = None

    unknown_keys: dict[str, Any]

    def __init__(self, **data: Any) -> None:
        values = _fast_values(type(self), data)
        if values is None:
            values = _twin().validate(type(self), data)
        self._set(values)

    def _set(self, values: Mapping[str, Any]) -> None:
        state = self.__dict__
        state.update(values)
        for name, make in self._PRIVATE.items():
            state[name] = make()

    @classmethod
    def model_validate(cls, obj: Any) -> Any:
        """``obj`` (an instance, or a mapping of names or aliases) validated as pydantic does."""
        if isinstance(obj, cls):
            return obj
        if type(obj) is dict and all(type(key) is str for key in obj):
            return cls(**obj)
        new = cls.__new__(cls)
        new._set(_twin().validate(cls, obj))
        return new

    def model_copy(self, *, update: Optional[Mapping[str, Any]] = None, deep: bool = False) -> Any:
        """A copy with ``update`` (field names) applied unvalidated, as pydantic's."""
        new = type(self).__new__(type(self))
        state = copy.deepcopy(self.__dict__) if deep else dict(self.__dict__)
        if update:
            state.update(update)
        new.__dict__.update(state)
        return new

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """pydantic's ``model_dump`` (its keyword arguments too)."""
        dumped: dict[str, Any] = _twin().twin_instance(self).model_dump(**kwargs)
        return dumped

    def model_dump_json(self, **kwargs: Any) -> str:
        """pydantic's ``model_dump_json``."""
        dumped: str = _twin().twin_instance(self).model_dump_json(**kwargs)
        return dumped

    @classmethod
    def model_json_schema(cls, **kwargs: Any) -> dict[str, Any]:
        """pydantic's JSON schema of the class."""
        schema: dict[str, Any] = _twin().twin(cls).model_json_schema(**kwargs)
        return schema

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        state = self.__dict__
        for name in self.model_fields:
            yield name, state[name]

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # unknown_keys is a dict, as pydantic's

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in self)
        return f"{type(self).__name__}({fields})"

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        raise _twin().frozen_error(type(self), name, value)

    def __delattr__(self, name: str) -> None:
        if name.startswith("_"):
            object.__delattr__(self, name)
            return
        raise _twin().frozen_error(type(self), name, None)


def _twin() -> Any:
    """:mod:`._twin`, imported now (it imports pydantic)."""
    from . import _twin

    return _twin


def _fast_values(cls: type[PlainSettings], data: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The field values of ``data`` when each is taken as is, else None (ask the twin)."""
    if cls.__dict__.get("_KEYS") is None:
        names = {spec.name: spec.name for spec in cls.model_fields.values()}
        aliases = {spec.alias: spec.name for spec in cls.model_fields.values()}
        cls._KEYS = ({**names, **aliases}, frozenset(aliases))
    keys, aliases_ = cls.__dict__["_KEYS"]
    given: dict[str, Any] = {}
    for key, value in data.items():
        name = keys.get(key)
        if name is None or name in given:
            return None
        given[name] = value
    values: dict[str, Any] = {}
    for name, spec in cls.model_fields.items():
        value = given.get(name, MISSING)
        if value is MISSING:
            values[name] = spec.default_value()
        elif spec.check(value):
            values[name] = value
        else:
            return None
    unknown = values["unknown_keys"]
    if any(key in aliases_ for key in unknown):
        return None  # a known key among the unknown ones: the twin's error
    values["unknown_keys"] = dict(unknown)
    return values


# ------------------------------------------------------------------ checks of exact values


def is_bool(value: Any) -> bool:
    return type(value) is bool


def is_str(value: Any) -> bool:
    return type(value) is str


def int_check(
    *, ge: Optional[int] = None, gt: Optional[int] = None, optional: bool = False
) -> Callable[[Any], bool]:
    """An exact int (not bool) within ``ge`` / ``gt``; None too when ``optional``."""

    def check(value: Any) -> bool:
        if value is None:
            return optional
        if type(value) is not int:
            return False
        return (ge is None or value >= ge) and (gt is None or value > gt)

    return check


def optional_bool(value: Any) -> bool:
    return value is None or type(value) is bool


def optional_fraction(value: Any) -> bool:
    """None or a float in (0, 1] (pydantic converts an int, so it is not taken as is)."""
    return value is None or (type(value) is float and 0 < value <= 1)


def choice_check(choices: tuple[str, ...]) -> Callable[[Any], bool]:
    return lambda value: type(value) is str and value in choices


def is_str_tuple(value: Any) -> bool:
    return type(value) is tuple and all(type(item) is str for item in value)


def is_str_dict(value: Any) -> bool:
    return type(value) is dict and all(type(key) is str for key in value)


def instance_check(cls: type[Any]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, cls)
