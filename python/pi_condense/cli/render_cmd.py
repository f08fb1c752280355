"""`pi-condense render`: the model context a session renders to, without writing anything.

The session's pruner state (its ``context-prune-*`` entries on the branch) is rebuilt and the
session's own context, or a given message array, goes through the four render phases, as the
extension's ``context`` handler does before every model call. Nothing is written: diagnostics
a live render would persist are only reported.
"""

from __future__ import annotations

import gzip
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import typer
from rich.text import Text

from .._fs.atomic import read_input
from ..adapters import detect_format
from ..condenser import Condenser
from ..config import Config, load_config
from ..errors import CondenseError, warn_once
from ..js import json as jsjson
from ..js.values import js_round, to_fixed
from ..render import RenderResult, render, sized
from ..session import SessionFile
from ._common import err, fail, fail_at, note_loaded, out, print_warnings, resolve_file

__all__ = ["RenderCounts", "compact_count", "register", "render_counts", "stats_line"]

_PREVIEW = 100
_ORPHAN_DETAIL = "swept "
_SYNTHETIC_PREFIX = '<compressed-chain id="'


# ----------------------------------------------------------------------------- formatting


def compact_count(n: float) -> str:
    """The reference's ``cc(n)``: ``1250`` -> ``1.3k``, ``2_500_000`` -> ``2.5M``, ``999`` ->
    ``999`` (``toFixed(1)`` rounds exact ties away from zero)."""

    def fixed1(x: float) -> str:
        return to_fixed(x, 1)

    if n >= 1_000_000:
        return fixed1(n / 1_000_000) + "M"
    if n >= 1000:
        return fixed1(n / 1000) + "k"
    return jsjson.dumps(n)


@dataclass(frozen=True)
class RenderCounts:
    """What each render phase left in the output, derived from the input and output lists.

    Net counts: a stub or purged call inside a range that phase 3 then drops is not counted.
    """

    stubbed: int
    """Stubbed tool results in the output (phase 1)."""
    purged: int
    """Tool-call argument bodies replaced by the purge marker (phase 2)."""
    chains: int
    """Synthetic ``<compressed-chain>`` messages inserted (phase 3)."""
    chain_dropped: int
    """Messages dropped inside compressed ranges, plus suppressed summaries (phase 3)."""
    swept: int
    """Orphan tool results removed (phase 4)."""


def _is_synthetic(message: Any) -> bool:
    content = message.get("content") if isinstance(message, dict) else None
    if not (isinstance(content, list) and content and isinstance(content[0], dict)):
        return False
    text = content[0].get("text")
    return isinstance(text, str) and text.startswith(_SYNTHETIC_PREFIX)


def _is_tool_call(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "toolCall"


def render_counts(messages: list[Any], result: RenderResult) -> RenderCounts:
    """Count the work of each phase by comparing ``messages`` with ``result.messages``.

    Unchanged messages are the input's own objects, so a message of the output that is not
    one of them was made by the render: a tool result is a stub, an assistant a copy (whose
    new blocks are purged calls), a user message a synthetic chain message. Stubs and copies
    replace one message each; the length difference is chain drops, chain insertions and
    sweeps, and the orphan-sweep diagnostic gives the sweep count.
    """
    if not result.pruned:
        return RenderCounts(0, 0, 0, 0, 0)
    inputs = {id(m) for m in messages}
    input_blocks = {
        id(b)
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for b in m["content"]
    }
    stubbed = purged = chains = 0
    for message in result.messages:
        if id(message) in inputs or not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "toolResult":
            stubbed += 1
        elif role == "assistant" and isinstance(message.get("content"), list):
            purged += sum(
                1 for b in message["content"] if id(b) not in input_blocks and _is_tool_call(b)
            )
        elif role == "user" and _is_synthetic(message):
            chains += 1
    swept = 0
    for diagnostic in result.diagnostics:
        if diagnostic.kind == "orphan-sweep" and diagnostic.detail.startswith(_ORPHAN_DETAIL):
            swept = int(diagnostic.detail[len(_ORPHAN_DETAIL) :].split(" ", 1)[0])
    dropped = len(messages) - len(result.messages) + chains - swept
    return RenderCounts(stubbed, purged, chains, dropped, swept)


def stats_line(before: int, after: int) -> str:
    """``929.2k -> 214.5k chars (-77%)`` (the status line's reduction, on chars)."""
    reduction = max(0, js_round((1 - after / before) * 100)) if before > 0 else 0
    return f"{compact_count(before)} -> {compact_count(after)} chars (-{reduction}%)"


def _stats_lines(messages: list[Any], result: RenderResult) -> list[str]:
    counts = render_counts(messages, result)
    if result.pruned:
        head = stats_line(result.before_size, result.after_size)
    else:
        size = compact_count(sized(jsjson.length(messages), messages))
        head = f"{size} -> {size} chars (-0%), unchanged"
    lines = [
        head,
        f"stubbed {counts.stubbed} · purged {counts.purged} · "
        f"chain-dropped {counts.chain_dropped} in {counts.chains} chains · "
        f"swept {counts.swept}",
    ]
    lines += [f"diagnostic {d.kind}: {d.detail}" for d in result.diagnostics]
    if result.threw:
        lines.append("the reference throws on this input: the context is left unchanged")
    return lines


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1] + "…"


