"""The typed configuration: :class:`Config` and its nested :class:`ChainCompressionConfig`
and :class:`PurgeErrorsConfig`, and the reference's ``normalize`` (ours too, in default mode)
that builds them from a ``contextPrune`` object, with a warning for every value that falls
back."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any, Callable, ClassVar, Optional, cast, get_args

from ..errors import ConfigError
from ..js.values import MISSING, is_number, truthy
from ._common import (
    as_double,
    canonical_key,
    describe,
    fallback,
    field_name,
    js_spread,
    price_table_problem,
    reference_count,
    type_name,
    unknown_key_warnings,
    validation_message,
)
from ._plain import (
    FieldSpec,
    PlainSettings,
    choice_check,
    instance_check,
    int_check,
    is_bool,
    is_str,
    is_str_dict,
    is_str_tuple,
    optional_bool,
    optional_fraction,
)
from .defaults import (
    ALL_DEFAULTS,
    DEFAULTS,
    LEGACY_PRUNE_ON,
    OURS_DEFAULTS,
    PRUNE_ON_MODES,
    SETTINGS_KEY,
    SUMMARIZER_THINKING_LEVELS,
    BatchingMode,
    Compat,
    PruneOn,
    SummarizerThinking,
)

__all__ = [
    "DEFAULT_BUDGET_THRESHOLD",
    "MAX_CONFIG_DEPTH",
    "ChainCompressionConfig",
    "Config",
    "PurgeErrorsConfig",
    "normalize",
    "normalize_settings",
]


DEFAULT_BUDGET_THRESHOLD = 0.5
"""Ours: the budget trigger's threshold when ``autoBudgetThreshold`` is unset (the reference
has none): a flush at the turn end where the context reaches half the window (at most 150k of
the 300k-token cap)."""


_UNKNOWN_KEYS = FieldSpec("unknown_keys", "dict[str, Any]", is_str_dict, factory=dict)
"""Keys this version does not know, kept verbatim and written back after the known ones."""


def _specs(*specs: FieldSpec) -> dict[str, FieldSpec]:
    return {spec.name: spec for spec in specs}


def _prices_as_is(value: Any) -> bool:
    """A price table pydantic returns as it is (floats only, no problem)."""
    return (
        type(value) is dict
        and all(
            type(entry) is dict and all(type(price) is float for price in entry.values())
            for entry in value.values()
        )
        and price_table_problem(value) is None
    )


class NestedConfig(PlainSettings):
    # Reference mode only (private attributes): ``_raw``, the raw settings value, and
    # ``_derived``, the field values derived from it, so an unchanged object is written back
    # verbatim and an edited one like `{...raw, k: v}`.
    _raw: Any
    _derived: Optional[dict[str, Any]]
    _PRIVATE: ClassVar[dict[str, Callable[[], Any]]] = {
        "_raw": lambda: MISSING,
        "_derived": lambda: None,
    }

    _BOOL_KEYS: ClassVar[tuple[str, ...]] = ()
    _COUNT_KEYS: ClassVar[tuple[str, ...]] = ()

    def _current(self) -> dict[str, Any]:
        values = {
            field.alias: getattr(self, name)
            for name, field in type(self).model_fields.items()
            if name != "unknown_keys"
        }
        values["\0unknown"] = self.unknown_keys
        return copy.deepcopy(values)

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
        out = js_spread(self._raw)
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
    def _from_raw(cls, raw: Any, path: str, compat: Compat, warnings: list[str]) -> NestedConfig:
        defaults: dict[str, Any] = DEFAULTS[path]
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
                    f"{SETTINGS_KEY}.{path}: {type_name(raw)}, not an object; its keys read as "
                    "absent (kept in the file)"
                )
            source = raw if isinstance(raw, dict) else {}
            for key in cls._BOOL_KEYS:
                values[aliases[key]] = truthy(source[key]) if key in source else None
            for key in cls._COUNT_KEYS:
                values[aliases[key]] = reference_count(source[key]) if key in source else None
            unknown = {k: copy.deepcopy(v) for k, v in source.items() if k not in aliases}
            warnings.extend(
                unknown_key_warnings(list(unknown), [*cls._BOOL_KEYS, *cls._COUNT_KEYS], f"{path}.")
            )
            model = cls(unknown_keys=unknown, **values)
            model._raw = copy.deepcopy(raw)
            model._derived = model._current()
            return model
        if not isinstance(raw, dict):
            raise ConfigError(
                f"{SETTINGS_KEY}.{path} must be an object, got {type_name(raw)} {describe(raw)}"
            )
        for key in cls._BOOL_KEYS:
            value = raw.get(key, MISSING)
            if value is MISSING:
                value = defaults[key]
            elif not isinstance(value, bool):
                warnings.append(fallback(f"{path}.{key}", value, "is not a boolean", defaults[key]))
                value = defaults[key]
            values[aliases[key]] = value
        for key in cls._COUNT_KEYS:
            value = raw.get(key, MISSING)
            if value is MISSING:
                value = defaults[key]
            elif is_number(value) and math.isfinite(value) and value >= 0:
                # ceil, not floor: the reference compares integers with the raw value,
                # which is the same as comparing with its ceiling.
                value = as_double(math.ceil(value))
            else:
                warnings.append(
                    fallback(f"{path}.{key}", value, "is not a non-negative number", defaults[key])
                )
                value = defaults[key]
            values[aliases[key]] = value
        unknown = {k: copy.deepcopy(v) for k, v in raw.items() if k not in aliases}
        warnings.extend(
            unknown_key_warnings(list(unknown), [*cls._BOOL_KEYS, *cls._COUNT_KEYS], f"{path}.")
        )
        return cls(unknown_keys=unknown, **values)


class ChainCompressionConfig(NestedConfig):
    """``chainCompression``: range compression of old closed chains.

    In reference mode any field may be ``None``, meaning absent from the settings object.
    """

    model_fields: ClassVar[dict[str, FieldSpec]] = _specs(
        _UNKNOWN_KEYS,
        FieldSpec("enabled", "Optional[StrictBool]", optional_bool, True),
        FieldSpec("rolling_window", "Optional[StrictInt]", int_check(optional=True), 3),
        FieldSpec("strip_final_assistant_thinking", "Optional[StrictBool]", optional_bool, True),
        FieldSpec("fuse_range_summary", "Optional[StrictBool]", optional_bool, True),
    )
    enabled: Optional[bool]
    rolling_window: Optional[int]
    strip_final_assistant_thinking: Optional[bool]
    fuse_range_summary: Optional[bool]

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


class PurgeErrorsConfig(NestedConfig):
    """``purgeErrors``: stubbing of errored tool calls' arguments.

    In reference mode any field may be ``None``, meaning absent from the settings object.
    """

    model_fields: ClassVar[dict[str, FieldSpec]] = _specs(
        _UNKNOWN_KEYS,
        FieldSpec("enabled", "Optional[StrictBool]", optional_bool, True),
        FieldSpec("cooldown_turns", "Optional[StrictInt]", int_check(optional=True), 2),
        FieldSpec("min_arg_chars", "Optional[StrictInt]", int_check(optional=True), 500),
    )
    enabled: Optional[bool]
    cooldown_turns: Optional[int]
    min_arg_chars: Optional[int]

    _BOOL_KEYS = ("enabled",)
    _COUNT_KEYS = ("cooldownTurns", "minArgChars")

    def should_purge(self, age: int, arg_chars: int) -> bool:
        """Whether an errored call ``age`` turns old with ``arg_chars`` UTF-16 units of
        serialized arguments is purged: neither ``age < cooldown_turns`` nor
        ``arg_chars < min_arg_chars`` holds (an absent threshold never holds)."""
        if self.cooldown_turns is not None and age < self.cooldown_turns:
            return False
        return not (self.min_arg_chars is not None and arg_chars < self.min_arg_chars)


class Config(PlainSettings):
    """The ``contextPrune`` configuration (frozen; derive changes with ``with_value``).

    Build it from settings with ``Config.from_settings_dict`` (or ``load_config``), write it
    with ``Config.to_settings_dict`` (or ``save_config``).
    """

    model_fields: ClassVar[dict[str, FieldSpec]] = _specs(
        _UNKNOWN_KEYS,
        FieldSpec("enabled", "StrictBool", is_bool, False),
        FieldSpec("show_prune_status_line", "StrictBool", is_bool, True),
        FieldSpec("summarizer_model", "StrictStr", is_str, "default"),
        FieldSpec(
            "summarizer_thinking",
            "SummarizerThinking",
            choice_check(get_args(SummarizerThinking)),
            "default",
        ),
        FieldSpec("prune_on", "PruneOn", choice_check(get_args(PruneOn)), "agent-message"),
        FieldSpec("batching_mode", "BatchingMode", choice_check(get_args(BatchingMode)), "turn"),
        FieldSpec("quiet_oversized_skips", "StrictBool", is_bool, False),
        FieldSpec("min_batch_chars", "StrictInt", int_check(ge=0), 1000, ge=0),
        FieldSpec("recovery_grace_turns", "StrictInt", int_check(ge=0), 3, ge=0),
        FieldSpec("summarizer_idle_timeout_ms", "StrictInt", int_check(ge=0), 20000, ge=0),
        FieldSpec("summarizer_max_timeout_ms", "StrictInt", int_check(ge=0), 180000, ge=0),
        FieldSpec("protected_tools", "tuple[StrictStr, ...]", is_str_tuple, ()),
        FieldSpec(
            "protected_paths",
            "tuple[StrictStr, ...]",
            is_str_tuple,
            ("**/skills/**/*.md", "**/gauntlet-overrides.md"),
        ),
        FieldSpec(
            "chain_compression",
            "ChainCompressionConfig",
            instance_check(ChainCompressionConfig),
            factory=ChainCompressionConfig,
        ),
        FieldSpec(
            "purge_errors",
            "PurgeErrorsConfig",
            instance_check(PurgeErrorsConfig),
            factory=PurgeErrorsConfig,
        ),
        FieldSpec("dedup_by_content_hash", "StrictBool", is_bool, True),
        FieldSpec(
            "auto_budget_threshold",
            "Optional[float]",
            optional_fraction,
            None,
            gt=0,
            le=1,
            allow_inf_nan=False,
        ),
        # ge, not gt: the reference checks `> 0` before flooring, so 0.5 normalizes to 0.
        FieldSpec("spill_threshold", "StrictInt", int_check(ge=0), 65536, ge=0),
        FieldSpec("spill_preview_bytes", "StrictInt", int_check(ge=0), 2048, ge=0),
        FieldSpec(
            "budget_turn_delta",
            "Optional[float]",
            optional_fraction,
            None,
            gt=0,
            le=1,
            allow_inf_nan=False,
        ),
        FieldSpec(
            "frontier_gap_threshold_tokens",
            "Optional[StrictInt]",
            int_check(gt=0, optional=True),
            None,
            gt=0,
        ),
        FieldSpec(
            "max_images_per_request",
            "Optional[StrictInt]",
            int_check(gt=0, optional=True),
            None,
            gt=0,
        ),
        FieldSpec("summarizer_concurrency", "StrictInt", int_check(ge=1), 4, ge=1),
        FieldSpec("summarizer_retries", "StrictInt", int_check(ge=0), 2, ge=0),
        FieldSpec("summarizer_prices", "dict[str, dict[str, float]]", _prices_as_is, factory=dict),
        FieldSpec("compat", "Compat", choice_check(get_args(Compat)), "default"),
    )
    enabled: bool
    show_prune_status_line: bool
    summarizer_model: str
    summarizer_thinking: SummarizerThinking
    prune_on: PruneOn
    batching_mode: BatchingMode
    quiet_oversized_skips: bool
    min_batch_chars: int
    recovery_grace_turns: int
    summarizer_idle_timeout_ms: int
    summarizer_max_timeout_ms: int
    protected_tools: tuple[str, ...]
    protected_paths: tuple[str, ...]
    chain_compression: ChainCompressionConfig
    purge_errors: PurgeErrorsConfig
    dedup_by_content_hash: bool
    auto_budget_threshold: Optional[float]
    spill_threshold: int
    spill_preview_bytes: int
    budget_turn_delta: Optional[float]
    frontier_gap_threshold_tokens: Optional[int]
    """Flush at ``turn_end`` once the unsummarized tail past the prune frontier reaches this
    many tokens (trigger ``"frontier-gap"``); ``None`` is off."""
    max_images_per_request: Optional[int]
    """At most this many image blocks per model request (the oldest become a text note);
    ``None`` is the model API's own limit (100 for Anthropic Messages, else no cap)."""
    summarizer_concurrency: int
    """Ours: at most this many summarizer calls in flight at once (not in reference mode)."""
    summarizer_retries: int
    """Ours: retries of a transient summarizer failure (429, 5xx, connection; not in
    reference mode)."""
    summarizer_prices: dict[str, dict[str, float]]
    """Ours: ``{"provider/model" or "model": {"input": 0.15, "output": 0.6, ...}}``, dollars
    per million tokens (keys ``SUMMARIZER_PRICE_KEYS``), over the built-in price table."""
    compat: Compat
    """Ours: ``"default"`` or ``"reference"`` (see :mod:`pi_condense.config`)."""

    # Private attributes: settings key -> (raw value, field value derived from it):
    # reference-mode values the typed field cannot hold, written back verbatim while the field
    # keeps that value; the position of `compat` among the unknown keys of the source object,
    # if it was there; the warnings; our own keys present in the source object (written back
    # even when at their default).
    _verbatim: dict[str, tuple[Any, Any]]
    _compat_pos: Optional[int]
    _warnings: tuple[str, ...]
    _ours_present: frozenset[str]
    _PRIVATE: ClassVar[dict[str, Callable[[], Any]]] = {
        "_verbatim": dict,
        "_compat_pos": lambda: None,
        "_warnings": tuple,
        "_ours_present": frozenset,
    }

    @property
    def warnings(self) -> tuple[str, ...]:
        """Why values of the source fell back to defaults or were read leniently."""
        return self._warnings

    @property
    def is_reference(self) -> bool:
        """True in ``compat: "reference"`` mode."""
        return self.compat == "reference"

    @property
    def budget_threshold(self) -> Optional[float]:
        """The budget trigger's threshold in effect: ``autoBudgetThreshold``; when it is unset,
        ours is :data:`DEFAULT_BUDGET_THRESHOLD` (a long run of one prompt is condensed before
        its final reply), the reference's (``compat: "reference"``) is none. ``1`` turns it
        off in practice (it fires only at the whole window)."""
        if self.auto_budget_threshold is None and not self.is_reference:
            return DEFAULT_BUDGET_THRESHOLD
        return self.auto_budget_threshold

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
        return MISSING

    @classmethod
    def from_settings_dict(
        cls, settings: Mapping[str, Any], *, compat: Optional[Compat] = None
    ) -> Config:
        """Normalize a ``contextPrune`` object as the reference's ``normalize`` does.

        ``compat`` overrides the object's own ``compat`` key. Invalid values fall back to
        their defaults (see ``warnings``); in default mode a wrong-typed list or nested
        object raises ``ConfigError`` naming the key.
        """
        return normalize_settings(settings, compat)

    def to_settings_dict(self) -> dict[str, Any]:
        """The ``contextPrune`` object to save: known keys in ``DEFAULT_CONFIG`` order,
        then unknown keys in their original order."""
        out: dict[str, Any] = {}
        for name, field in type(self).model_fields.items():
            key = field.alias
            if key is None or key not in DEFAULTS:
                continue
            value = getattr(self, name)
            raw = self._verbatim_value(key, value)
            if raw is not MISSING:
                out[key] = copy.deepcopy(raw)
            elif isinstance(value, NestedConfig):
                out[key] = value._to_settings_value()
            elif isinstance(value, tuple):
                out[key] = list(value)
            else:
                out[key] = value
        for name, field in type(self).model_fields.items():
            key = field.alias
            if key is None or key not in OURS_DEFAULTS:
                continue
            value = getattr(self, name)
            raw = self._verbatim_value(key, value)
            if raw is not MISSING:
                out[key] = copy.deepcopy(raw)
            elif key in self._ours_present or value != OURS_DEFAULTS[key]:
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
        path = canonical_key(key)
        head, _, tail = path.partition(".")
        name = field_name(type(self), head)
        if head == "compat":
            if value not in get_args(Compat):
                raise ConfigError(f"{SETTINGS_KEY}.compat must be one of default, reference")
            settings = self.to_settings_dict()
            settings["compat"] = value
            return normalize_settings(settings, None)
        current = getattr(self, name)
        if tail:
            nested_type = type(current)
            nested_name = field_name(nested_type, tail)
            try:
                checked = nested_type.model_validate({**dict(current), nested_name: value})
            except ValueError as exc:
                raise ConfigError(validation_message(f"{head}.{tail}", exc)) from exc
            value = current.model_copy(update={nested_name: getattr(checked, nested_name)})
        elif isinstance(current, NestedConfig):
            warnings: list[str] = []
            value = type(current)._from_raw(value, head, self.compat, warnings)
        try:
            validated = type(self).model_validate({**dict(self), name: value})
        except ValueError as exc:
            raise ConfigError(validation_message(head, exc)) from exc
        copied: Config = self.model_copy(update={name: getattr(validated, name)})
        return copied


