"""The reference's ``normalize`` (and ours, in default mode): a ``contextPrune`` object to a
:class:`~pi_condense.config.Config`, with a warning for every value that falls back."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any, Callable, Optional, cast, get_args

from ..errors import ConfigError
from ..js.values import MISSING, is_number
from ._common import (
    as_double,
    describe,
    fallback,
    price_table_problem,
    type_name,
    unknown_key_warnings,
)
from .defaults import (
    ALL_DEFAULTS,
    DEFAULTS,
    LEGACY_PRUNE_ON,
    OURS_DEFAULTS,
    PRUNE_ON_MODES,
    SETTINGS_KEY,
    SUMMARIZER_THINKING_LEVELS,
    Compat,
)
from .models import ChainCompressionConfig, Config, PurgeErrorsConfig

__all__ = [
    "MAX_CONFIG_DEPTH",
    "normalize",
    "normalize_settings",
]

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
