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

The package, by job: :mod:`.defaults` (keys, choice lists, the default object),
:mod:`.models` (:class:`Config` and its nested objects, and the reference's ``normalize``
that builds them), :mod:`.files` (Pi's agent directory, loading and saving ``settings.json``),
:mod:`.cli_values` (values typed on a command line).
"""

from __future__ import annotations

from ..js.values import parse_float as js_parse_float
from ..js.values import parse_int as js_parse_int
from .cli_values import parse_setting_value
from .defaults import (
    BATCHING_MODES,
    ENV_AGENT_DIR,
    PRUNE_ON_MODES,
    RECOVERY_GRACE_PRESETS,
    SETTINGS_KEY,
    SUMMARIZER_PRICE_KEYS,
    SUMMARIZER_THINKING_LEVELS,
    BatchingMode,
    Compat,
    PruneOn,
    SummarizerThinking,
    default_settings,
)
from .files import agent_dir, load_config, save_config, settings_path
from .models import ChainCompressionConfig, Config, PurgeErrorsConfig, normalize

__all__ = [
    "BATCHING_MODES",
    "ENV_AGENT_DIR",
    "PRUNE_ON_MODES",
    "RECOVERY_GRACE_PRESETS",
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
