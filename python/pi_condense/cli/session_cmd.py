"""`pi-condense session ...`: inspect Pi session files without pruning."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from ..config import Config
from ..js import json as jsjson
from ..render import render
from ..session import SessionFile
from ..session_stats import raw_conversation
from ..state import PrunerState
from ._common import (
    example_option,
    exit_for_warnings,
    json_option,
    leaf_option,
    open_at_leaf,
    out,
    print_warnings,
    resolve_file,
    strict_option,
)

session_app = typer.Typer(help="Inspect Pi session files (no pruning).", no_args_is_help=True)


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024 or unit == "MiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def session_summary(session: SessionFile, path: Path, leaf: Optional[str]) -> dict[str, Any]:
    """The facts `session info` reports, as a JSON-ready dict."""
    branch = session.branch(leaf)
    context = session.build_context(leaf)
    entry_types = Counter(str(e.get("type")) for e in session.entries)
    roles = Counter(str(m.get("role")) for m in context.messages if isinstance(m, dict))
    chars = jsjson.length(context.messages)
    conversation = raw_conversation(context.messages)
    raw = jsjson.length(conversation)
    rendered = render(context.messages, PrunerState.from_branch(branch), Config())
    after = rendered.after_chars if rendered.pruned else chars
    return {
        "file": str(path),
        "sessionId": session.session_id,
        "version": session.version,
        "cwd": session.header.get("cwd"),
        "timestamp": session.header.get("timestamp"),
        "sizeBytes": path.stat().st_size,
        "entries": len(session.entries),
        "entriesByType": dict(sorted(entry_types.items())),
        "leaf": branch[-1]["id"] if branch else None,
        "branchLength": len(branch),
        "messages": len(context.messages),
        "messagesByRole": dict(sorted(roles.items())),
        "contextChars": chars,
        "contextTokensEstimate": (chars + 2) // 4,
        "rawContextChars": raw,
        "rawContextTokensEstimate": (raw + 2) // 4,
        "prunerMessages": len(context.messages) - len(conversation),
        "renderedChars": after,
        "renderedTokensEstimate": (after + 2) // 4,
        "renderedMessages": len(rendered.messages),
        "thinkingLevel": context.thinking_level,
        "model": context.model,
        "warnings": [{"line": w.line, "reason": w.reason} for w in session.warnings],
    }


@session_app.command("info")
def session_info(
    file: Optional[Path] = typer.Argument(None, help="Pi session file (.jsonl or .jsonl.gz)."),
    leaf: Optional[str] = leaf_option(),
    as_json: bool = json_option("Machine-readable output."),
    strict: bool = strict_option(),
    example: bool = example_option(),
) -> None:
    """Header, entry counts, branch, messages by role, size and load warnings."""
    path = resolve_file(file, example)
    session = open_at_leaf(path, leaf)
    info = session_summary(session, path, leaf)
    if as_json:
        sys.stdout.write(jsjson.dumps(info, indent=2) + "\n")
    else:
        _print_info_tables(info)
        print_warnings(session, path)
    exit_for_warnings(session, strict)


def _print_info_tables(info: dict[str, Any]) -> None:
    overview = Table(title=f"Session {info['sessionId']}", show_header=False, title_justify="left")
    overview.add_column("field", style="bold")
    overview.add_column("value", overflow="fold")
    model = info["model"]
    chars, tokens = info["contextChars"], info["contextTokensEstimate"]
    raw, after = info["rawContextChars"], info["renderedChars"]
    extra = info["prunerMessages"]
    stored = (
        f", {info['messages']} msgs incl. {extra} summar{'y' if extra == 1 else 'ies'}"
        if extra
        else f", {info['messages']} msgs"
    )
    smaller = f" ({(raw - after) / raw * 100:.1f}% smaller)" if raw > 0 and after < raw else ""
    rows = [
        ("file", info["file"]),
        ("version", str(info["version"])),
        ("cwd", str(info["cwd"])),
        ("created", str(info["timestamp"])),
        ("size", _human_bytes(info["sizeBytes"])),
        ("entries", str(info["entries"])),
        ("leaf", str(info["leaf"])),
        ("branch length", str(info["branchLength"])),
        ("context messages", str(info["messages"])),
        ("context as stored", f"{chars:,} chars (~{tokens:,} tokens)" + stored),
        (
            "context raw",
            f"{raw:,} chars (~{info['rawContextTokensEstimate']:,} tokens) without summaries",
        ),
        (
            "context rendered",
            f"{after:,} chars (~{info['renderedTokensEstimate']:,} tokens) sent{smaller}",
        ),
        ("thinking level", str(info["thinkingLevel"])),
        ("model", f"{model['provider']}/{model['modelId']}" if model else "-"),
        ("load warnings", str(len(info["warnings"]))),
    ]
    for name, value in rows:
        overview.add_row(name, value)
    out.print(overview)
    _print_counter("Entries by type", "type", info["entriesByType"])
    _print_counter("Context messages by role", "role", info["messagesByRole"])


def _print_counter(title: str, key: str, counts: dict[str, int]) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column(key)
    table.add_column("count", justify="right")
    for name, count in counts.items():
        table.add_row(name, str(count))
    out.print(table)


@session_app.command("context")
def session_context(
    file: Optional[Path] = typer.Argument(None, help="Pi session file (.jsonl or .jsonl.gz)."),
    leaf: Optional[str] = leaf_option(),
    strict: bool = strict_option(),
    example: bool = example_option(),
) -> None:
    """Print JSON.stringify of the context messages Pi would build (no pruning)."""
    path = resolve_file(file, example)
    session = open_at_leaf(path, leaf)
    data = jsjson.dumps(session.build_context(leaf).messages)
    stdout = sys.stdout.buffer
    stdout.write(data.encode("utf-8"))
    stdout.flush()
    print_warnings(session, path)
    exit_for_warnings(session, strict)
