"""Configuration: the ``contextPrune`` block of Pi's ``settings.json``.

The settings file is shared with the TypeScript extension, so keys are camelCase
(``minBatchChars``) while the Python attributes are snake_case (``min_batch_chars``);
both spellings are accepted when constructing the models directly.

Two normalization modes, chosen by the ``compat`` key (ours; the reference ignores it):

- ``"default"``: the reference's rules (07-config section 3) plus a deep merge of the
  nested ``chainCompression`` / ``purgeErrors`` objects, so a partial object keeps the
  defaults of its missing keys; wrong-typed lists or nested objects raise ``ConfigError``.
- ``"reference"``: exactly what the TypeScript reference keeps. Nested objects are taken
  verbatim, so a key missing from a partial object stays absent (``None``), and wrong-typed
  values never raise: they are written back verbatim and read with JavaScript semantics.

How consumers read nested values in reference mode (``None`` means absent):

- booleans (``enabled``, ``strip_final_assistant_thinking``, ``fuse_range_summary``): absent
  is falsy, so ``if cfg.chain_compression.fuse_range_summary:`` is right in both modes;
- ``rolling_window`` absent: automatic compression selects no chain (``n - undefined`` is
  NaN); use ``ChainCompressionConfig.auto_compress_count``;
- ``cooldown_turns`` / ``min_arg_chars`` absent: every comparison is false, so an errored
  call's arguments are purged at once whatever their size; use
  ``PurgeErrorsConfig.should_purge``.

In reference mode a string ``protectedTools`` matches by substring (``String.includes``);
``Config.is_protected_tool`` implements that, ``Config.protected_tools`` cannot.
"""

from __future__ import annotations

import copy
import difflib
import json
import math
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, ClassVar, Literal, Optional, Union, cast, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from . import jsjson
from .errors import ConfigError, JsonError
from .fsio import read_regular, write_atomic

__all__ = [
    "BATCHING_MODES",
    "ENV_AGENT_DIR",
    "PRUNE_ON_MODES",
    "SETTINGS_KEY",
    "SUMMARIZER_PRICE_KEYS",
    "SUMMARIZER_THINKING_LEVELS",
    "BatchingMode",
    "ChainCompressionConfig",
    "Compat",
    "Config",
    "PruneOn",
    "PurgeErrorsConfig",
    "SummarizerThinking",
    "agent_dir",
    "default_settings",
    "js_parse_float",
    "js_parse_int",
    "load_config",
    "normalize",
    "parse_setting_value",
    "save_config",
    "settings_path",
]

Compat = Literal["default", "reference"]
PruneOn = Literal["agent-message", "on-demand"]
BatchingMode = Literal["turn", "agent-message"]
SummarizerThinking = Literal["default", "off", "minimal", "low", "medium", "high", "xhigh"]

SETTINGS_KEY = "contextPrune"
"""Top-level key of ``settings.json`` holding the configuration."""

ENV_AGENT_DIR = "PI_CODING_AGENT_DIR"
"""Environment variable overriding Pi's agent directory."""

SUMMARIZER_THINKING_LEVELS: tuple[tuple[str, str], ...] = (
    ("default", "Default"),
    ("off", "Off"),
    ("minimal", "Minimal"),
    ("low", "Low"),
    ("medium", "Medium"),
    ("high", "High"),
    ("xhigh", "XHigh"),
)
"""``(value, label)`` of every summarizer thinking level, in UI order."""

PRUNE_ON_MODES: tuple[tuple[str, str], ...] = (
    ("agent-message", "On agent message"),
    ("on-demand", "On demand"),
)
"""``(value, label)`` of every trigger mode, in UI order."""

BATCHING_MODES: tuple[tuple[str, str], ...] = (
    ("turn", "Per turn"),
    ("agent-message", "Per agent message"),
)
"""``(value, label)`` of every batching mode, in UI order."""

_LEGACY_PRUNE_ON = ("every-turn", "on-context-tag", "agentic-auto")
_MAX_SAFE_INTEGER = 2**53
_ABSENT: Any = object()

# JavaScript's whitespace set (differs from Python's str.isspace).
_JS_WS = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_JS_WS_SPLIT = re.compile("[" + re.escape(_JS_WS) + ",]+")
_INT_PREFIX = re.compile(r"[+-]?[0-9]+")
_FLOAT_PREFIX = re.compile(r"[+-]?(?:Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)")
_NUMBER_LITERAL = re.compile(
    r"[+-]?(?:Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
    r"|0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+"
)


# --------------------------------------------------------------------------- JS helpers


def js_parse_int(text: str) -> Optional[int]:
    """JavaScript ``parseInt(text, 10)``; ``None`` where JS yields NaN or an infinite value.

    Leading JS whitespace is skipped, an optional sign is accepted and the longest digit
    prefix is read: ``"12abc"`` -> 12, ``"0x10"`` -> 0, ``"abc"`` -> None.
    """
    match = _INT_PREFIX.match(text.lstrip(_JS_WS))
    if match is None:
        return None
    # Through float: JS numbers are doubles, so long digit runs round (or overflow).
    value = float(match.group())
    return int(value) if math.isfinite(value) else None