# ------------------------------------------------------------------ normalize (the reference's)


MAX_CONFIG_DEPTH = 64
"""The deepest nesting of a ``contextPrune`` value (the block itself not counted): no setting
needs more than a few levels, and copying a much deeper value exhausts Python's recursion."""


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests objects and arrays deeper than :data:`MAX_CONFIG_DEPTH`
    (walked without recursion, so any depth is told)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > MAX_CONFIG_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _norm_bool(merged: Mapping[str, Any], key: str, warnings: list[str]) -> bool:
    value = merged[key]
    if isinstance(value, bool):
        return value
    warnings.append(fallback(key, value, "is not a boolean", DEFAULTS[key]))
    return cast(bool, DEFAULTS[key])


def _norm_choice(
    merged: Mapping[str, Any], key: str, allowed: tuple[tuple[str, str], ...], warnings: list[str]
) -> str:
    value = merged[key]
    if isinstance(value, str) and any(value == choice for choice, _ in allowed):
        return value
    why = "is a removed legacy mode" if value in LEGACY_PRUNE_ON else "is not a valid choice"
    warnings.append(fallback(key, value, why, DEFAULTS[key]))
    return cast(str, DEFAULTS[key])


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
    if is_number(value) and math.isfinite(value):
        checked = math.floor(cast(float, value)) if whole else value
        if checked > 0 if positive else checked >= 0:
            return as_double(math.floor(cast(float, value)))
    why = "is not a positive number" if positive else "is not a non-negative number"
    warnings.append(fallback(key, value, why, DEFAULTS[key]))
    return cast(int, DEFAULTS[key])


