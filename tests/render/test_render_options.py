"""``_core.RenderOptions``: the render configuration compiled once per Config value, and the
reference mode's substring rule for a string ``protectedTools`` evaluated in Rust."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pi_condense import _core
from pi_condense.config import Config
from pi_condense.render import render_options


def _reference(raw: str) -> Config:
    return Config.from_settings_dict({"protectedTools": raw}, compat="reference")


@given(raw=st.text(max_size=12), name=st.text(max_size=4))
def test_the_substring_rule_is_config_is_protected_tool(raw: str, name: str) -> None:
    # Config.is_protected_tool is `tool_name in raw` (String.prototype.includes); the Rust
    # rule searches UTF-16 code units, the same for text without lone surrogates.
    config = _reference(raw)
    assert config.protected_tools_substring == raw
    options = render_options(config)
    assert options.is_protected_tool(name) is config.is_protected_tool(name)
    assert options.is_protected_tool(raw)
    assert options.is_protected_tool("")


@given(tools=st.lists(st.text(max_size=4), max_size=3), name=st.text(max_size=4))
def test_a_list_protects_exact_names(tools: list[str], name: str) -> None:
    config = Config.from_settings_dict({"protectedTools": tools})
    assert config.protected_tools_substring is None
    assert render_options(config).is_protected_tool(name) is (name in tools)


def test_the_substring_rule_works_on_code_units() -> None:
    # JS: "a\ud83d\ude00".includes("\ud83d") is true (a surrogate of the pair); Python's `in`
    # on code points says False, so the Rust rule is the reference's, not Config's here.
    options = _core.RenderOptions(protected_tools_substring="a\U0001f600")
    assert options.is_protected_tool("\ud83d")
    assert not options.is_protected_tool("b")


def test_options_are_compiled_once_per_config_value() -> None:
    config = Config.from_settings_dict({"protectedTools": ["bash"], "recoveryGraceTurns": 2})
    same = Config.from_settings_dict({"protectedTools": ["bash"], "recoveryGraceTurns": 2})
    assert render_options(config) is render_options(config) is render_options(same)
    derived = config.with_value("protectedTools", ["read"])
    assert render_options(derived) is not render_options(config)
    assert render_options(derived).is_protected_tool("read")
    assert not render_options(config).is_protected_tool("read")


def test_tool_lists_and_the_substring_rule_are_exclusive() -> None:
    import pytest

    with pytest.raises(ValueError, match="exclusive"):
        _core.RenderOptions(protected_tools=["a"], protected_tools_substring="a")
