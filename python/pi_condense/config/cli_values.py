"""Setting values typed on a command line (``/pruner settings set KEY VALUE``): parsed as the
reference's settings UI parses them."""

from __future__ import annotations

import re
from typing import Any

from ..errors import ConfigError, JsonError
from ..js import json as jsjson
from ..js.values import JS_WHITESPACE
from ..js.values import parse_float as js_parse_float
from ..js.values import parse_int as js_parse_int
from ._common import canonical_key, price_table_problem
from .defaults import ALL_DEFAULTS, DEFAULTS, SETTINGS_KEY

__all__ = [
    "parse_setting_value",
]

_JS_WS_SPLIT = re.compile("[" + re.escape(JS_WHITESPACE) + ",]+")


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
_TOKEN_LIMIT_SETTINGS = frozenset({"frontierGapThresholdTokens", "maxImagesPerRequest"})
_LIST_SETTINGS = frozenset({"protectedTools", "protectedPaths"})


def _default_of(path: str) -> Any:
    head, _, tail = path.partition(".")
    value = ALL_DEFAULTS[head]
    return value[tail] if tail else value


def parse_setting_value(key: str, text: str) -> Any:
    """Parse ``text`` typed for setting ``key`` as the reference's settings editor does.

    - booleans: ``text == "true"`` (anything else is false);
    - counts: ``parseInt(text, 10)``, finite and ``>= 0`` (``rollingWindow``,
      ``cooldownTurns``, ``spillThreshold``: ``>= 1``), else the default;
    - ``autoBudgetThreshold`` / ``budgetTurnDelta``: ``parseFloat``, in (0, 1], else ``None``;
    - ``frontierGapThresholdTokens`` / ``maxImagesPerRequest`` (config-file-only in the
      reference): ``parseInt``, ``>= 1``, else ``None``;
    - ``protectedTools`` / ``protectedPaths``: trimmed; empty, ``none`` or ``clear`` (any
      case) is ``[]``, else split on whitespace and commas;
    - choices, ``summarizerModel`` and ``compat``: the text as given;
    - ours: ``summarizerConcurrency`` (``>= 1``) and ``summarizerRetries`` (``>= 0``) like
      counts; ``summarizerPrices`` is a JSON object (``ConfigError`` when invalid).

    ``spillThreshold``, ``spillPreviewBytes`` and ``budgetTurnDelta`` have no editor row in
    the reference; they follow the rule of their kind. Unknown keys raise ``ConfigError``.
    """
    path = canonical_key(key)
    if path in _BOOL_SETTINGS:
        return text == "true"
    if path in _NON_NEGATIVE_SETTINGS or path in _POSITIVE_SETTINGS:
        parsed = js_parse_int(text)
        minimum = 1 if path in _POSITIVE_SETTINGS else 0
        return parsed if parsed is not None and parsed >= minimum else _default_of(path)
    if path in _FRACTION_SETTINGS:
        number = js_parse_float(text)
        return number if number is not None and 0 < number <= 1 else None
    if path in _TOKEN_LIMIT_SETTINGS:
        parsed = js_parse_int(text)
        return parsed if parsed is not None and parsed >= 1 else None
    if path in _LIST_SETTINGS:
        trimmed = text.strip(JS_WHITESPACE)
        if trimmed.lower() in ("", "none", "clear"):
            return []
        return [part for part in _JS_WS_SPLIT.split(trimmed) if part]
    if path == "summarizerPrices":
        try:
            table = jsjson.loads(text)
        except JsonError as exc:
            raise ConfigError(f"{SETTINGS_KEY}.summarizerPrices: not valid JSON ({exc})") from exc
        problem = price_table_problem(table)
        if problem is not None:
            raise ConfigError(f"{SETTINGS_KEY}.summarizerPrices {problem}")
        return table
    if "." in path or isinstance(DEFAULTS.get(path), dict):
        raise ConfigError(f"setting {key} is an object; set one of its keys")
    return text
