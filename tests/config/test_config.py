"""Configuration: defaults, normalization (07-config section 3), settings I/O, parse helpers.

Expected values come from spec 07, the reference's `doc/configuration.md` defaults and the
reference's `src/config.test.ts` (re-expressed here).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_condense.config import (
    RECOVERY_GRACE_PRESETS,
    ChainCompressionConfig,
    Config,
    PurgeErrorsConfig,
    agent_dir,
    default_settings,
    js_parse_float,
    js_parse_int,
    load_config,
    normalize,
    parse_setting_value,
    save_config,
    settings_path,
)
from pi_condense.errors import ConfigError
from pi_condense.keys import ProtectedMatcher

# DEFAULT_CONFIG of the reference, in its saved key order (spec 07 section 2), as of 2.11.3:
# 2.10.2 adds "**/gauntlet-overrides.md", 2.10.0 and 2.11.0 the two token/image limits.
REFERENCE_DEFAULTS: dict[str, Any] = {
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

MODES = ("default", "reference")


def ordered(value: Any) -> Any:
    """A dict as a list of (key, value) pairs, recursively, so comparisons see key order."""
    if isinstance(value, dict):
        return [(k, ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [ordered(v) for v in value]
    return value


def settings_with(overrides: dict[str, Any], compat: str = "default") -> dict[str, Any]:
    out = dict(overrides)
    if compat == "reference":
        out["compat"] = "reference"
    return out


# ----------------------------------------------------------------------------- defaults


def test_default_config_matches_reference_defaults_in_order() -> None:
    assert ordered(Config().to_settings_dict()) == ordered(REFERENCE_DEFAULTS)
    assert ordered(default_settings()) == ordered(REFERENCE_DEFAULTS)


def test_default_settings_is_a_fresh_copy() -> None:
    first = default_settings()
    first["protectedPaths"].append("x")
    first["chainCompression"]["rollingWindow"] = 99
    assert default_settings() == REFERENCE_DEFAULTS


@pytest.mark.parametrize("compat", MODES)
def test_empty_object_normalizes_to_defaults(compat: str) -> None:
    config = normalize({}, compat=compat)  # type: ignore[arg-type]
    expected = dict(REFERENCE_DEFAULTS)
    if compat == "reference":
        expected["compat"] = "reference"
    assert ordered(config.to_settings_dict()) == ordered(expected)
    assert config.warnings == ()


def test_snake_case_attributes_and_camel_case_aliases() -> None:
    by_name = Config(min_batch_chars=5, show_prune_status_line=False)
    by_alias = Config.model_validate({"minBatchChars": 5, "showPruneStatusLine": False})
    assert by_name.min_batch_chars == by_alias.min_batch_chars == 5
    assert by_name.show_prune_status_line is by_alias.show_prune_status_line is False
    assert by_name.chain_compression.rolling_window == 3
    assert by_name.purge_errors.min_arg_chars == 500


def test_direct_construction_rejects_typos_and_wrong_types() -> None:
    with pytest.raises(ValueError, match="min_batch_char"):
        Config(min_batch_char=5)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="min_batch_chars"):
        Config(min_batch_chars=True)
    with pytest.raises(ValueError, match="auto_budget_threshold"):
        Config(auto_budget_threshold=80)


# ----------------------------------------------------------------------------- normalize


@pytest.mark.parametrize("compat", MODES)
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # reference config.test.ts: recoveryGraceTurns normalization
        (0, 0),
        (-1, 3),
        (None, 3),  # NaN is written as null by JSON.stringify
        (2.7, 2),
        ("5", 3),
        (True, 3),
        (float("inf"), 3),
    ],
)
def test_recovery_grace_turns(compat: str, value: Any, expected: int) -> None:
    config = normalize(settings_with({"recoveryGraceTurns": value}, compat))
    assert config.recovery_grace_turns == expected
    assert config.to_settings_dict()["recoveryGraceTurns"] == expected


@pytest.mark.parametrize("compat", MODES)
@pytest.mark.parametrize(
    ("key", "default"),
    [("summarizerIdleTimeoutMs", 20000), ("summarizerMaxTimeoutMs", 180000)],
)
def test_summarizer_timeouts(compat: str, key: str, default: int) -> None:
    assert normalize(settings_with({}, compat)).to_settings_dict()[key] == default
    assert normalize(settings_with({key: 0}, compat)).to_settings_dict()[key] == 0
    assert normalize(settings_with({key: -5}, compat)).to_settings_dict()[key] == default
    assert normalize(settings_with({key: None}, compat)).to_settings_dict()[key] == default
    assert normalize(settings_with({key: 1234.9}, compat)).to_settings_dict()[key] == 1234


@pytest.mark.parametrize("compat", MODES)
@pytest.mark.parametrize(
    ("key", "default"),
    [("minBatchChars", 1000), ("spillPreviewBytes", 2048)],
)
def test_non_negative_integers(compat: str, key: str, default: int) -> None:
    assert normalize(settings_with({key: 0}, compat)).to_settings_dict()[key] == 0
    assert normalize(settings_with({key: 7.9}, compat)).to_settings_dict()[key] == 7
    assert normalize(settings_with({key: -0.5}, compat)).to_settings_dict()[key] == default
    assert normalize(settings_with({key: "10"}, compat)).to_settings_dict()[key] == default
    assert normalize(settings_with({key: False}, compat)).to_settings_dict()[key] == default


@pytest.mark.parametrize("compat", MODES)
def test_spill_threshold_must_be_positive(compat: str) -> None:
    def spill(value: Any) -> Any:
        return normalize(settings_with({"spillThreshold": value}, compat)).spill_threshold

    assert spill(0) == 65536
    assert spill(-1) == 65536
    assert spill(1) == 1
    assert spill(100.9) == 100
    assert spill(None) == 65536


def test_spill_threshold_fraction_is_floored_after_the_positive_check_in_reference_mode() -> None:
    # The reference checks `> 0` on the raw value, then floors: 0.5 passes and becomes 0.
    assert normalize({"spillThreshold": 0.5}, compat="reference").spill_threshold == 0


def test_spill_threshold_below_one_falls_back_to_the_default() -> None:
    # Ours: 0 would spill every result (length >= 0), and would be refused on the next load.
    config = normalize({"spillThreshold": 0.5})
    assert config.spill_threshold == 65536
    assert any("spillThreshold" in w for w in config.warnings)
    assert normalize({"spillThreshold": 1.5}).spill_threshold == 1


@pytest.mark.parametrize("compat", MODES)
@pytest.mark.parametrize("key", ["autoBudgetThreshold", "budgetTurnDelta"])
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (80, None),
        (0, None),
        (-0.5, None),
        (1.5, None),
        ("0.8", None),
        (True, None),
        (None, None),
        (0.8, 0.8),
        (1, 1),
        (0.05, 0.05),
    ],
)
def test_fractions(compat: str, key: str, value: Any, expected: Any) -> None:
    config = normalize(settings_with({key: value}, compat))
    assert config.to_settings_dict()[key] == expected


def test_fraction_warning_mentions_the_range() -> None:
    config = normalize({"autoBudgetThreshold": 80})
    assert config.auto_budget_threshold is None
    assert any("autoBudgetThreshold" in w and "(0, 1]" in w for w in config.warnings)


@pytest.mark.parametrize("compat", MODES)
@pytest.mark.parametrize(
    ("key", "default"),
    [
        ("enabled", False),
        ("showPruneStatusLine", True),
        ("quietOversizedSkips", False),
        ("dedupByContentHash", True),
    ],
)
def test_booleans(compat: str, key: str, default: bool) -> None:
    for value in (not default, default):
        assert normalize(settings_with({key: value}, compat)).to_settings_dict()[key] is value
    invalid_values: list[Any] = ["true", 1, 0, None, [], {}]
    for invalid in invalid_values:
        config = normalize(settings_with({key: invalid}, compat))
        assert config.to_settings_dict()[key] is default
        assert any(key in w for w in config.warnings)


@pytest.mark.parametrize("compat", MODES)
def test_prune_on(compat: str) -> None:
    def prune_on(value: Any) -> Any:
        return normalize(settings_with({"pruneOn": value}, compat)).prune_on

    assert prune_on("on-demand") == "on-demand"
    assert prune_on("agent-message") == "agent-message"
    for legacy in ("every-turn", "on-context-tag", "agentic-auto"):
        assert prune_on(legacy) == "agent-message"
    assert prune_on("On-Demand") == "agent-message"
    assert prune_on(None) == "agent-message"


@pytest.mark.parametrize("compat", MODES)
def test_summarizer_thinking(compat: str) -> None:
    for level in ("default", "off", "minimal", "low", "medium", "high", "xhigh"):
        config = normalize(settings_with({"summarizerThinking": level}, compat))
        assert config.summarizer_thinking == level
    config = normalize(settings_with({"summarizerThinking": "max"}, compat))
    assert config.summarizer_thinking == "default"


def test_unvalidated_strings_are_taken_verbatim() -> None:
    config = normalize({"summarizerModel": "openai/gpt-4.1-mini", "batchingMode": "agent-message"})
    assert config.summarizer_model == "openai/gpt-4.1-mini"
    assert config.batching_mode == "agent-message"
    assert config.warnings == ()


def test_batching_mode_other_values_behave_as_turn() -> None:
    ours = normalize({"batchingMode": "per-message"})
    assert ours.batching_mode == "turn"
    assert ours.to_settings_dict()["batchingMode"] == "turn"
    ref = normalize({"batchingMode": "per-message", "compat": "reference"})
    assert ref.batching_mode == "turn"
    assert ref.to_settings_dict()["batchingMode"] == "per-message"


def test_non_string_summarizer_model() -> None:
    ours = normalize({"summarizerModel": 5})
    assert ours.summarizer_model == "default"
    assert ours.to_settings_dict()["summarizerModel"] == "default"
    assert any("summarizerModel" in w for w in ours.warnings)
    ref = normalize({"summarizerModel": 5, "compat": "reference"})
    assert ref.summarizer_model == "default"
    assert ref.to_settings_dict()["summarizerModel"] == 5


# ----------------------------------------------------------------------------- unknown keys


@pytest.mark.parametrize("compat", MODES)
def test_unknown_keys_follow_known_keys_in_original_order(compat: str) -> None:
    source = {
        "zeta": 1,
        "enabled": True,
        "thinkingStrip": {"enabled": True, "keepLastTurns": 16},
        "remindUnprunedCount": False,
        "alpha": [1, {"b": None}],
    }
    config = normalize(settings_with(source, compat))
    out = config.to_settings_dict()
    keys = list(out)
    assert keys[: len(REFERENCE_DEFAULTS)] == list(REFERENCE_DEFAULTS)
    extras = ["zeta", "thinkingStrip", "remindUnprunedCount", "alpha"]
    if compat == "reference":
        extras.append("compat")
    assert keys[len(REFERENCE_DEFAULTS) :] == extras
    assert out["thinkingStrip"] == {"enabled": True, "keepLastTurns": 16}
    assert out["alpha"] == [1, {"b": None}]
    assert out["enabled"] is True
    assert config.unknown_keys["remindUnprunedCount"] is False


def test_compat_keeps_its_position_among_unknown_keys() -> None:
    config = normalize({"a": 1, "compat": "reference", "b": 2})
    assert list(config.to_settings_dict())[-3:] == ["a", "compat", "b"]


def test_compat_default_is_not_written_unless_present() -> None:
    assert "compat" not in normalize({}).to_settings_dict()
    assert normalize({"compat": "default"}).to_settings_dict()["compat"] == "default"


def test_invalid_compat_falls_back_to_default() -> None:
    config = normalize({"compat": "strict"})
    assert config.compat == "default"
    assert any("compat" in w for w in config.warnings)


def test_compat_argument_overrides_the_object() -> None:
    assert normalize({"compat": "default"}, compat="reference").is_reference
    assert not normalize({"compat": "reference"}, compat="default").is_reference


def test_unknown_nested_keys_are_kept() -> None:
    source = {"chainCompression": {"extra": "x", "rollingWindow": 5}}
    ours = normalize(source).to_settings_dict()["chainCompression"]
    assert ordered(ours) == ordered(
        {
            "enabled": True,
            "rollingWindow": 5,
            "stripFinalAssistantThinking": True,
            "fuseRangeSummary": True,
            "extra": "x",
        }
    )
    ref = normalize({**source, "compat": "reference"}).to_settings_dict()["chainCompression"]
    assert ordered(ref) == ordered({"extra": "x", "rollingWindow": 5})


# ----------------------------------------------------------------------------- nested objects


def test_partial_chain_compression_default_mode_fills_defaults() -> None:
    config = normalize({"chainCompression": {"enabled": True}})
    chain = config.chain_compression
    assert chain.enabled is True
    assert chain.rolling_window == 3
    assert chain.strip_final_assistant_thinking is True
    assert chain.fuse_range_summary is True
    assert chain.auto_compress_count(5) == 2
    assert config.to_settings_dict()["chainCompression"] == REFERENCE_DEFAULTS["chainCompression"]


def test_partial_chain_compression_reference_mode_leaves_keys_absent() -> None:
    config = normalize({"chainCompression": {"enabled": True}, "compat": "reference"})
    chain = config.chain_compression
    assert chain.enabled is True
    assert chain.rolling_window is None
    assert chain.strip_final_assistant_thinking is None
    assert chain.fuse_range_summary is None
    # rollingWindow undefined: `max(0, n - undefined)` is NaN, nothing is selected.
    assert chain.auto_compress_count(10) == 0
    assert config.to_settings_dict()["chainCompression"] == {"enabled": True}


def test_partial_purge_errors_default_mode_fills_defaults() -> None:
    purge = normalize({"purgeErrors": {"enabled": True}}).purge_errors
    assert (purge.cooldown_turns, purge.min_arg_chars) == (2, 500)
    assert not purge.should_purge(age=1, arg_chars=10_000)
    assert not purge.should_purge(age=5, arg_chars=499)
    assert purge.should_purge(age=2, arg_chars=500)


def test_partial_purge_errors_reference_mode_purges_immediately() -> None:
    config = normalize({"purgeErrors": {"enabled": True}, "compat": "reference"})
    purge = config.purge_errors
    assert purge.cooldown_turns is None
    assert purge.min_arg_chars is None
    assert purge.should_purge(age=0, arg_chars=1)
    assert config.to_settings_dict()["purgeErrors"] == {"enabled": True}


def test_reference_mode_keeps_nested_key_order_and_edits_append() -> None:
    source = {"chainCompression": {"rollingWindow": 5, "enabled": False}, "compat": "reference"}
    config = normalize(source)
    assert ordered(config.to_settings_dict()["chainCompression"]) == ordered(
        {"rollingWindow": 5, "enabled": False}
    )
    edited = config.with_value("chainCompression.fuseRangeSummary", True)
    assert ordered(edited.to_settings_dict()["chainCompression"]) == ordered(
        {"rollingWindow": 5, "enabled": False, "fuseRangeSummary": True}
    )
    replaced = config.with_value("chainCompression.rollingWindow", 2)
    assert ordered(replaced.to_settings_dict()["chainCompression"]) == ordered(
        {"rollingWindow": 2, "enabled": False}
    )


def test_default_mode_nested_values() -> None:
    def chain(raw: dict[str, Any]) -> ChainCompressionConfig:
        return normalize({"chainCompression": raw}).chain_compression

    assert chain({"rollingWindow": 0}).rolling_window == 0
    assert chain({"rollingWindow": 2.5}).rolling_window == 3
    assert chain({"rollingWindow": -1}).rolling_window == 3
    assert chain({"rollingWindow": "2"}).rolling_window == 3
    assert chain({"rollingWindow": None}).rolling_window == 3
    assert chain({"enabled": "yes"}).enabled is True
    assert chain({"enabled": False}).enabled is False
    assert chain({"fuseRangeSummary": 0}).fuse_range_summary is True

    def purge(raw: dict[str, Any]) -> PurgeErrorsConfig:
        return normalize({"purgeErrors": raw}).purge_errors

    assert purge({"cooldownTurns": 0}).cooldown_turns == 0
    assert purge({"minArgChars": 99.2}).min_arg_chars == 100
    assert purge({"minArgChars": True}).min_arg_chars == 500


def test_reference_mode_nested_values_follow_js_coercion() -> None:
    def chain(raw: Any) -> ChainCompressionConfig:
        return normalize({"chainCompression": raw, "compat": "reference"}).chain_compression

    assert chain({"rollingWindow": "2"}).rolling_window == 2
    assert chain({"rollingWindow": " 0x10 "}).rolling_window == 16
    assert chain({"rollingWindow": None}).rolling_window == 0  # Number(null) is 0
    assert chain({"rollingWindow": True}).rolling_window == 1
    assert chain({"rollingWindow": [4]}).rolling_window == 4
    assert chain({"rollingWindow": "abc"}).rolling_window is None
    assert chain({"rollingWindow": {}}).rolling_window is None
    # `n - 2.5` then slice truncation: same as a window of 3.
    assert chain({"rollingWindow": 2.5}).auto_compress_count(5) == 2
    assert chain({"rollingWindow": -1}).auto_compress_count(4) == 4
    assert chain({"enabled": "yes"}).enabled is True
    assert chain({"enabled": ""}).enabled is False
    assert chain({"enabled": 0}).enabled is False
    non_objects: list[Any] = ["abc", 5, [], None]
    for raw in non_objects:
        model = chain(raw)
        assert (model.enabled, model.rolling_window) == (None, None)


def test_reference_mode_keeps_non_object_nested_values_verbatim() -> None:
    config = normalize({"purgeErrors": "off", "compat": "reference"})
    assert config.purge_errors.enabled is None
    assert config.to_settings_dict()["purgeErrors"] == "off"
    edited = config.with_value("purgeErrors.enabled", False)
    # `{..."off", enabled: false}` spreads the string's characters.
    assert ordered(edited.to_settings_dict()["purgeErrors"]) == ordered(
        {"0": "o", "1": "f", "2": "f", "enabled": False}
    )


@pytest.mark.parametrize("key", ["chainCompression", "purgeErrors"])
@pytest.mark.parametrize("value", [None, "on", 3, [], True])
def test_default_mode_rejects_non_object_nested(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=f"contextPrune.{key} must be an object"):
        normalize({key: value})


# ----------------------------------------------------------------------------- lists


@pytest.mark.parametrize("key", ["protectedTools", "protectedPaths"])
@pytest.mark.parametrize("value", ["bash", None, 3, {"a": 1}, True])
def test_default_mode_rejects_wrong_typed_lists(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=f"contextPrune.{key} must be an array of strings"):
        normalize({key: value})


def test_default_mode_names_the_bad_list_entry() -> None:
    with pytest.raises(ConfigError, match=r"contextPrune\.protectedTools\[1\] must be a string"):
        normalize({"protectedTools": ["bash", 5]})


def test_valid_lists() -> None:
    config = normalize({"protectedTools": ["todowrite", "todoread"], "protectedPaths": []})
    assert config.protected_tools == ("todowrite", "todoread")
    assert config.protected_paths == ()
    assert config.is_protected_tool("todoread")
    assert not config.is_protected_tool("todo")
    out = config.to_settings_dict()
    assert out["protectedTools"] == ["todowrite", "todoread"]
    assert out["protectedPaths"] == []


def test_reference_mode_string_protected_tools_matches_by_substring() -> None:
    config = normalize({"protectedTools": "bash,read", "compat": "reference"})
    assert config.protected_tools == ()
    assert config.is_protected_tool("bash")
    assert config.is_protected_tool("read")
    assert config.is_protected_tool("h,r")
    assert not config.is_protected_tool("write")
    assert config.to_settings_dict()["protectedTools"] == "bash,read"
    edited = config.with_value("protectedTools", ["write"])
    assert edited.is_protected_tool("write")
    assert not edited.is_protected_tool("bash")
    assert edited.to_settings_dict()["protectedTools"] == ["write"]


@pytest.mark.parametrize("value", [None, 3, {"a": 1}, "**/*.md", ["a", 1]])
def test_reference_mode_wrong_typed_paths_do_not_crash(value: Any) -> None:
    config = normalize({"protectedPaths": value, "compat": "reference"})
    expected = ("a",) if isinstance(value, list) else ()
    assert config.protected_paths == expected
    assert config.to_settings_dict()["protectedPaths"] == value
    assert any("protectedPaths" in w for w in config.warnings)


# ----------------------------------------------------------------------------- with_value


def test_with_value_returns_a_new_config() -> None:
    base = Config()
    changed = base.with_value("minBatchChars", 0)
    assert base.min_batch_chars == 1000
    assert changed.min_batch_chars == 0
    assert changed.with_value("min_batch_chars", 5).min_batch_chars == 5
    assert changed.with_value("purge_errors.cooldown_turns", 4).purge_errors.cooldown_turns == 4
    assert base.with_value("protectedTools", ["a"]).protected_tools == ("a",)
    with_threshold = base.with_value("autoBudgetThreshold", 0.7)
    assert with_threshold.to_settings_dict()["autoBudgetThreshold"] == 0.7


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("minBatchChars", -1),
        ("minBatchChars", 1.5),
        ("pruneOn", "every-turn"),
        ("autoBudgetThreshold", 80),
        ("chainCompression.enabled", "yes"),
        ("protectedTools", "bash"),
        ("compat", "strict"),
    ],
)
def test_with_value_rejects_invalid_values(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=key.split(".")[0]):
        Config().with_value(key, value)


@pytest.mark.parametrize("key", ["nope", "chainCompression.nope", "enabled.x", "a.b.c"])
def test_with_value_rejects_unknown_keys(key: str) -> None:
    with pytest.raises(ConfigError, match="unknown setting"):
        Config().with_value(key, 1)


def test_with_value_whole_nested_object_is_normalized() -> None:
    config = Config().with_value("chainCompression", {"rollingWindow": 7})
    assert config.chain_compression.rolling_window == 7
    assert config.chain_compression.enabled is True
    ref = normalize({"compat": "reference"}).with_value("chainCompression", {"rollingWindow": 7})
    assert ref.chain_compression.enabled is None
    assert ref.to_settings_dict()["chainCompression"] == {"rollingWindow": 7}


def test_switching_compat_renormalizes() -> None:
    ref = normalize({"compat": "reference", "purgeErrors": {"enabled": True}})
    ours = ref.with_value("compat", "default")
    assert ours.compat == "default"
    assert ours.purge_errors.cooldown_turns == 2
    assert ours.to_settings_dict()["compat"] == "default"


# ----------------------------------------------------------------------------- files


def write_settings(path: Path, document: Any) -> None:
    # Compact like the reference's tests (`JSON.stringify({ contextPrune: overrides })`).
    path.write_text(json.dumps(document, separators=(",", ":")), encoding="utf-8")


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "agent"
    directory.mkdir()
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(directory))
    return directory


def test_load_config_reads_the_agent_dir(agent: Path) -> None:
    write_settings(agent / "settings.json", {"contextPrune": {"recoveryGraceTurns": 0}})
    assert load_config().recovery_grace_turns == 0
    write_settings(agent / "settings.json", {"contextPrune": {"recoveryGraceTurns": 2.7}})
    assert load_config().recovery_grace_turns == 2
    write_settings(agent / "settings.json", {"contextPrune": {}})
    assert load_config().recovery_grace_turns == 3


def test_load_config_nan_written_as_null(agent: Path) -> None:
    (agent / "settings.json").write_text('{"contextPrune":{"recoveryGraceTurns":null}}')
    assert load_config().recovery_grace_turns == 3


def test_load_config_rejects_js_invalid_number_literals(agent: Path) -> None:
    (agent / "settings.json").write_text('{"contextPrune":{"enabled":true,"minBatchChars":NaN}}')
    config = load_config()
    assert config.enabled is False
    assert any("not valid JSON" in w for w in config.warnings)


def test_load_config_huge_numbers_are_doubles(agent: Path) -> None:
    (agent / "settings.json").write_text(
        '{"contextPrune":{"minBatchChars":1e400,"spillThreshold":12345678901234567890}}'
    )
    config = load_config()
    assert config.min_batch_chars == 1000  # Infinity is not finite
    assert config.spill_threshold == 12345678901234567168  # the double's exact value


@pytest.mark.parametrize(
    ("text", "warning"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "root is array"),
        ('"x"', "root is string"),
        ("null", "root is null"),
        ('\ufeff{"contextPrune":{"enabled":true}}', "not valid JSON"),
        ('{"contextPrune":[1]}', "contextPrune is array"),
        ('{"contextPrune":null}', "contextPrune is null"),
        ('{"contextPrune":true}', "contextPrune is boolean"),
    ],
)
def test_load_config_bad_files_give_defaults(agent: Path, text: str, warning: str) -> None:
    (agent / "settings.json").write_text(text, encoding="utf-8")
    config = load_config()
    assert ordered(config.to_settings_dict()) == ordered(REFERENCE_DEFAULTS)
    assert len(config.warnings) == 1
    assert warning in config.warnings[0]
    assert str(agent / "settings.json") in config.warnings[0]


def test_load_config_missing_file_or_key_is_silent(agent: Path) -> None:
    assert load_config().warnings == ()
    write_settings(agent / "settings.json", {"theme": "dark"})
    config = load_config()
    assert config.warnings == ()
    assert ordered(config.to_settings_dict()) == ordered(REFERENCE_DEFAULTS)


def test_load_config_wrong_typed_list_names_file_and_key(agent: Path) -> None:
    write_settings(agent / "settings.json", {"contextPrune": {"protectedTools": "bash"}})
    with pytest.raises(ConfigError) as info:
        load_config()
    assert str(agent / "settings.json") in str(info.value)
    assert "contextPrune.protectedTools" in str(info.value)
    write_settings(
        agent / "settings.json",
        {"contextPrune": {"protectedTools": "bash", "compat": "reference"}},
    )
    assert load_config().is_protected_tool("bash")


def test_load_config_compat_override(agent: Path) -> None:
    write_settings(agent / "settings.json", {"contextPrune": {"purgeErrors": {"enabled": True}}})
    assert load_config(compat="reference").purge_errors.cooldown_turns is None
    assert load_config().purge_errors.cooldown_turns == 2


def test_load_config_explicit_path(tmp_path: Path) -> None:
    path = tmp_path / "custom.json"
    write_settings(path, {"contextPrune": {"enabled": True}})
    assert load_config(path).enabled is True
    assert load_config(str(path)).enabled is True


def test_save_config_exact_bytes_and_preserved_keys(agent: Path) -> None:
    path = agent / "settings.json"
    write_settings(path, {"theme": "dark", "contextPrune": {"enabled": False}, "packages": ["a"]})
    config = load_config().with_value("enabled", True)
    assert save_config(config) == path
    expected = """{
  "theme": "dark",
  "contextPrune": {
    "enabled": true,
    "showPruneStatusLine": true,
    "summarizerModel": "default",
    "summarizerThinking": "default",
    "pruneOn": "agent-message",
    "batchingMode": "turn",
    "quietOversizedSkips": false,
    "minBatchChars": 1000,
    "recoveryGraceTurns": 3,
    "summarizerIdleTimeoutMs": 20000,
    "summarizerMaxTimeoutMs": 180000,
    "protectedTools": [],
    "protectedPaths": [
      "**/skills/**/*.md",
      "**/gauntlet-overrides.md"
    ],
    "chainCompression": {
      "enabled": true,
      "rollingWindow": 3,
      "stripFinalAssistantThinking": true,
      "fuseRangeSummary": true
    },
    "purgeErrors": {
      "enabled": true,
      "cooldownTurns": 2,
      "minArgChars": 500
    },
    "dedupByContentHash": true,
    "autoBudgetThreshold": null,
    "spillThreshold": 65536,
    "spillPreviewBytes": 2048,
    "budgetTurnDelta": null,
    "frontierGapThresholdTokens": null,
    "maxImagesPerRequest": null
  },
  "packages": [
    "a"
  ]
}
"""
    assert path.read_bytes() == expected.encode("utf-8")
    assert sorted(p.name for p in agent.iterdir()) == ["settings.json"]


def test_save_config_appends_context_prune_and_keeps_text_raw(agent: Path) -> None:
    path = agent / "settings.json"
    write_settings(path, {"b": "é\u2028/", "a": 1.5})
    save_config(Config(summarizer_model="zürich/ü"))
    document = json.loads(path.read_text(encoding="utf-8"))
    assert list(document) == ["b", "a", "contextPrune"]
    text = path.read_text(encoding="utf-8")
    assert '"b": "é\u2028/"' in text
    assert '"summarizerModel": "zürich/ü"' in text
    assert '"a": 1.5' in text


def test_save_config_creates_the_directory(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "settings.json"
    save_config(Config(), path)
    assert json.loads(path.read_text())["contextPrune"] == REFERENCE_DEFAULTS


def test_stale_thinking_strip_round_trips_through_save(agent: Path) -> None:
    path = agent / "settings.json"
    block = {"enabled": True, "keepLastTurns": 16}
    write_settings(path, {"contextPrune": {"thinkingStrip": block, "enabled": True}})
    save_config(load_config())
    saved = json.loads(path.read_text())["contextPrune"]
    assert saved["thinkingStrip"] == block
    assert list(saved)[-1] == "thinkingStrip"
    assert saved["enabled"] is True
    assert load_config().unknown_keys == {"thinkingStrip": block}


@pytest.mark.parametrize("compat", MODES)
def test_load_save_load_round_trip(agent: Path, compat: str) -> None:
    path = agent / "settings.json"
    source = {
        "enabled": True,
        "chainCompression": {"rollingWindow": 5},
        "purgeErrors": {"enabled": False, "note": "x"},
        "protectedTools": ["todo"],
        "autoBudgetThreshold": 0.8,
        "legacy": {"k": [1, 2]},
        "compat": compat,
    }
    write_settings(path, {"contextPrune": source, "other": True})
    first = load_config()
    save_config(first)
    second = load_config()
    assert ordered(second.to_settings_dict()) == ordered(first.to_settings_dict())
    saved = json.loads(path.read_text())
    assert list(saved) == ["contextPrune", "other"]
    if compat == "reference":
        assert saved["contextPrune"]["chainCompression"] == {"rollingWindow": 5}
    else:
        assert saved["contextPrune"]["chainCompression"]["enabled"] is True


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("text", ["{broken", "[]", '"settings"'])
def test_save_config_refuses_to_overwrite_invalid_file(agent: Path, text: str, mode: str) -> None:
    # Both modes: pi-condense 2.10.4 (#15) no longer replaces such a file (2.9.1 did).
    path = agent / "settings.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match="not overwriting"):
        save_config(normalize({"compat": mode}))
    assert path.read_text() == text
    assert sorted(p.name for p in agent.iterdir()) == ["settings.json"]


def test_save_config_failed_rename_leaves_no_temp_file(
    agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = agent / "settings.json"
    write_settings(path, {"keep": 1})
    before = path.read_bytes()
    seen: list[str] = []

    def failing_replace(src: Any, dst: Any) -> None:
        seen.append(Path(src).name)
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        save_config(Config())
    assert path.read_bytes() == before
    assert sorted(p.name for p in agent.iterdir()) == ["settings.json"]
    assert len(seen) == 1
    name = seen[0]
    assert name.startswith("settings.json.")
    assert name.endswith(".tmp")
    hex_part = name[len("settings.json.") : -len(".tmp")]
    assert len(hex_part) == 16
    int(hex_part, 16)


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")
def test_save_config_keeps_file_mode(agent: Path) -> None:
    path = agent / "settings.json"
    write_settings(path, {})
    path.chmod(0o600)
    save_config(Config())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# ----------------------------------------------------------------------------- agent dir


def test_agent_dir_default(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    assert agent_dir(env) == tmp_path / ".pi" / "agent"
    assert settings_path(env) == tmp_path / ".pi" / "agent" / "settings.json"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("~", "{home}"),
        ("~/", "{home}"),
        ("~/presets/work", "{home}/presets/work"),
        ("/opt/pi", "/opt/pi"),
        ("relative/dir", "relative/dir"),
        ("~other/x", "~other/x"),
        ("", "{home}/.pi/agent"),
    ],
)
def test_agent_dir_env(tmp_path: Path, value: str, expected: str) -> None:
    env = {"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": value}
    assert agent_dir(env) == Path(expected.format(home=tmp_path))


def test_settings_path_follows_env_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", "~/one")
    assert settings_path() == tmp_path / "one" / "settings.json"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", "~/two")
    assert settings_path() == tmp_path / "two" / "settings.json"
    monkeypatch.delenv("PI_CODING_AGENT_DIR")
    assert settings_path() == tmp_path / ".pi" / "agent" / "settings.json"


def test_load_and_save_follow_tilde_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", "~/agent")
    save_config(Config(enabled=True))
    assert (tmp_path / "agent" / "settings.json").is_file()
    assert load_config().enabled is True


# ----------------------------------------------------------------------------- parse helpers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12abc", 12),
        ("abc", None),
        ("", None),
        ("  42", 42),
        ("\u00a0\ufeff7", 7),
        ("\x1c7", None),  # not JS whitespace
        ("-7", -7),
        ("+3", 3),
        ("-0", 0),
        ("0x10", 0),
        ("1e5", 1),
        ("3.9", 3),
        ("- 1", None),
        ("٣", None),  # only ASCII digits
        ("9" * 400, None),  # Infinity
        ("99999999999999999999", 100000000000000000000),
    ],
)
def test_js_parse_int(text: str, expected: Any) -> None:
    assert js_parse_int(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.8abc", 0.8),
        (".5", 0.5),
        ("-.5e1", -5.0),
        ("1e", 1.0),
        ("1.e2", 100.0),
        ("  0.7 ", 0.7),
        ("abc", None),
        ("", None),
        (".", None),
        ("Infinity", None),
        ("0x10", 0.0),
        ("1_0", 1.0),
    ],
)
def test_js_parse_float(text: str, expected: Any) -> None:
    assert js_parse_float(text) == expected


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        ("enabled", "true", True),
        ("enabled", "false", False),
        ("enabled", "TRUE", False),
        ("enabled", "yes", False),
        ("dedupByContentHash", " true", False),
        ("chainCompression.stripFinalAssistantThinking", "true", True),
        ("purgeErrors.enabled", "false", False),
        ("minBatchChars", "12abc", 12),
        ("minBatchChars", "abc", 1000),
        ("minBatchChars", "-1", 1000),
        ("minBatchChars", "0", 0),
        ("recoveryGraceTurns", "5", 5),
        ("recoveryGraceTurns", "x", 3),
        ("summarizerIdleTimeoutMs", "45000", 45000),
        ("summarizerMaxTimeoutMs", "nope", 180000),
        ("purgeErrors.minArgChars", "0", 0),
        ("purgeErrors.minArgChars", "-5", 500),
        ("chainCompression.rollingWindow", "0", 3),
        ("chainCompression.rollingWindow", "10", 10),
        ("purgeErrors.cooldownTurns", "0", 2),
        ("purgeErrors.cooldownTurns", "1", 1),
        ("spillThreshold", "0", 65536),
        ("spillThreshold", "4096", 4096),
        ("spillPreviewBytes", "0", 0),
        ("autoBudgetThreshold", "0", None),
        ("autoBudgetThreshold", "0.8", 0.8),
        ("autoBudgetThreshold", "80", None),
        ("autoBudgetThreshold", "1", 1.0),
        ("budgetTurnDelta", "0.25", 0.25),
        ("pruneOn", "every-turn", "every-turn"),
        ("summarizerThinking", "low", "low"),
        ("batchingMode", "agent-message", "agent-message"),
        ("summarizerModel", "openai/gpt-4.1-mini", "openai/gpt-4.1-mini"),
        ("compat", "reference", "reference"),
        ("protectedTools", "todowrite, todoread  bash", ["todowrite", "todoread", "bash"]),
        ("protectedTools", " ,a,,b, ", ["a", "b"]),
        ("protectedTools", "none", []),
        ("protectedTools", "NONE", []),
        ("protectedTools", "Clear", []),
        ("protectedTools", "   ", []),
        ("protectedPaths", "**/*.md,docs/**", ["**/*.md", "docs/**"]),
        ("min_batch_chars", "7", 7),
        ("chain_compression.rolling_window", "2", 2),
    ],
)
def test_parse_setting_value(key: str, text: str, expected: Any) -> None:
    assert parse_setting_value(key, text) == expected


@pytest.mark.parametrize("key", ["nope", "chainCompression", "purgeErrors.nope"])
def test_parse_setting_value_rejects_unknown_or_object_keys(key: str) -> None:
    with pytest.raises(ConfigError):
        parse_setting_value(key, "1")


def test_parsed_values_are_accepted_by_with_value() -> None:
    config = Config()
    for key, text in [
        ("minBatchChars", "12abc"),
        ("chainCompression.rollingWindow", "0"),
        ("autoBudgetThreshold", "0"),
        ("protectedTools", "a b"),
        ("enabled", "true"),
    ]:
        config = config.with_value(key, parse_setting_value(key, text))
    out = config.to_settings_dict()
    assert out["minBatchChars"] == 12
    assert out["chainCompression"]["rollingWindow"] == 3
    assert out["autoBudgetThreshold"] is None
    assert out["protectedTools"] == ["a", "b"]
    assert out["enabled"] is True


# ----------------------------------------------------------------------------- properties

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "true", "3", "agent-message", "on-demand", "turn", "low", "0x1f"]),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
nested_keys = [
    "enabled",
    "rollingWindow",
    "stripFinalAssistantThinking",
    "fuseRangeSummary",
    "cooldownTurns",
    "minArgChars",
    "other",
]
nested_values = st.one_of(
    json_values, st.dictionaries(st.sampled_from(nested_keys), json_values, max_size=4)
)
string_lists = st.lists(st.text(max_size=6), max_size=3)
settings_objects = st.dictionaries(
    st.sampled_from([*REFERENCE_DEFAULTS, "thinkingStrip", "zeta", "0", "compat"]),
    st.one_of(json_values, nested_values, string_lists),
    max_size=10,
)


@settings(max_examples=300, deadline=None)
@given(settings_objects, st.sampled_from(MODES))
def test_normalize_is_idempotent(source: dict[str, Any], compat: str) -> None:
    error = None
    try:
        first = normalize(source, compat=compat)  # type: ignore[arg-type]
    except ConfigError as exc:
        error = str(exc)
    if error is not None:
        assert compat == "default"
        assert "contextPrune." in error
        return
    once = first.to_settings_dict()
    if compat == "reference" and once["spillThreshold"] == 0:
        return  # the reference floors 0.5 to 0 and refuses that 0 on the next load
    again = normalize(once, compat=compat)  # type: ignore[arg-type]
    assert ordered(again.to_settings_dict()) == ordered(once)
    assert list(once)[: len(REFERENCE_DEFAULTS)] == list(REFERENCE_DEFAULTS)


@settings(max_examples=200, deadline=None)
@given(settings_objects)
def test_reference_mode_never_raises(source: dict[str, Any]) -> None:
    config = normalize(source, compat="reference")
    out = config.to_settings_dict()
    for key, value in source.items():
        if key not in REFERENCE_DEFAULTS and key != "compat":
            assert out[key] == value
    assert config.chain_compression.auto_compress_count(5) >= 0
    config.purge_errors.should_purge(3, 600)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, None), (30, 30), (30.9, 30), (0, None), (0.5, None), (-3, None), ("30", None)],
)
def test_token_and_image_limits_are_positive_counts_or_null(
    mode: str, raw: Any, expected: Optional[int]
) -> None:
    config = Config.from_settings_dict(
        {"frontierGapThresholdTokens": raw, "maxImagesPerRequest": raw}, compat=mode
    )
    assert config.frontier_gap_threshold_tokens == expected
    assert config.max_images_per_request == expected
    assert bool(config.warnings) == (raw is not None and expected is None)


def test_gauntlet_overrides_reads_are_protected_by_default() -> None:
    # pi-condense 2.10.2: "**/gauntlet-overrides.md", also under .pi/ and doc/.
    config = Config()
    matcher = ProtectedMatcher(list(config.protected_tools), list(config.protected_paths))
    for path in (
        "gauntlet-overrides.md",
        ".pi/gauntlet-overrides.md",
        "doc\\gauntlet-overrides.md",
    ):
        assert matcher.is_protected("read", {"path": path})
    assert not matcher.is_protected("read", {"path": "gauntlet-overrides.txt"})


def test_recovery_grace_presets_are_the_references() -> None:
    # src/types.ts RECOVERY_GRACE_PRESETS of the reference (2.9.1, unchanged in 2.11.3).
    assert RECOVERY_GRACE_PRESETS == (
        ("0", "0 (disabled)"),
        ("1", "1"),
        ("3", "3 (default)"),
        ("5", "5"),
        ("8", "8"),
    )
    default = str(Config().recovery_grace_turns)
    assert [label for value, label in RECOVERY_GRACE_PRESETS if value == default] == ["3 (default)"]
