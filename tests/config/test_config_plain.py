"""The config classes take exact values without pydantic and hand everything else to their
pydantic twins: the same values, the same errors as the pydantic models they replace."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from pi_condense.config import ChainCompressionConfig, Config, PurgeErrorsConfig
from pi_condense.config._plain import PlainSettings
from pi_condense.config._twin import twin, twin_instance

SAMPLES: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    3,
    2**60,
    0.5,
    1.0,
    1.5,
    -0.5,
    math.nan,
    math.inf,
    "",
    "default",
    "turn",
    "reference",
    "agent-message",
    "high",
    "x",
    (),
    ("a", "b"),
    ["a", "b"],
    ["a", 1],
    ("a", 1),
    {},
    {"enabled": False},
    {"rollingWindow": 2},
    {"cooldown_turns": 1, "min_arg_chars": 10},
    {"nope": 1},
    {"openai/m": {"input": 1.5, "output": 3.0}},
    {"openai/m": {"input": 1}},
    {"m": {"bogus": 1.0}},
    {"m": {"input": -1.0}},
    {"k": [1, {"a": None}]},
    {"enabled": True, "x": 1},
    ChainCompressionConfig(),
    PurgeErrorsConfig(cooldown_turns=5),
]


def _plain(value: Any) -> Any:
    """A twin's value as the plain classes hold it (nested twins as their plain values)."""
    if isinstance(value, (BaseModel, PlainSettings)):
        return {name: _plain(item) for name, item in value}
    return value


def _outcome(cls: type[Any], data: dict[str, Any]) -> tuple[str, Any]:
    if issubclass(cls, BaseModel):
        # A nested plain object is what the twin's own nested model is to pydantic.
        data = {k: twin_instance(v) if isinstance(v, PlainSettings) else v for k, v in data.items()}
    try:
        made = cls(**data)
    except ValidationError as exc:
        return "error", str(exc)
    values = {name: _plain(value) for name, value in made}
    types = {name: type(value).__name__ for name, value in made if not isinstance(value, dict)}
    return "ok", (values, types)


@pytest.mark.parametrize("cls", [Config, ChainCompressionConfig, PurgeErrorsConfig])
def test_every_field_takes_what_pydantic_takes_and_refuses_with_its_message(
    cls: type[PlainSettings],
) -> None:
    model = twin(cls)
    for name, spec in cls.model_fields.items():
        for key in (name, spec.alias):
            for value in SAMPLES:
                data = {key: value}
                assert _outcome(cls, data) == _outcome(model, data), (cls.__name__, key, value)


def test_unknown_and_clashing_keys_are_pydantic_errors() -> None:
    for data in (
        {"min_batch_char": 5},
        {"unknown_keys": {"minBatchChars": 1}},
        {"unknown_keys": {"enabled": 1}},
        {"minBatchChars": 1, "min_batch_chars": 2},
    ):
        assert _outcome(Config, data) == _outcome(twin(Config), data), data
    assert _outcome(Config, {"unknown_keys": {"min_batch_chars": 1}})[0] == "ok"


def test_assignment_is_pydantic_frozen_error() -> None:
    config = Config()
    with pytest.raises(ValidationError) as caught:
        config.enabled = True
    expected = "1 validation error for Config\nenabled\n  Instance is frozen"
    assert str(caught.value).startswith(expected)


def test_model_api() -> None:
    config = Config.model_validate({"minBatchChars": 5, "chainCompression": {"enabled": False}})
    assert config.min_batch_chars == 5
    assert config.chain_compression.enabled is False
    assert Config.model_validate(config) is config
    copied = config.model_copy(update={"min_batch_chars": 7})
    assert (copied.min_batch_chars, config.min_batch_chars) == (7, 5)
    assert copied.chain_compression is config.chain_compression
    plain_dump = config.model_dump()
    assert plain_dump["chain_compression"] == {
        "enabled": False,
        "rolling_window": 3,
        "strip_final_assistant_thinking": True,
        "fuse_range_summary": True,
    }
    assert plain_dump["protected_paths"] == Config().protected_paths
    assert "unknown_keys" not in plain_dump
    dumped = config.model_dump(by_alias=True)
    assert dumped["minBatchChars"] == 5
    assert "unknownKeys" not in dumped
    assert Config.model_json_schema()["title"] == "Config"
    assert list(Config.model_fields) == list(twin(Config).model_fields)
    assert [spec.alias for spec in Config.model_fields.values()] == [
        field.alias for field in twin(Config).model_fields.values()
    ]
    assert repr(Config()) == repr(twin(Config)())


def test_reading_a_settings_file_imports_no_pydantic(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(
        '{"contextPrune": {"enabled": true, "minBatchChars": 7.5, "protectedTools": ["x"], '
        '"chainCompression": {"rollingWindow": 1}, "summarizerPrices": {"m": {"input": 1}}, '
        '"bogus": 1}}\n'
    )
    code = (
        "import sys\n"
        "from pi_condense.config import load_config, normalize\n"
        f"config = load_config({str(settings)!r}).with_value('minBatchChars', 9)\n"
        "reference = normalize({'protectedTools': 'bash', 'chainCompression': 1}, "
        "compat='reference')\n"
        "print(config.min_batch_chars, config.chain_compression.rolling_window, "
        "config.summarizer_prices, len(config.warnings), reference.is_protected_tool('bash'))\n"
        "print(sorted(m for m in ('pydantic', 'pydantic_core') if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert proc.stdout.splitlines() == ["9 1 {'m': {'input': 1.0}} 1 True", "[]"]


@pytest.mark.parametrize(
    "key",
    [
        "min_batch_chars",
        "minBatchChars",
        "purge_errors",
        "a_1b",
        "a1b",
        "x_2",
        "_private_key",
        "__dunder",
        "snake_Case",
        "UPPER_CASE",
        "already_camelCase",
        "trailing_",
        "double__under",
        "with_9_digits",
    ],
)
def test_setting_names_are_camel_cased_as_pydantic_does(key: str) -> None:
    from pydantic.alias_generators import to_camel as pydantic_to_camel

    from pi_condense.config._common import to_camel

    assert to_camel(key) == pydantic_to_camel(key)
