"""`pi-condense config ...`: the `/pruner` settings subcommands over Pi's settings file.

Each setter validates its argument as the reference's subcommand does, prints the reference's
message, and writes the ``contextPrune`` block atomically (temp file, fsync, rename), keeping
every other key of the file. A value the reference refuses prints its warning on stderr and
exits 2 with the file untouched. Where the reference opens a picker or a prompt (``prune-on``,
``batching``, ``protected-tools`` and ``protected-paths`` without arguments) the command shows
the current value instead.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn, Optional

import typer
from rich.table import Table

from ..config import (
    BATCHING_MODES,
    PRUNE_ON_MODES,
    SETTINGS_KEY,
    SUMMARIZER_THINKING_LEVELS,
    Config,
    default_settings,
    js_parse_int,
    load_config,
    parse_setting_value,
    save_config,
    settings_path,
)
from ..errors import ConfigError, JsonError
from ..js import json as jsjson
from ._common import EXIT_UNREADABLE, err, fail, fail_at, out

__all__ = ["config_app", "config_sources"]

config_app = typer.Typer(
    help="Show or change the contextPrune settings (the /pruner settings subcommands).",
    no_args_is_help=True,
)

_THINKING_VALUES = ", ".join(value for value, _ in SUMMARIZER_THINKING_LEVELS)
_OURS = ("summarizerConcurrency", "summarizerRetries", "summarizerPrices", "compat")


def _settings_option() -> Any:
    return typer.Option(
        None,
        "--settings",
        help="The settings file to read and write (default: Pi's "
        "$PI_CODING_AGENT_DIR/settings.json, else ~/.pi/agent/settings.json).",
    )


def _json_option() -> Any:
    return typer.Option(False, "--json", help="Print the result as JSON.")


# ------------------------------------------------------------------------------ plumbing


def _file(settings: Optional[Path]) -> Path:
    return settings if settings is not None else settings_path()


def _load(settings: Optional[Path]) -> Config:
    """The settings file's config (its warnings on stderr), or exit 2."""
    file = _file(settings)
    try:
        config = load_config(file)
    except ConfigError as exc:
        fail(str(exc))
    for warning in config.warnings:
        err.print(f"pi-condense: warning: {warning}", markup=False)
    return config


def _label(table: tuple[tuple[str, str], ...], value: str) -> str:
    return next((label for v, label in table if v == value), value)


def _thinking(config: Config) -> str:
    level = config.summarizer_thinking
    return f"{_label(SUMMARIZER_THINKING_LEVELS, level)} ({level})"


def _say(message: str, as_json: bool, **facts: Any) -> None:
    """An info message (the reference's notification text) on stdout."""
    if as_json:
        sys.stdout.write(jsjson.dumps({"level": "info", "message": message, **facts}, 2) + "\n")
    else:
        out.print(message, markup=False)


def _refuse(message: str, as_json: bool) -> NoReturn:
    """The reference's warning: on stderr (and as JSON on stdout with --json), exit 2."""
    if as_json:
        sys.stdout.write(jsjson.dumps({"level": "warning", "message": message}, 2) + "\n")
    err.print(message, markup=False)
    raise typer.Exit(EXIT_UNREADABLE)


def _save(
    config: Config, settings: Optional[Path], message: str, as_json: bool, **changed: Any
) -> None:
    """Write the block atomically (exit 2 if the file cannot be replaced), then say so."""
    file = _file(settings)
    try:
        save_config(config, file)
    except (ConfigError, OSError) as exc:
        fail_at(file, "cannot write settings", exc)
    _say(message, as_json, settings=str(file), changed=changed)


def _list_arg(words: list[str]) -> list[str]:
    return parse_setting_value("protectedTools", " ".join(words))  # type: ignore[no-any-return]


def _shown(items: Any) -> str:
    return ", ".join(items) if items else "(none)"


# ------------------------------------------------------------------------------ show