def js_parse_float(text: str) -> Optional[float]:
    """JavaScript ``parseFloat(text)``; ``None`` where JS yields NaN or an infinite value.

    ``"0.8abc"`` -> 0.8, ``".5"`` -> 0.5, ``"1e"`` -> 1.0, ``"abc"`` -> None.
    """
    match = _FLOAT_PREFIX.match(text.lstrip(_JS_WS))
    if match is None:
        return None
    value = float(match.group())
    return value if math.isfinite(value) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _js_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if _is_number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _js_truthy(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if _is_number(value):
        return value != 0 and not math.isnan(value)
    if isinstance(value, str):
        return value != ""
    return True


def _js_join_element(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if _is_number(value):
        return repr(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join(_js_join_element(item) for item in value)
    return "[object Object]"


def _js_to_number(value: Any) -> float:
    """JavaScript ``Number(value)`` for a JSON value."""
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if _is_number(value):
        return float(value)
    if isinstance(value, list):
        value = _js_join_element(value)
    if not isinstance(value, str):
        return math.nan
    text = value.strip(_JS_WS)
    if text == "":
        return 0.0
    if _NUMBER_LITERAL.fullmatch(text) is None:
        return math.nan
    if text[:2].lower() in ("0x", "0o", "0b"):
        return float(int(text, 0))
    return float(text)


def _reference_count(value: Any) -> Optional[int]:
    """A threshold as the reference's comparisons see it, as an integer (None = NaN).

    Every use compares an integer with the value (``age < cooldownTurns``,
    ``length < minArgChars``) or slices with ``n - rollingWindow``; for integers those
    behave exactly like comparing with ``ceil(value)``.
    """
    number = _js_to_number(value)
    if math.isnan(number):
        return None
    if math.isinf(number):
        return _MAX_SAFE_INTEGER if number > 0 else -_MAX_SAFE_INTEGER
    return math.ceil(number)


def _as_double(value: int) -> int:
    # JS numbers are doubles: past 2**53 an integer is the nearest double's value.
    return value if abs(value) <= _MAX_SAFE_INTEGER else int(float(value))


def _js_spread(value: Any) -> dict[str, Any]:
    """The object ``{...value}`` for a JSON value."""
    if isinstance(value, dict):
        return copy.deepcopy(value)
    if isinstance(value, list):
        return {str(i): copy.deepcopy(item) for i, item in enumerate(value)}
    if isinstance(value, str):
        units = value.encode("utf-16-le", "surrogatepass")
        return {
            str(i): units[2 * i : 2 * i + 2].decode("utf-16-le", "surrogatepass")
            for i in range(len(units) // 2)
        }
    return {}


def _describe(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --------------------------------------------------------------------------- defaults


def default_settings() -> dict[str, Any]:
    """A fresh copy of the reference's ``DEFAULT_CONFIG``, in its saved key order."""
    return {
        "enabled": False,
        "showPruneStatusLine": True,
        "summarizerModel": "default",
        "summarizerThinking": "default",
        "pruneOn": "agent-message",
        "batchingMode": "turn",
        "quietOversizedSkips": False,
        "minBatchChars": 1000,
        "recoveryGraceTurns": 3,
        "summarizerIdleTimeoutMs": 20000,
        "summarizerMaxTimeoutMs": 180000,
        "protectedTools": [],
        "protectedPaths": ["**/skills/**/*.md"],
        "chainCompression": {
            "enabled": True,
            "rollingWindow": 3,
            "stripFinalAssistantThinking": True,
            "fuseRangeSummary": True,
        },
        "purgeErrors": {"enabled": True, "cooldownTurns": 2, "minArgChars": 500},
        "dedupByContentHash": True,
        "autoBudgetThreshold": None,
        "spillThreshold": 65536,
        "spillPreviewBytes": 2048,
        "budgetTurnDelta": None,
    }


_DEFAULTS = default_settings()

# Ours only (the reference ignores them): written after the reference's keys, and only when
# present in the source object or changed from the default.
_OURS_DEFAULTS: dict[str, Any] = {
    "summarizerConcurrency": 4,
    "summarizerRetries": 2,
    "summarizerPrices": {},
}
_ALL_DEFAULTS: dict[str, Any] = {**_DEFAULTS, **_OURS_DEFAULTS}

SUMMARIZER_PRICE_KEYS: tuple[str, ...] = ("input", "output", "cacheRead", "cacheWrite")
"""Keys of one ``summarizerPrices`` entry: dollars per million tokens of each kind."""


# --------------------------------------------------------------------------- models


class _SettingsModel(BaseModel):
    model_config = ConfigDict(
        frozen=True, populate_by_name=True, alias_generator=to_camel, extra="forbid"
    )

    unknown_keys: dict[str, Any] = Field(default_factory=dict, exclude=True)
    """Keys this version does not know, kept verbatim and written back after the known ones."""

    @model_validator(mode="after")
    def _unknown_keys_are_unknown(self) -> _SettingsModel:
        known = {field.alias for field in type(self).model_fields.values()}
        clash = [key for key in self.unknown_keys if key in known]
        if clash:
            raise ValueError(f"unknown_keys holds known settings keys: {', '.join(clash)}")
        return self


class _NestedConfig(_SettingsModel):
    # Reference mode only: the raw settings value and the field values derived from it,
    # so an unchanged object is written back verbatim and an edited one like `{...raw, k: v}`.
    _raw: Any = PrivateAttr(default=_ABSENT)
    _derived: Optional[dict[str, Any]] = PrivateAttr(default=None)

    _BOOL_KEYS: ClassVar[tuple[str, ...]] = ()
    _COUNT_KEYS: ClassVar[tuple[str, ...]] = ()

    def _current(self) -> dict[str, Any]:
        values = {
            field.alias: getattr(self, name)
            for name, field in type(self).model_fields.items()
            if name != "unknown_keys"
        }
        values["\0unknown"] = self.unknown_keys
        return cast("dict[str, Any]", copy.deepcopy(values))

    def _to_settings_value(self) -> Any:
        current = self._current()
        unknown = current.pop("\0unknown")
        derived = self._derived
        if derived is None:
            out = {key: value for key, value in current.items() if value is not None}
            out.update(unknown)
            return out
        if {**current, "\0unknown": unknown} == derived:
            return copy.deepcopy(self._raw)
        out = _js_spread(self._raw)
        for key, value in current.items():
            if value == derived[key]:
                continue
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
        before = derived["\0unknown"]
        for key in before:
            if key not in unknown:
                out.pop(key, None)
        for key, value in unknown.items():
            if key not in before or before[key] != value:
                out[key] = value
        return out

    @classmethod
    def _from_raw(cls, raw: Any, path: str, compat: Compat, warnings: list[str]) -> _NestedConfig:
        defaults: dict[str, Any] = _DEFAULTS[path]
        aliases = {field.alias: name for name, field in cls.model_fields.items()}
        values: dict[str, Any] = {}
        if compat == "reference":
            if raw is None:
                warnings.append(
                    f"{SETTINGS_KEY}.{path}: null (the reference throws reading it); "
                    "treated as an empty object"
                )
            elif not isinstance(raw, dict):
                warnings.append(
                    f"{SETTINGS_KEY}.{path}: {_js_type(raw)}, not an object; its keys read as "
                    "absent (kept in the file)"
                )
            source = raw if isinstance(raw, dict) else {}
            for key in cls._BOOL_KEYS:
                values[aliases[key]] = _js_truthy(source[key]) if key in source else None
            for key in cls._COUNT_KEYS:
                values[aliases[key]] = _reference_count(source[key]) if key in source else None
            unknown = {k: copy.deepcopy(v) for k, v in source.items() if k not in aliases}
            warnings.extend(
                _unknown_key_warnings(
                    list(unknown), [*cls._BOOL_KEYS, *cls._COUNT_KEYS], f"{path}."
                )
            )
            model = cls(unknown_keys=unknown, **values)
            model._raw = copy.deepcopy(raw)
            model._derived = model._current()
            return model
        if not isinstance(raw, dict):
            raise ConfigError(
                f"{SETTINGS_KEY}.{path} must be an object, got {_js_type(raw)} {_describe(raw)}"
            )
        for key in cls._BOOL_KEYS:
            value = raw.get(key, _ABSENT)
            if value is _ABSENT:
                value = defaults[key]
            elif not isinstance(value, bool):
                warnings.append(
                    _fallback(f"{path}.{key}", value, "is not a boolean", defaults[key])
                )
                value = defaults[key]
            values[aliases[key]] = value
        for key in cls._COUNT_KEYS:
            value = raw.get(key, _ABSENT)
            if value is _ABSENT:
                value = defaults[key]
            elif _is_number(value) and math.isfinite(value) and value >= 0:
                # ceil, not floor: the reference compares integers with the raw value,
                # which is the same as comparing with its ceiling.
                value = _as_double(math.ceil(value))
            else:
                warnings.append(
                    _fallback(f"{path}.{key}", value, "is not a non-negative number", defaults[key])
                )
                value = defaults[key]
            values[aliases[key]] = value
        unknown = {k: copy.deepcopy(v) for k, v in raw.items() if k not in aliases}
        warnings.extend(
            _unknown_key_warnings(list(unknown), [*cls._BOOL_KEYS, *cls._COUNT_KEYS], f"{path}.")
        )
        return cls(unknown_keys=unknown, **values)


class ChainCompressionConfig(_NestedConfig):
    """``chainCompression``: range compression of old closed chains.

    In reference mode any field may be ``None``, meaning absent from the settings object.
    """

    enabled: Optional[StrictBool] = True
    rolling_window: Optional[StrictInt] = 3
    strip_final_assistant_thinking: Optional[StrictBool] = True
    fuse_range_summary: Optional[StrictBool] = True

    _BOOL_KEYS = ("enabled", "stripFinalAssistantThinking", "fuseRangeSummary")
    _COUNT_KEYS = ("rollingWindow",)

    def auto_compress_count(self, candidates: int) -> int:
        """How many of ``candidates`` closed chains (oldest first) automatic compression takes.

        ``max(0, candidates - rolling_window)``, at most ``candidates``; 0 when
        ``rolling_window`` is absent.
        """
        if self.rolling_window is None:
            return 0
        return min(candidates, max(0, candidates - self.rolling_window))


class PurgeErrorsConfig(_NestedConfig):
    """``purgeErrors``: stubbing of errored tool calls' arguments.

    In reference mode any field may be ``None``, meaning absent from the settings object.
    """

    enabled: Optional[StrictBool] = True
    cooldown_turns: Optional[StrictInt] = 2
    min_arg_chars: Optional[StrictInt] = 500

    _BOOL_KEYS = ("enabled",)
    _COUNT_KEYS = ("cooldownTurns", "minArgChars")

    def should_purge(self, age: int, arg_chars: int) -> bool:
        """Whether an errored call ``age`` turns old with ``arg_chars`` UTF-16 units of
        serialized arguments is purged: neither ``age < cooldown_turns`` nor
        ``arg_chars < min_arg_chars`` holds (an absent threshold never holds)."""
        if self.cooldown_turns is not None and age < self.cooldown_turns:
            return False
        return not (self.min_arg_chars is not None and arg_chars < self.min_arg_chars)


class Config(_SettingsModel):
    """The ``contextPrune`` configuration (frozen; derive changes with ``with_value``).

    Build it from settings with ``Config.from_settings_dict`` (or ``load_config``), write it
    with ``Config.to_settings_dict`` (or ``save_config``).
    """

    enabled: StrictBool = False
    show_prune_status_line: StrictBool = True
    summarizer_model: StrictStr = "default"
    summarizer_thinking: SummarizerThinking = "default"
    prune_on: PruneOn = "agent-message"
    batching_mode: BatchingMode = "turn"
    quiet_oversized_skips: StrictBool = False
    min_batch_chars: StrictInt = Field(default=1000, ge=0)
    recovery_grace_turns: StrictInt = Field(default=3, ge=0)
    summarizer_idle_timeout_ms: StrictInt = Field(default=20000, ge=0)
    summarizer_max_timeout_ms: StrictInt = Field(default=180000, ge=0)
    protected_tools: tuple[StrictStr, ...] = ()
    protected_paths: tuple[StrictStr, ...] = ("**/skills/**/*.md",)
    chain_compression: ChainCompressionConfig = Field(default_factory=ChainCompressionConfig)
    purge_errors: PurgeErrorsConfig = Field(default_factory=PurgeErrorsConfig)
    dedup_by_content_hash: StrictBool = True
    auto_budget_threshold: Optional[float] = Field(default=None, gt=0, le=1, allow_inf_nan=False)
    # ge, not gt: the reference checks `> 0` before flooring, so 0.5 normalizes to 0.
    spill_threshold: StrictInt = Field(default=65536, ge=0)
    spill_preview_bytes: StrictInt = Field(default=2048, ge=0)
    budget_turn_delta: Optional[float] = Field(default=None, gt=0, le=1, allow_inf_nan=False)
    summarizer_concurrency: StrictInt = Field(default=4, ge=1)
    """Ours: at most this many summarizer calls in flight at once (not in reference mode)."""
    summarizer_retries: StrictInt = Field(default=2, ge=0)
    """Ours: retries of a transient summarizer failure (429, 5xx, connection; not in
    reference mode)."""
    summarizer_prices: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Ours: ``{"provider/model" or "model": {"input": 0.15, "output": 0.6, ...}}``, dollars
    per million tokens (keys ``SUMMARIZER_PRICE_KEYS``), over the built-in price table."""
    compat: Compat = "default"
    """Ours: ``"default"`` or ``"reference"`` (see the module docstring)."""

    # settings key -> (raw value, field value derived from it): reference-mode values the
    # typed field cannot hold; written back verbatim while the field keeps that value.
    _verbatim: dict[str, tuple[Any, Any]] = PrivateAttr(default_factory=dict)
    # Position of `compat` among the unknown keys of the source object, if it was there.
    _compat_pos: Optional[int] = PrivateAttr(default=None)
    _warnings: tuple[str, ...] = PrivateAttr(default=())
    # Our own keys present in the source object (written back even when at their default).
    _ours_present: frozenset[str] = PrivateAttr(default=frozenset())

    @field_validator("summarizer_prices", mode="before")
    @classmethod
    def _check_prices(cls, value: Any) -> Any:
        problem = _price_table_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @property
    def warnings(self) -> tuple[str, ...]:
        """Why values of the source fell back to defaults or were read leniently."""
        return self._warnings

    @property
    def is_reference(self) -> bool:
        """True in ``compat: "reference"`` mode."""
        return self.compat == "reference"

    def is_protected_tool(self, tool_name: str) -> bool:
        """Whether ``protectedTools`` protects ``tool_name`` (exact name match).

        In reference mode a string ``protectedTools`` matches by substring, as the
        reference's ``String.prototype.includes`` does.
        """
        raw = self._verbatim_value("protectedTools", self.protected_tools)
        if isinstance(raw, str):
            return tool_name in raw
        return tool_name in self.protected_tools

    @property
    def protected_tools_substring(self) -> Optional[str]:
        """Reference mode with a string ``protectedTools``: that string (a tool is protected
        when it includes the name); else None."""
        raw = self._verbatim_value("protectedTools", self.protected_tools)
        if self.is_reference and not self.protected_tools and isinstance(raw, str):
            return raw
        return None

    def _verbatim_value(self, key: str, current: Any) -> Any:
        entry = self._verbatim.get(key)
        if entry is not None and entry[1] == current:
            return entry[0]
        return _ABSENT

    @classmethod
    def from_settings_dict(
        cls, settings: Mapping[str, Any], *, compat: Optional[Compat] = None
    ) -> Config:
        """Normalize a ``contextPrune`` object as the reference's ``normalize`` does.

        ``compat`` overrides the object's own ``compat`` key. Invalid values fall back to
        their defaults (see ``warnings``); in default mode a wrong-typed list or nested
        object raises ``ConfigError`` naming the key.
        """
        return _normalize(settings, compat)

    def to_settings_dict(self) -> dict[str, Any]:
        """The ``contextPrune`` object to save: known keys in ``DEFAULT_CONFIG`` order,
        then unknown keys in their original order."""
        out: dict[str, Any] = {}
        for name, field in type(self).model_fields.items():
            key = field.alias
            if key is None or key not in _DEFAULTS:
                continue
            value = getattr(self, name)
            raw = self._verbatim_value(key, value)
            if raw is not _ABSENT:
                out[key] = copy.deepcopy(raw)
            elif isinstance(value, _NestedConfig):
                out[key] = value._to_settings_value()
            elif isinstance(value, tuple):
                out[key] = list(value)
            else:
                out[key] = value
        for name, field in type(self).model_fields.items():
            key = field.alias
            if key is None or key not in _OURS_DEFAULTS:
                continue
            value = getattr(self, name)
            raw = self._verbatim_value(key, value)
            if raw is not _ABSENT:
                out[key] = copy.deepcopy(raw)
            elif key in self._ours_present or value != _OURS_DEFAULTS[key]:
                out[key] = copy.deepcopy(value)
        extras = list(copy.deepcopy(self.unknown_keys).items())
        if self._compat_pos is not None:
            extras.insert(min(self._compat_pos, len(extras)), ("compat", self.compat))
        elif self.compat != "default":
            extras.append(("compat", self.compat))
        out.update(extras)
        return out

    def with_value(self, key: str, value: Any) -> Config:
        """A copy with one setting changed, like the reference's ``{...config, key: value}``.

        ``key`` is a settings key or dotted path in camelCase or snake_case
        (``"chainCompression.rollingWindow"``, ``"purge_errors.min_arg_chars"``);
        ``value`` a JSON value (see ``parse_setting_value``). A value the typed field cannot
        hold raises ``ConfigError``. Setting a whole nested object normalizes it.
        """
        path = _canonical_key(key)
        head, _, tail = path.partition(".")
        name = _field_name(type(self), head)
        if head == "compat":
            if value not in get_args(Compat):
                raise ConfigError(f"{SETTINGS_KEY}.compat must be one of default, reference")
            settings = self.to_settings_dict()
            settings["compat"] = value
            return _normalize(settings, None)
        current = getattr(self, name)
        if tail:
            nested_type = type(current)
            nested_name = _field_name(nested_type, tail)
            try:
                checked = nested_type.model_validate({**dict(current), nested_name: value})
            except ValidationError as exc:
                raise ConfigError(_validation_message(f"{head}.{tail}", exc)) from exc
            value = current.model_copy(update={nested_name: getattr(checked, nested_name)})
        elif isinstance(current, _NestedConfig):
            warnings: list[str] = []
            value = type(current)._from_raw(value, head, self.compat, warnings)
        try:
            validated = type(self).model_validate({**dict(self), name: value})
        except ValidationError as exc:
            raise ConfigError(_validation_message(head, exc)) from exc
        return self.model_copy(update={name: getattr(validated, name)})


# --------------------------------------------------------------------------- normalize


def _fallback(key: str, value: Any, why: str, default: Any) -> str:
    return f"{SETTINGS_KEY}.{key}: {_describe(value)} {why}; using the default {_describe(default)}"


def _validation_message(key: str, exc: ValidationError) -> str:
    errors = exc.errors()
    detail = errors[0]["msg"] if errors else str(exc)
    return f"{SETTINGS_KEY}.{key}: {detail}"


def _field_name(model: type[BaseModel], key: str) -> str:
    for name, field in model.model_fields.items():
        if key in (name, field.alias) and name != "unknown_keys":
            return name
    raise ConfigError(f"unknown setting: {key}")


def _canonical_key(key: str) -> str:
    parts = [to_camel(part) if "_" in part else part for part in key.strip().split(".")]
    head = parts[0]
    if head == "compat" and len(parts) == 1:
        return head
    nested = _ALL_DEFAULTS.get(head, _ABSENT)
    if head == "summarizerPrices" and len(parts) > 1:
        raise ConfigError(f"unknown setting: {key} (set the whole summarizerPrices table)")
    if nested is _ABSENT or len(parts) > 2:
        raise ConfigError(f"unknown setting: {key}")
    if len(parts) == 2 and not (isinstance(nested, dict) and parts[1] in nested):
        raise ConfigError(f"unknown setting: {key}")
    return ".".join(parts)


def _unknown_key_warnings(keys: list[str], known: list[str], prefix: str = "") -> list[str]:
    """One warning per key this version does not know, naming the nearest known key (if
    any is close): the key may be a typo, and it is kept in the file but has no effect."""
    out = []
    for key in keys:
        near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"; did you mean {near[0]}?" if near else ""
        out.append(
            f"{SETTINGS_KEY}.{prefix}{key}: unknown setting, ignored (kept in the file){hint}"
        )
    return out


def _norm_bool(merged: Mapping[str, Any], key: str, warnings: list[str]) -> bool:
    value = merged[key]
    if isinstance(value, bool):
        return value
    warnings.append(_fallback(key, value, "is not a boolean", _DEFAULTS[key]))
    return cast(bool, _DEFAULTS[key])


def _norm_choice(
    merged: Mapping[str, Any], key: str, allowed: tuple[tuple[str, str], ...], warnings: list[str]
) -> str:
    value = merged[key]
    if isinstance(value, str) and any(value == choice for choice, _ in allowed):
        return value
    why = "is a removed legacy mode" if value in _LEGACY_PRUNE_ON else "is not a valid choice"
    warnings.append(_fallback(key, value, why, _DEFAULTS[key]))
    return cast(str, _DEFAULTS[key])


def _norm_count(
    merged: Mapping[str, Any],
    key: str,
    warnings: list[str],
    *,
    positive: bool = False,
    whole: bool = False,
) -> int:
    # `whole`: check the floored value, so a positive fraction cannot become 0 (ours).
    value = merged[key]
    if _is_number(value) and math.isfinite(value):
        checked = math.floor(cast(float, value)) if whole else value
        if checked > 0 if positive else checked >= 0:
            return _as_double(math.floor(cast(float, value)))
    why = "is not a positive number" if positive else "is not a non-negative number"
    warnings.append(_fallback(key, value, why, _DEFAULTS[key]))
    return cast(int, _DEFAULTS[key])


def _norm_fraction(merged: Mapping[str, Any], key: str, warnings: list[str]) -> Optional[float]:
    value = merged[key]
    if _is_number(value) and math.isfinite(value) and 0 < value <= 1:
        return cast(float, value)
    if value is not None:
        warnings.append(
            f"{SETTINGS_KEY}.{key}: {_describe(value)} is not a fraction in (0, 1]; "
            "using null (off)"
        )
    return None


def _norm_strings(
    merged: Mapping[str, Any],
    key: str,
    compat: Compat,
    warnings: list[str],
    verbatim: dict[str, tuple[Any, Any]],
) -> tuple[str, ...]:
    value = merged[key]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    if compat != "reference":
        if isinstance(value, list):
            index = next(i for i, item in enumerate(value) if not isinstance(item, str))
            got = value[index]
            raise ConfigError(
                f"{SETTINGS_KEY}.{key}[{index}] must be a string, got {_js_type(got)} "
                f"{_describe(got)}"
            )
        raise ConfigError(
            f"{SETTINGS_KEY}.{key} must be an array of strings, got {_js_type(value)} "
            f"{_describe(value)}"
        )
    derived: tuple[str, ...] = ()
    if isinstance(value, list):
        derived = tuple(item for item in value if isinstance(item, str))
        warnings.append(f"{SETTINGS_KEY}.{key}: non-string entries ignored (kept in the file)")
    elif isinstance(value, str) and key == "protectedTools":
        warnings.append(
            f"{SETTINGS_KEY}.{key}: a string, matched by substring as the reference does"
        )
    else:
        warnings.append(
            f"{SETTINGS_KEY}.{key}: {_js_type(value)} is not an array; nothing is protected "
            "by it (kept in the file)"
        )
    verbatim[key] = (copy.deepcopy(value), derived)
    return derived


def _norm_verbatim_choice(
    merged: Mapping[str, Any],
    key: str,
    accept: Callable[[Any], bool],
    effective: Any,
    compat: Compat,
    warnings: list[str],
    verbatim: dict[str, tuple[Any, Any]],
) -> Any:
    value = merged[key]
    if accept(value):
        return value
    if compat == "reference":
        verbatim[key] = (copy.deepcopy(value), effective)
        warnings.append(
            f"{SETTINGS_KEY}.{key}: {_describe(value)} read as {_describe(effective)} "
            "(kept in the file)"
        )
    else:
        warnings.append(_fallback(key, value, "is not valid", effective))
    return effective


def _normalize(settings: Mapping[str, Any], compat: Optional[Compat]) -> Config:
    if not isinstance(settings, Mapping):
        raise ConfigError(f"{SETTINGS_KEY} must be an object, got {_js_type(settings)}")
    for key in settings:
        if not isinstance(key, str):
            raise ConfigError(f"{SETTINGS_KEY} keys must be strings, got {key!r}")
    warnings: list[str] = []
    mode: Compat
    if compat is not None:
        mode = compat
    else:
        raw_compat = settings.get("compat", "default")
        if raw_compat in get_args(Compat):
            mode = raw_compat
        else:
            warnings.append(_fallback("compat", raw_compat, "is not valid", "default"))
            mode = "default"
    merged = {**_DEFAULTS, **settings}
    verbatim: dict[str, tuple[Any, Any]] = {}

    values: dict[str, Any] = {
        "enabled": _norm_bool(merged, "enabled", warnings),
        "show_prune_status_line": _norm_bool(merged, "showPruneStatusLine", warnings),
        "summarizer_model": _norm_verbatim_choice(
            merged,
            "summarizerModel",
            lambda v: isinstance(v, str),
            "default",
            mode,
            warnings,
            verbatim,
        ),
        "summarizer_thinking": _norm_choice(
            merged, "summarizerThinking", SUMMARIZER_THINKING_LEVELS, warnings
        ),
        "prune_on": _norm_choice(merged, "pruneOn", PRUNE_ON_MODES, warnings),
        # Any value but "agent-message" behaves as "turn" in the reference.
        "batching_mode": _norm_verbatim_choice(
            merged,
            "batchingMode",
            lambda v: v in ("turn", "agent-message"),
            "turn",
            mode,
            warnings,
            verbatim,
        ),
        "quiet_oversized_skips": _norm_bool(merged, "quietOversizedSkips", warnings),
        "min_batch_chars": _norm_count(merged, "minBatchChars", warnings),
        "recovery_grace_turns": _norm_count(merged, "recoveryGraceTurns", warnings),
        "summarizer_idle_timeout_ms": _norm_count(merged, "summarizerIdleTimeoutMs", warnings),
        "summarizer_max_timeout_ms": _norm_count(merged, "summarizerMaxTimeoutMs", warnings),
        "protected_tools": _norm_strings(merged, "protectedTools", mode, warnings, verbatim),
        "protected_paths": _norm_strings(merged, "protectedPaths", mode, warnings, verbatim),
        "chain_compression": ChainCompressionConfig._from_raw(
            merged["chainCompression"], "chainCompression", mode, warnings
        ),
        "purge_errors": PurgeErrorsConfig._from_raw(
            merged["purgeErrors"], "purgeErrors", mode, warnings
        ),
        "dedup_by_content_hash": _norm_bool(merged, "dedupByContentHash", warnings),
        "auto_budget_threshold": _norm_fraction(merged, "autoBudgetThreshold", warnings),
        "spill_threshold": _norm_count(
            merged, "spillThreshold", warnings, positive=True, whole=mode == "default"
        ),
        "spill_preview_bytes": _norm_count(merged, "spillPreviewBytes", warnings),
        "budget_turn_delta": _norm_fraction(merged, "budgetTurnDelta", warnings),
        "summarizer_concurrency": _norm_our_count(settings, "summarizerConcurrency", 1, warnings),
        "summarizer_retries": _norm_our_count(settings, "summarizerRetries", 0, warnings),
        "summarizer_prices": _norm_prices(settings, warnings, verbatim),
    }
    others = [key for key in settings if key not in _ALL_DEFAULTS]
    unknown = {key: copy.deepcopy(settings[key]) for key in others if key != "compat"}
    warnings.extend(_unknown_key_warnings(list(unknown), [*_ALL_DEFAULTS, "compat"]))
    config = Config(compat=mode, unknown_keys=unknown, **values)
    config._verbatim = verbatim
    config._compat_pos = others.index("compat") if "compat" in others else None
    config._warnings = tuple(warnings)
    config._ours_present = frozenset(key for key in _OURS_DEFAULTS if key in settings)
    return config


def _norm_our_count(
    settings: Mapping[str, Any], key: str, minimum: int, warnings: list[str]
) -> int:
    """One of our integer keys: a finite number ``>= minimum``, floored; else the default."""
    default = cast(int, _OURS_DEFAULTS[key])
    value = settings.get(key, default)
    if _is_number(value) and math.isfinite(value) and math.floor(value) >= minimum:
        return _as_double(math.floor(cast(float, value)))
    why = f"is not a number >= {minimum}"
    warnings.append(_fallback(key, value, why, default))
    return default


def _price_table_problem(value: Any) -> Optional[str]:
    if not isinstance(value, Mapping):
        return f"must be an object, got {_js_type(value)} {_describe(value)}"
    for model, entry in value.items():
        if not isinstance(model, str) or not model:
            return f"model names must be non-empty strings, got {_describe(model)}"
        if not isinstance(entry, Mapping):
            return f"[{model!r}] must be an object, got {_js_type(entry)} {_describe(entry)}"
        for kind, price in entry.items():
            if kind not in SUMMARIZER_PRICE_KEYS:
                return (
                    f"[{model!r}] has unknown key {_describe(kind)} "
                    f"(expected {', '.join(SUMMARIZER_PRICE_KEYS)})"
                )
            if not (_is_number(price) and math.isfinite(price) and price >= 0):
                return f"[{model!r}].{kind} must be a non-negative number, got {_describe(price)}"
    return None


def _norm_prices(
    settings: Mapping[str, Any], warnings: list[str], verbatim: dict[str, tuple[Any, Any]]
) -> dict[str, dict[str, float]]:
    """``summarizerPrices``: a bad table is ignored (with a warning) and kept in the file."""
    value = settings.get("summarizerPrices", _ABSENT)
    if value is _ABSENT:
        return {}
    problem = _price_table_problem(value)
    if problem is not None:
        warnings.append(
            f"{SETTINGS_KEY}.summarizerPrices {problem}; using the built-in prices (kept in the "
            "file)"
        )
        verbatim["summarizerPrices"] = (copy.deepcopy(value), {})
        return {}
    return {
        model: {kind: float(price) for kind, price in entry.items()}
        for model, entry in value.items()
    }


def normalize(existing: Mapping[str, Any], *, compat: Optional[Compat] = None) -> Config:
    """The reference's ``normalize(existing)``; same as ``Config.from_settings_dict``."""
    return _normalize(existing, compat)


# --------------------------------------------------------------------------- parse


_BOOL_SETTINGS = frozenset(
    {
        "enabled",
        "showPruneStatusLine",
        "quietOversizedSkips",
        "dedupByContentHash",
        "chainCompression.enabled",
        "chainCompression.stripFinalAssistantThinking",
        "chainCompression.fuseRangeSummary",
        "purgeErrors.enabled",
    }
)
_NON_NEGATIVE_SETTINGS = frozenset(
    {
        "minBatchChars",
        "recoveryGraceTurns",
        "summarizerIdleTimeoutMs",
        "summarizerMaxTimeoutMs",
        "purgeErrors.minArgChars",
        "spillPreviewBytes",
        "summarizerRetries",
    }
)
_POSITIVE_SETTINGS = frozenset(
    {
        "chainCompression.rollingWindow",
        "purgeErrors.cooldownTurns",
        "spillThreshold",
        "summarizerConcurrency",
    }
)
_FRACTION_SETTINGS = frozenset({"autoBudgetThreshold", "budgetTurnDelta"})
_LIST_SETTINGS = frozenset({"protectedTools", "protectedPaths"})


def _default_of(path: str) -> Any:
    head, _, tail = path.partition(".")
    value = _ALL_DEFAULTS[head]
    return value[tail] if tail else value


def parse_setting_value(key: str, text: str) -> Any:
    """Parse ``text`` typed for setting ``key`` as the reference's settings editor does.

    - booleans: ``text == "true"`` (anything else is false);
    - counts: ``parseInt(text, 10)``, finite and ``>= 0`` (``rollingWindow``,
      ``cooldownTurns``, ``spillThreshold``: ``>= 1``), else the default;
    - ``autoBudgetThreshold`` / ``budgetTurnDelta``: ``parseFloat``, in (0, 1], else ``None``;
    - ``protectedTools`` / ``protectedPaths``: trimmed; empty, ``none`` or ``clear`` (any
      case) is ``[]``, else split on whitespace and commas;
    - choices, ``summarizerModel`` and ``compat``: the text as given;
    - ours: ``summarizerConcurrency`` (``>= 1``) and ``summarizerRetries`` (``>= 0``) like
      counts; ``summarizerPrices`` is a JSON object (``ConfigError`` when invalid).

    ``spillThreshold``, ``spillPreviewBytes`` and ``budgetTurnDelta`` have no editor row in
    the reference; they follow the rule of their kind. Unknown keys raise ``ConfigError``.
    """
    path = _canonical_key(key)
    if path in _BOOL_SETTINGS:
        return text == "true"
    if path in _NON_NEGATIVE_SETTINGS or path in _POSITIVE_SETTINGS:
        parsed = js_parse_int(text)
        minimum = 1 if path in _POSITIVE_SETTINGS else 0
        return parsed if parsed is not None and parsed >= minimum else _default_of(path)
    if path in _FRACTION_SETTINGS:
        number = js_parse_float(text)
        return number if number is not None and 0 < number <= 1 else None
    if path in _LIST_SETTINGS:
        trimmed = text.strip(_JS_WS)
        if trimmed.lower() in ("", "none", "clear"):
            return []
        return [part for part in _JS_WS_SPLIT.split(trimmed) if part]
    if path == "summarizerPrices":
        try:
            table = jsjson.loads(text)
        except JsonError as exc:
            raise ConfigError(f"{SETTINGS_KEY}.summarizerPrices: not valid JSON ({exc})") from exc
        problem = _price_table_problem(table)
        if problem is not None:
            raise ConfigError(f"{SETTINGS_KEY}.summarizerPrices {problem}")
        return table
    if "." in path or isinstance(_DEFAULTS.get(path), dict):
        raise ConfigError(f"setting {key} is an object; set one of its keys")
    return text


# --------------------------------------------------------------------------- files


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("USERPROFILE") if os.name == "nt" else env.get("HOME")
    return Path(home) if home else Path.home()


def agent_dir(env: Optional[Mapping[str, str]] = None) -> Path:
    """Pi's agent directory: ``$PI_CODING_AGENT_DIR`` (``~`` / ``~/`` expanded), else
    ``~/.pi/agent``. ``env`` defaults to ``os.environ``, read at every call."""
    environ: Mapping[str, str] = os.environ if env is None else env
    configured = environ.get(ENV_AGENT_DIR)
    if configured:
        if configured == "~":
            return _home(environ)
        if configured.startswith("~/"):
            return _home(environ) / configured[2:]
        return Path(configured)
    return _home(environ) / ".pi" / "agent"


def settings_path(env: Optional[Mapping[str, str]] = None) -> Path:
    """``<agent_dir>/settings.json``."""
    return agent_dir(env) / "settings.json"


def _read_json_object(path: Path) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """The parsed file and, when it is present but unusable, why."""
    try:
        raw = read_regular(path)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot read it ({exc.strerror or exc})"
    try:
        parsed = jsjson.loads(raw)
    except JsonError as exc:
        return None, f"not valid JSON ({exc})"
    if not isinstance(parsed, dict):
        return None, f"the root is {_js_type(parsed)}, not an object"
    return parsed, None


def load_config(
    path: Union[str, os.PathLike[str], None] = None, *, compat: Optional[Compat] = None
) -> Config:
    """Load the ``contextPrune`` block of ``path`` (default: ``settings_path()``).

    A missing or unreadable file, invalid JSON, a non-object root, or a missing or
    non-object ``contextPrune`` gives the defaults; the reason (if any) is in
    ``Config.warnings``. Only a value we refuse to guess at (default mode: a wrong-typed
    list or nested object) raises ``ConfigError``, naming the file and key.
    """
    file = Path(path) if path is not None else settings_path()
    settings, problem = _read_json_object(file)
    block = settings.get(SETTINGS_KEY, _ABSENT) if settings is not None else _ABSENT
    if isinstance(block, dict):
        try:
            return _normalize(block, compat)
        except ConfigError as exc:
            raise ConfigError(f"{file}: {exc}") from exc
    config = _normalize({}, compat)
    if problem is not None:
        config._warnings = (f"{file}: {problem}; using the defaults",)
    elif block is not _ABSENT:
        config._warnings = (
            f"{file}: {SETTINGS_KEY} is {_js_type(block)}, not an object; using the defaults",
        )
    return config


def save_config(config: Config, path: Union[str, os.PathLike[str], None] = None) -> Path:
    """Write ``config`` as the ``contextPrune`` block of ``path`` (default:
    ``settings_path()``), keeping every other top-level key in place. Returns the path.

    The file is re-read first; the new text goes to ``<path>.<16 hex>.tmp``, is fsynced and
    renamed over ``path``. In default mode an existing file that is not a JSON object is
    left untouched and ``ConfigError`` is raised (the reference replaces it with ``{}``).
    """
    file = Path(path) if path is not None else settings_path()
    current, problem = _read_json_object(file)
    if problem is not None and not config.is_reference:
        raise ConfigError(
            f"{file}: {problem}; not overwriting it (fix or remove the file, or use "
            'compat "reference" to replace it)'
        )
    document: dict[str, Any] = current if current is not None else {}
    document[SETTINGS_KEY] = config.to_settings_dict()
    data = (jsjson.dumps(document, indent=2) + "\n").encode("utf-8")
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(f"{file.name}.{secrets.token_hex(8)}.tmp")
    write_atomic(file, data, tmp, mode_from=file)
    return file
