"""The settings vocabulary: keys, choice lists, and the default ``contextPrune`` object."""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "ALL_DEFAULTS",
    "BATCHING_MODES",
    "DEFAULTS",
    "ENV_AGENT_DIR",
    "LEGACY_PRUNE_ON",
    "OURS_DEFAULTS",
    "PRUNE_ON_MODES",
    "RECOVERY_GRACE_PRESETS",
    "SETTINGS_KEY",
    "SUMMARIZER_PRICE_KEYS",
    "SUMMARIZER_THINKING_LEVELS",
    "BatchingMode",
    "Compat",
    "PruneOn",
    "SummarizerThinking",
    "default_settings",
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

RECOVERY_GRACE_PRESETS: tuple[tuple[str, str], ...] = (
    ("0", "0 (disabled)"),
    ("1", "1"),
    ("3", "3 (default)"),
    ("5", "5"),
    ("8", "8"),
)
"""``(value, label)`` of the settings editor's ``recoveryGraceTurns`` cycle (the reference's
``RECOVERY_GRACE_PRESETS``; a value not in it shows as ``"3"``)."""

LEGACY_PRUNE_ON = ("every-turn", "on-context-tag", "agentic-auto")


def default_settings() -> dict[str, Any]:
    """A fresh copy of the reference's (2.11.3) ``DEFAULT_CONFIG``, in its saved key order."""
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
        "protectedPaths": ["**/skills/**/*.md", "**/gauntlet-overrides.md"],
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
        "frontierGapThresholdTokens": None,
        "maxImagesPerRequest": None,
    }


DEFAULTS = default_settings()

# Ours only (the reference ignores them): written after the reference's keys, and only when
# present in the source object or changed from the default.
OURS_DEFAULTS: dict[str, Any] = {
    "summarizerConcurrency": 4,
    "summarizerRetries": 2,
    "summarizerPrices": {},
}
ALL_DEFAULTS: dict[str, Any] = {**DEFAULTS, **OURS_DEFAULTS}

SUMMARIZER_PRICE_KEYS: tuple[str, ...] = ("input", "output", "cacheRead", "cacheWrite")
"""Keys of one ``summarizerPrices`` entry: dollars per million tokens of each kind."""