def config_sources(config: Config, block: Optional[dict[str, Any]]) -> dict[str, Any]:
    """Every setting's effective value and where it came from: ``default`` (absent from the
    block), ``settings file``, or ``settings file (invalid, default used)``."""
    warned = [w.split(":", 1)[0] for w in config.warnings]
    given = block if block is not None else {}
    values = config.to_settings_dict()
    keys = [*default_settings(), *_OURS]
    rows: dict[str, Any] = {}

    def source(path: str, present: bool) -> str:
        if not present:
            return "default"
        if f"{SETTINGS_KEY}.{path}" in warned:
            return "settings file (invalid, default used)"
        return "settings file"

    for key in keys:
        value = values.get(key, default_settings().get(key, _our_default(key)))
        nested = given.get(key)
        if isinstance(value, dict) and key != "summarizerPrices":
            for sub, sub_value in value.items():
                present = isinstance(nested, dict) and sub in nested
                rows[f"{key}.{sub}"] = {
                    "value": sub_value,
                    "source": source(f"{key}.{sub}", present),
                }
            continue
        rows[key] = {"value": value, "source": source(key, key in given)}
    for key in config.unknown_keys:
        rows[key] = {"value": config.unknown_keys[key], "source": "settings file (unknown key)"}
    return rows


def _our_default(key: str) -> Any:
    return {"summarizerConcurrency": 4, "summarizerRetries": 2, "summarizerPrices": {}}.get(
        key, "default"
    )


def _read_block(file: Path) -> Optional[dict[str, Any]]:
    try:
        document = jsjson.loads(file.read_bytes())
    except (OSError, JsonError):
        return None
    block = document.get(SETTINGS_KEY) if isinstance(document, dict) else None
    return block if isinstance(block, dict) else None


@config_app.command("show")
def config_show(
    settings: Optional[Path] = _settings_option(), as_json: bool = _json_option()
) -> None:
    """The effective settings and where each value came from."""
    file = _file(settings)
    config = _load(settings)
    rows = config_sources(config, _read_block(file))
    if as_json:
        report = {"settings": str(file), "exists": file.exists(), "values": rows}
        sys.stdout.write(jsjson.dumps(report, 2) + "\n")
        return
    state = "" if file.exists() else " (does not exist: every value is the default)"
    table = Table(title=f"{file}{state}", title_justify="left")
    table.add_column("setting")
    table.add_column("value", overflow="fold")
    table.add_column("source")
    for key, row in rows.items():
        table.add_row(key, jsjson.dumps(row["value"]), row["source"])
    out.print(table)


# ------------------------------------------------------------------------------ setters


@config_app.command("on")
def config_on(
    settings: Optional[Path] = _settings_option(), as_json: bool = _json_option()
) -> None:
    """Enable context pruning."""
    config = _load(settings).with_value("enabled", True)
    _save(config, settings, "Context pruning enabled.", as_json, enabled=True)


@config_app.command("off")
def config_off(
    settings: Optional[Path] = _settings_option(), as_json: bool = _json_option()
) -> None:
    """Disable context pruning."""
    config = _load(settings).with_value("enabled", False)
    _save(config, settings, "Context pruning disabled.", as_json, enabled=False)


@config_app.command("model")
def config_model(
    model: Optional[str] = typer.Argument(
        None, metavar="[ID[:THINKING]]", help="provider/model-id, optionally :thinking-level."
    ),
    settings: Optional[Path] = _settings_option(),
    as_json: bool = _json_option(),
) -> None:
    """Show or set the summarizer model (and thinking level after the last colon)."""
    config = _load(settings)
    if not model:
        _say(
            f"Current summarizer model: {config.summarizer_model}\n"
            f"Current summarizer thinking: {_thinking(config)}",
            as_json,
            summarizerModel=config.summarizer_model,
            summarizerThinking=config.summarizer_thinking,
        )
        return
    name, thinking = model, None
    if ":" in model:
        head, _, suffix = model.rpartition(":")
        if not head or suffix not in dict(SUMMARIZER_THINKING_LEVELS):
            _refuse(
                f"Invalid model thinking suffix: {suffix}. Use one of: {_THINKING_VALUES}.",
                as_json,
            )
        name, thinking = head, suffix
    config = config.with_value("summarizerModel", name)
    changed: dict[str, Any] = {"summarizerModel": name}
    if thinking is not None:
        config = config.with_value("summarizerThinking", thinking)
        changed["summarizerThinking"] = thinking
    extra = f" with thinking {thinking}" if thinking else ""
    _save(config, settings, f"Summarizer model set to: {name}{extra}", as_json, **changed)