def _block_preview(block: Any) -> str:
    if not isinstance(block, dict):
        return _preview(jsjson.dumps(block))
    kind = block.get("type")
    if kind == "text":
        return _preview(str(block.get("text", "")))
    if kind == "thinking":
        return "(thinking) " + _preview(str(block.get("thinking", "")))
    if kind == "toolCall":
        args = block.get("arguments")
        return f"→ {block.get('name')}({_preview(jsjson.dumps(args) if args is not None else '')})"
    return f"({kind})"


def _message_preview(message: Any) -> tuple[str, str, str]:
    """(role, tool or type, text) of one message for the pretty view."""
    if not isinstance(message, dict):
        return "?", "", _preview(jsjson.dumps(message))
    role = str(message.get("role"))
    content = message.get("content")
    label = ""
    if role == "toolResult":
        label = str(message.get("toolName", ""))
    elif role == "custom":
        label = str(message.get("customType", ""))
    if isinstance(content, str):
        return role, label, _preview(content)
    if isinstance(content, list):
        parts = [_block_preview(b) for b in content]
        return role, label, " | ".join(p for p in parts if p)
    return role, label, ""


_ROLE_STYLE = {
    "user": "bold green",
    "assistant": "bold blue",
    "toolResult": "yellow",
    "custom": "magenta",
}


def _warn_foreign(path: Path, messages: list[Any]) -> None:
    """Say so when the messages look like a provider format rather than Pi's."""
    found = detect_format(messages)
    if found is None or found == "pi":
        return
    err.print(
        f"pi-condense: warning: {path}: these look like {found} messages, not Pi messages; "
        f"convert them first with pi_condense.adapters.adapter_for({found!r}).decode(...)",
        markup=False,
    )


def _print_pretty(messages: list[Any], result: RenderResult) -> None:
    inputs = {id(m) for m in messages}
    width = len(str(len(result.messages)))
    for i, message in enumerate(result.messages):
        role, label, text = _message_preview(message)
        changed = id(message) not in inputs
        line = Text()
        line.append(f"{i:>{width}} ")
        line.append("*" if changed else " ", style="bold red")
        line.append(f" {role:<10}", style=_ROLE_STYLE.get(role, ""))
        line.append(f" {label:<12}" if label else " " * 13, style="dim")
        line.append(" " + text, style="cyan" if changed else "")
        out.print(line, overflow="ellipsis", no_wrap=True, crop=True)
    out.print(Text("* = made by the render (stub, copy or synthetic chain message)", style="dim"))


# ---------------------------------------------------------------------------------- inputs


def _load_session(path: Path) -> SessionFile:
    try:
        if path.name.endswith(".gz"):
            return note_loaded(SessionFile.parse(read_input(path), name=str(path)), path)
        return note_loaded(SessionFile.load(path), path)
    except (OSError, EOFError, gzip.BadGzipFile, CondenseError) as exc:
        fail_at(path, "cannot read session file", exc)


def _read_json(path: Path, what: str) -> Any:
    try:
        return jsjson.loads(read_input(path))
    except (OSError, EOFError, gzip.BadGzipFile, CondenseError) as exc:
        fail_at(path, f"cannot read {what}", exc)


