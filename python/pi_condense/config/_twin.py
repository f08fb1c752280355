"""The pydantic twins of the config classes (see :mod:`._plain`): a pydantic model per class,
built from its field specs on first use, that validates what the plain class does not take as
is and raises pydantic's errors."""

from __future__ import annotations

import sys
from typing import Any, Optional

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import ValidationError

from ._common import price_table_problem, to_camel
from .defaults import BatchingMode, Compat, PruneOn, SummarizerThinking

__all__ = ["frozen_error", "twin", "twin_instance", "validate"]

# The plain classes are :class:`._plain.PlainSettings` (not imported here: it imports this
# module when it needs it); one is told by its field specs.
PlainSettings = Any


def _is_plain(value: Any) -> bool:
    """Whether ``value`` is an instance of a plain config class."""
    return not isinstance(value, BaseModel) and isinstance(
        getattr(type(value), "model_fields", None), dict
    )


class _Twin(BaseModel):
    model_config = ConfigDict(
        frozen=True, populate_by_name=True, alias_generator=to_camel, extra="forbid"
    )

    @model_validator(mode="after")
    def _unknown_keys_are_unknown(self) -> _Twin:
        known = {field.alias for field in type(self).model_fields.values()}
        clash = [key for key in getattr(self, "unknown_keys", {}) if key in known]
        if clash:
            raise ValueError(f"unknown_keys holds known settings keys: {', '.join(clash)}")
        return self


def _check_prices(cls: Any, value: Any) -> Any:
    problem = price_table_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


# Validators of fields, by the field's name (the same in every class that has the field).
_FIELD_VALIDATORS = {"summarizer_prices": _check_prices}


_TWINS: dict[type[PlainSettings], type[BaseModel]] = {}


def twin(cls: type[PlainSettings]) -> type[BaseModel]:
    """The pydantic model of ``cls``: the same name, fields, aliases and constraints."""
    model = _TWINS.get(cls)
    if model is None:
        model = _TWINS[cls] = _build(cls)
    return model


def _build(cls: type[PlainSettings]) -> type[BaseModel]:
    namespace: dict[str, Any] = {
        "Any": Any,
        "Optional": Optional,
        "StrictBool": StrictBool,
        "StrictInt": StrictInt,
        "StrictStr": StrictStr,
        "BatchingMode": BatchingMode,
        "Compat": Compat,
        "PruneOn": PruneOn,
        "SummarizerThinking": SummarizerThinking,
    }
    fields: dict[str, Any] = {}
    validators: dict[str, Any] = {}
    info: Any
    for name, spec in cls.model_fields.items():
        nested = _nested_class(cls, spec.annotation)
        if nested is not None:
            annotation: Any = twin(nested)
            info = Field(default_factory=lambda nested=nested: twin_instance(nested()))
        else:
            annotation = eval(spec.annotation, namespace)  # our own field specs
            if spec.factory is not None:
                info = Field(default_factory=spec.factory, **spec.constraints)
            else:
                info = Field(default=spec.default, **spec.constraints)
        if name == "unknown_keys":
            info = Field(default_factory=dict, exclude=True)
        fields[name] = (annotation, info)
        check = _FIELD_VALIDATORS.get(name)
        if check is not None:
            validators[f"_check_{name}"] = field_validator(name, mode="before")(check)
    model: type[BaseModel] = create_model(
        cls.__name__, __base__=_Twin, __validators__=validators, **fields
    )
    return model


def _nested_class(cls: type[PlainSettings], annotation: str) -> Optional[type[PlainSettings]]:
    """The config class an annotation names (a nested object's field), if it names one."""
    value = getattr(sys.modules[cls.__module__], annotation, None)
    if (
        isinstance(value, type)
        and not issubclass(value, BaseModel)
        and isinstance(getattr(value, "model_fields", None), dict)
    ):
        return value
    return None


def twin_instance(obj: PlainSettings) -> BaseModel:
    """``obj`` as an instance of its twin (unvalidated: its values are valid)."""
    values = {name: twin_instance(value) if _is_plain(value) else value for name, value in obj}
    model: Any = twin(type(obj))
    instance: BaseModel = model.model_construct(**values)
    return instance


def validate(cls: type[PlainSettings], data: Any) -> dict[str, Any]:
    """The field values of ``data`` validated by the twin of ``cls`` (pydantic's
    ``ValidationError`` when they are wrong), nested objects as the plain classes."""
    originals: dict[int, PlainSettings] = {}
    if isinstance(data, dict):
        data = dict(data)
        for key, value in data.items():
            if _is_plain(value):
                # pydantic keeps a given instance of a nested model (revalidate: never).
                as_twin = twin_instance(value)
                originals[id(as_twin)] = value
                data[key] = as_twin
    validated = twin(cls).model_validate(data)
    values: dict[str, Any] = {}
    for name in cls.model_fields:
        value = getattr(validated, name)
        if isinstance(value, BaseModel):
            kept = originals.get(id(value))
            nested = _nested_class(cls, cls.model_fields[name].annotation)
            assert nested is not None
            value = kept if kept is not None else nested(**dict(value))
        values[name] = value
    return values


def frozen_error(cls: type[PlainSettings], name: str, value: Any) -> ValidationError:
    """pydantic's error for assigning ``name`` of a frozen instance of ``cls``."""
    return ValidationError.from_exception_data(
        cls.__name__, [{"type": "frozen_instance", "loc": (name,), "input": value}]
    )