@config_app.command("thinking")
def config_thinking(
    level: Optional[str] = typer.Argument(None, help=f"One of: {_THINKING_VALUES}."),
    settings: Optional[Path] = _settings_option(),
    as_json: bool = _json_option(),
) -> None:
    """Show or set the summarizer thinking level."""
    config = _load(settings)
    if not level:
        _say(
            f"Current summarizer thinking: {_thinking(config)}",
            as_json,
            summarizerThinking=config.summarizer_thinking,
        )
        return
    if level not in dict(SUMMARIZER_THINKING_LEVELS):
        _refuse(
            f"Invalid summarizer thinking level: {level}. Use one of: {_THINKING_VALUES}.",
            as_json,
        )
    config = config.with_value("summarizerThinking", level)
    _save(
        config, settings, f"Summarizer thinking set to: {level}", as_json, summarizerThinking=level
    )


@config_app.command("prune-on")
def config_prune_on(
    mode: Optional[str] = typer.Argument(None, help="agent-message or on-demand."),
    settings: Optional[Path] = _settings_option(),
    as_json: bool = _json_option(),
) -> None:
    """Show or set when summarization is triggered."""
    config = _load(settings)
    if not mode:
        _say(
            f"Current prune trigger: {_label(PRUNE_ON_MODES, config.prune_on)} ({config.prune_on})",
            as_json,
            pruneOn=config.prune_on,
        )
        return
    if mode not in dict(PRUNE_ON_MODES):
        # The reference stores any string (normalized back to the default on the next load).
        values = ", ".join(value for value, _ in PRUNE_ON_MODES)
        _refuse(f"Invalid prune trigger: {mode}. Use one of: {values}.", as_json)
    config = config.with_value("pruneOn", mode)
    message = f"Prune trigger set to: {_label(PRUNE_ON_MODES, mode)}"
    _save(config, settings, message, as_json, pruneOn=mode)


@config_app.command("batching")
def config_batching(
    mode: Optional[str] = typer.Argument(None, help="turn or agent-message."),
    settings: Optional[Path] = _settings_option(),
    as_json: bool = _json_option(),
) -> None:
    """Show or set the batching granularity."""
    config = _load(settings)
    if not mode:
        label = _label(BATCHING_MODES, config.batching_mode)
        _say(
            f"Current batching mode: {label} ({config.batching_mode})",
            as_json,
            batchingMode=config.batching_mode,
        )
        return
    if mode not in dict(BATCHING_MODES):
        values = ", ".join(value for value, _ in BATCHING_MODES)
        _refuse(f"Invalid batching mode: {mode}. Use one of: {values}.", as_json)
    config = config.with_value("batchingMode", mode)
    message = f"Batching mode set to: {_label(BATCHING_MODES, mode)}"
    _save(config, settings, message, as_json, batchingMode=mode)


def _list_command(key: str, title: str, help_text: str) -> Any:
    def command(
        items: Optional[list[str]] = typer.Argument(
            None, metavar="[ITEM...]", help=f"{help_text} ('none' or 'clear' empties the list)."
        ),
        settings: Optional[Path] = _settings_option(),
        as_json: bool = _json_option(),
    ) -> None:
        config = _load(settings)
        current = config.to_settings_dict()[key]
        if not items:
            _say(f"{title}: {_shown(current)}", as_json, **{key: current})
            return
        values = _list_arg(items)
        config = config.with_value(key, values)
        _save(config, settings, f"{title}: {_shown(values)}", as_json, **{key: values})

    return command


config_app.command(
    "protected-tools",
    help="Show or set the tools whose outputs are never pruned (comma- or space-separated).",
)(_list_command("protectedTools", "Protected tools", "Tool names"))
config_app.command(
    "protected-paths",
    help="Show or set the path globs whose outputs are never pruned (comma- or space-separated).",
)(_list_command("protectedPaths", "Protected paths", "Globs"))