def _load_config(path: Optional[Path], compat: Optional[str]) -> Config:
    mode: Any = compat
    try:
        if path is None:
            return load_config(compat=mode)
        block = _read_json(path, "config")
        if isinstance(block, dict) and isinstance(block.get("contextPrune"), dict):
            block = block["contextPrune"]
        if not isinstance(block, dict):
            fail(
                f"{path}: the config must be a JSON object (a contextPrune block or settings.json)"
            )
        return Config.from_settings_dict(block, compat=mode)
    except CondenseError as exc:
        fail(f"{path}: {exc}" if path is not None else str(exc))


def _report(result: RenderResult) -> str:
    """``{"pruned","beforeChars","afterChars","diagnostics"}`` as render.json has them."""
    report = {
        "pruned": result.pruned,
        "beforeChars": result.before_size,
        "afterChars": result.after_size,
        "diagnostics": [d.entry_data() for d in result.diagnostics],
    }
    return jsjson.dumps(report) + "\n"


# --------------------------------------------------------------------------------- command


def render_command(
    session_file: Optional[Path] = typer.Argument(
        None, metavar="SESSION", help="Pi session (.jsonl, or .jsonl.gz)."
    ),
    leaf: Optional[str] = typer.Option(None, "--leaf", help="Entry id to use as the leaf."),
    config_file: Optional[Path] = typer.Option(
        None,
        "--config",
        help="contextPrune settings: the block itself, or a settings.json holding one "
        "(default: Pi's settings.json).",
    ),
    compat: Optional[str] = typer.Option(
        None, "--compat", help='Config normalization: "default" or "reference".'
    ),
    messages_file: Optional[Path] = typer.Option(
        None,
        "--messages",
        help="Render this JSON message array (against the session's state) instead of the "
        "session's own context.",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print exactly the bytes of JSON.stringify(messages)."
    ),
    pretty: bool = typer.Option(False, "--pretty", help="A readable view of the messages."),
    stats: bool = typer.Option(
        False, "--stats", help="Sizes and counts per phase (the default output)."
    ),
    report_file: Optional[Path] = typer.Option(
        None,
        "--report",
        help='Write {"pruned","beforeChars","afterChars","diagnostics"} as JSON to this file.',
    ),
    example: bool = typer.Option(False, "--example", help="Use the bundled example session."),
) -> None:
    """Render a session's context as the extension would before the next model call.

    `enabled` is not consulted: this shows what rendering does when pruning is on. Nothing
    is written to the session. With --json, the stats (--stats) go to stderr.
    """
    if as_json and pretty:
        fail("--json and --pretty are exclusive")
    if compat is not None and compat not in ("default", "reference"):
        fail(f"--compat must be default or reference, not {compat!r}")
    path = resolve_file(session_file, example)
    config = _load_config(config_file, compat)
    for warning in config.warnings:
        warn_once(f"pi-condense: warning: {warning}")  # the Condenser below says it too
    session = _load_session(path)
    if leaf is not None:
        if session.get_entry(leaf) is None:
            fail(f"{path}: no entry with id {leaf!r}")
        session.set_leaf(leaf)
    condenser = Condenser(session, config)
    if messages_file is not None:
        messages = _read_json(messages_file, "messages")
        if not isinstance(messages, list):
            fail(f"{messages_file}: the messages must be a JSON array")
        _warn_foreign(messages_file, messages)
        result = render(messages, condenser.state, condenser.config)
    else:
        messages = session.build_context().messages
        result = render(messages, condenser.state, condenser.config)

    if report_file is not None:
        try:
            report_file.write_text(_report(result), encoding="utf-8")
        except OSError as exc:
            fail_at(report_file, "cannot write report", exc)
    if as_json:
        stdout = sys.stdout.buffer
        stdout.write(jsjson.dumps_bytes(result.messages))
        stdout.flush()
        if stats:
            for line in _stats_lines(messages, result):
                err.print(line, markup=False)
    else:
        if pretty:
            _print_pretty(messages, result)
        if stats or not pretty:
            for line in _stats_lines(messages, result):
                out.print(line, markup=False)
    print_warnings(session, path)


def register(app: typer.Typer) -> None:
    """Add the ``render`` command to the root app."""
    app.command("render")(render_command)
