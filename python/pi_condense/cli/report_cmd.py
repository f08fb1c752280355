"""`pi-condense report`: one self-contained HTML page of what the pruner did to a session."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import Optional

import typer

from .._fs.atomic import write_atomic
from ..js import json as jsjson
from ._common import (
    base_url_option,
    compat_option,
    config_option,
    fail,
    fail_at,
    json_option,
    load_cli_config,
    make_cli_summarizers,
    out,
    plural,
    print_warnings,
    read_session,
    summarizer_option,
)

__all__ = ["report_command"]


def report_command(
    session_file: Path = typer.Argument(
        ..., metavar="SESSION", help="Pi session file (.jsonl or .jsonl.gz)."
    ),
    out_file: Path = typer.Option(..., "--out", "-o", help="The HTML file to write."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing output file."),
    config_file: Optional[Path] = config_option(),
    summarizer_name: Optional[str] = summarizer_option("default"),
    base_url: Optional[str] = base_url_option(),
    compat: Optional[str] = compat_option(),
    as_json: bool = json_option("Print the report's figures as JSON too."),
) -> None:
    """Write an HTML report of SESSION: context per model call raw and condensed, the prompt
    cache prefix kept, flushes and chain compressions, the biggest tool outputs, summarizer
    usage and recovered refs.

    A raw session is replayed through the pruner first (pruning on); a session that already
    holds the pruner's entries is measured as it is. The page needs no network (plotly is
    inlined); the [report] extra provides plotly.
    """
    from ..report import ReportExtraMissing, collect, render_html

    if out_file.exists() and not force:
        fail(f"{out_file} exists (use --force to overwrite it)")
    config = load_cli_config(config_file, compat, enable=True)
    source = read_session(session_file)
    print_warnings(source, session_file)
    summarizer, _ = make_cli_summarizers(summarizer_name, base_url, config, "default")
    data = collect(source, config, summarizer, title=session_file.name)
    try:
        page = render_html(data)
    except ReportExtraMissing as exc:
        fail(str(exc))
    try:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = out_file.with_name(f".{out_file.name}.{secrets.token_hex(6)}.tmp")
        write_atomic(out_file, page.encode("utf-8"), tmp)
    except OSError as exc:
        fail_at(out_file, "cannot write", exc)
    summary = {
        "output": str(out_file),
        "replayed": data.replayed,
        "modelCalls": len(data.calls),
        "flushCalls": data.flush_calls,
        "chainCalls": data.chain_calls,
        "rawChars": [c.raw for c in data.calls],
        "condensedChars": [c.sent for c in data.calls],
        "cachedPrefixChars": [c.cached_prefix for c in data.calls],
        "biggestOutputs": data.outputs,
        "summarizer": data.summarizer,
        "stats": data.stats,
        "recoveries": [vars(r) for r in data.recoveries],
    }
    if as_json:
        sys.stdout.write(jsjson.dumps(summary, 2) + "\n")
    else:
        out.print(
            f"report -> {out_file} ({plural(len(data.calls), 'model call')}, "
            f"{plural(len(data.flush_calls), 'flush point')}, "
            f"{plural(len(data.chain_calls), 'chain point')})",
            markup=False,
        )