@config_app.command("min-batch-chars", context_settings={"ignore_unknown_options": True})
def config_min_batch_chars(
    value: Optional[str] = typer.Argument(None, metavar="[N]", help="Chars; 0 disables."),
    settings: Optional[Path] = _settings_option(),
    as_json: bool = _json_option(),
) -> None:
    """Show or set the pre-flush trivial-batch threshold."""
    config = _load(settings)
    if not value:
        n = config.min_batch_chars
        state = "disabled" if n == 0 else f"{n} chars"
        _say(f"Current minBatchChars: {state}.", as_json, minBatchChars=n)
        return
    parsed = js_parse_int(value)
    if parsed is None or parsed < 0:
        _refuse(
            f'Invalid minBatchChars: "{value}". Expected a non-negative integer (0 disables).',
            as_json,
        )
    config = config.with_value("minBatchChars", parsed)
    message = (
        "minBatchChars set to 0 \u2014 pre-flush trivial-batch skipping disabled."
        if parsed == 0
        else f"minBatchChars set to {parsed}."
    )
    _save(config, settings, message, as_json, minBatchChars=parsed)


@config_app.command("recovery-grace", context_settings={"ignore_unknown_options": True})
def config_recovery_grace(
    value: Optional[str] = typer.Argument(
        None, metavar="[N]", help="User-turn groups; 0 disables."
    ),
    settings: Optional[Path] = _settings_option(),
    as_json: bool = _json_option(),
) -> None:
    """Show or set how long a recovered output stays verbatim."""
    config = _load(settings)
    if not value:
        n = config.recovery_grace_turns
        state = "disabled" if n == 0 else f"{n} user-turn-group(s)"
        _say(f"Current recovery grace: {state}.", as_json, recoveryGraceTurns=n)
        return
    parsed = js_parse_int(value)
    if parsed is None or parsed < 0:
        _refuse(
            f'Invalid recovery-grace: "{value}". Expected a non-negative integer (0 disables).',
            as_json,
        )
    config = config.with_value("recoveryGraceTurns", parsed)
    message = (
        "recovery-grace set to 0 - context_tree_query output stubs immediately."
        if parsed == 0
        else f"recovery-grace set to {parsed} user-turn-group(s)."
    )
    _save(config, settings, message, as_json, recoveryGraceTurns=parsed)


def _dedup_description(on: bool) -> str:
    if on:
        return (
            "Pre-flush content-hash dedup. When a captured tool call's (toolName, normalized "
            "resultText) matches a record already in the indexer, the duplicate is registered "
            "as an alias of the original \u2014 no summarizer LLM call. Currently ON."
        )
    return (
        "Pre-flush content-hash dedup. Currently OFF. Identical re-reads will be sent to the "
        "summarizer like any other tool call."
    )


@config_app.command("dedup")
def config_dedup(
    value: Optional[str] = typer.Argument(None, help="on, off, status, true or false."),
    settings: Optional[Path] = _settings_option(),
    as_json: bool = _json_option(),
) -> None:
    """Show or set content-hash dedup."""
    config = _load(settings)
    arg = (value or "").lower()
    if arg in ("", "status"):
        on = config.dedup_by_content_hash
        _say(
            f"Content-hash dedup is {'ON' if on else 'OFF'}. {_dedup_description(on)}",
            as_json,
            dedupByContentHash=on,
        )
        return
    if arg not in ("on", "off", "true", "false"):
        _refuse(f'Invalid dedup value: "{arg}". Expected on, off, status, true, or false.', as_json)
    on = arg in ("on", "true")
    config = config.with_value("dedupByContentHash", on)
    message = f"Content-hash dedup turned {'ON' if on else 'OFF'}."
    _save(config, settings, message, as_json, dedupByContentHash=on)


@config_app.command("set")
def config_set(
    key: str = typer.Argument(
        ..., help="A contextPrune key, dotted for nested ones (chainCompression.rollingWindow)."
    ),
    value: str = typer.Argument(..., help="The value as typed in the settings editor."),
    settings: Optional[Path] = _settings_option(),
    as_json: bool = _json_option(),
) -> None:
    """Set any setting, parsed as the reference's settings editor parses typed values."""
    config = _load(settings)
    try:
        parsed = parse_setting_value(key, value)
        config = config.with_value(key, parsed)
    except ConfigError as exc:
        fail(str(exc))
    _save(config, settings, f"{key} set to: {jsjson.dumps(parsed)}", as_json, **{key: parsed})