def _norm_fraction(merged: Mapping[str, Any], key: str, warnings: list[str]) -> Optional[float]:
    value = merged[key]
    if is_number(value) and math.isfinite(value) and 0 < value <= 1:
        return cast(float, value)
    if value is not None:
        warnings.append(
            f"{SETTINGS_KEY}.{key}: {describe(value)} is not a fraction in (0, 1]; using null (off)"
        )
    return None


def _norm_positive_or_null(
    merged: Mapping[str, Any], key: str, warnings: list[str]
) -> Optional[int]:
    value = merged[key]
    if is_number(value) and math.isfinite(value) and value > 0 and math.floor(value) > 0:
        return as_double(math.floor(cast(float, value)))
    if value is not None:
        warnings.append(
            f"{SETTINGS_KEY}.{key}: {describe(value)} is not a positive number; using null"
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
                f"{SETTINGS_KEY}.{key}[{index}] must be a string, got {type_name(got)} "
                f"{describe(got)}"
            )
        raise ConfigError(
            f"{SETTINGS_KEY}.{key} must be an array of strings, got {type_name(value)} "
            f"{describe(value)}"
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
            f"{SETTINGS_KEY}.{key}: {type_name(value)} is not an array; nothing is protected "
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
            f"{SETTINGS_KEY}.{key}: {describe(value)} read as {describe(effective)} "
            "(kept in the file)"
        )
    else:
        warnings.append(fallback(key, value, "is not valid", effective))
    return effective


def normalize_settings(settings: Mapping[str, Any], compat: Optional[Compat]) -> Config:
    if not isinstance(settings, Mapping):
        raise ConfigError(f"{SETTINGS_KEY} must be an object, got {type_name(settings)}")
    for key, value in settings.items():
        if not isinstance(key, str):
            raise ConfigError(f"{SETTINGS_KEY} keys must be strings, got {key!r}")
        if _too_deep(value):
            raise ConfigError(
                f"{SETTINGS_KEY}.{key} is nested deeper than {MAX_CONFIG_DEPTH} levels"
            )
    warnings: list[str] = []
    mode: Compat
    if compat is not None:
        mode = compat
    else:
        raw_compat = settings.get("compat", "default")
        if raw_compat in get_args(Compat):
            mode = raw_compat
        else:
            warnings.append(fallback("compat", raw_compat, "is not valid", "default"))
            mode = "default"
    merged = {**DEFAULTS, **settings}
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
        "frontier_gap_threshold_tokens": _norm_positive_or_null(
            merged, "frontierGapThresholdTokens", warnings
        ),
        "max_images_per_request": _norm_positive_or_null(merged, "maxImagesPerRequest", warnings),
        "summarizer_concurrency": _norm_our_count(settings, "summarizerConcurrency", 1, warnings),
        "summarizer_retries": _norm_our_count(settings, "summarizerRetries", 0, warnings),
        "summarizer_prices": _norm_prices(settings, warnings, verbatim),
    }
    others = [key for key in settings if key not in ALL_DEFAULTS]
    unknown = {key: copy.deepcopy(settings[key]) for key in others if key != "compat"}
    warnings.extend(unknown_key_warnings(list(unknown), [*ALL_DEFAULTS, "compat"]))
    config = Config(compat=mode, unknown_keys=unknown, **values)
    config._verbatim = verbatim
    config._compat_pos = others.index("compat") if "compat" in others else None
    config._warnings = tuple(warnings)
    config._ours_present = frozenset(key for key in OURS_DEFAULTS if key in settings)
    return config


def _norm_our_count(
    settings: Mapping[str, Any], key: str, minimum: int, warnings: list[str]
) -> int:
    """One of our integer keys: a finite number ``>= minimum``, floored; else the default."""
    default = cast(int, OURS_DEFAULTS[key])
    value = settings.get(key, default)
    if is_number(value) and math.isfinite(value) and math.floor(value) >= minimum:
        return as_double(math.floor(cast(float, value)))
    why = f"is not a number >= {minimum}"
    warnings.append(fallback(key, value, why, default))
    return default


def _norm_prices(
    settings: Mapping[str, Any], warnings: list[str], verbatim: dict[str, tuple[Any, Any]]
) -> dict[str, dict[str, float]]:
    """``summarizerPrices``: a bad table is ignored (with a warning) and kept in the file."""
    value = settings.get("summarizerPrices", MISSING)
    if value is MISSING:
        return {}
    problem = price_table_problem(value)
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
    return normalize_settings(existing, compat)
