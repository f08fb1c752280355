"""`pi-condense compact`: compress every eligible chain of a session now (`/pruner compact`).

Every closed chain that is not compressed yet and holds no recovery output still in its grace
window gets a `context-prune-chain` entry, whatever the rolling window and whatever
`chainCompression.enabled` says (entries written while compression is disabled render once it
is enabled). Chains a per-batch summary covers are fused by the summarizer when they have two
or more summaries; the others get the deterministic body, their raw outputs indexed first.

Without `--out` or `--in-place` nothing is written: the run happens on an in-memory copy (any
sidecar spill goes to a temporary directory) and the table shows what would be compressed.
"""

from __future__ import annotations

import gzip
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from .._fs.atomic import read_input, read_regular
from ..chains import ChainCompressionError, ChainRunResult, estimate_reclaim_tokens
from ..errors import CondenseError
from ..inplace import write_new
from ..js import json as jsjson
from ..js import time as jstime
from ..session import SessionFile
from ..state import ChainEntry, PrunerState
from ._common import (
    base_url_option,
    compat_option,
    config_option,
    err,
    exit_for_warnings,
    fail,
    fail_at,
    json_option,
    load_cli_config,
    make_cli_summarizers,
    note_loaded,
    out,
    print_warnings,
    run_with_summarizer,
    strict_option,
    summarizer_option,
)

__all__ = ["compact_command", "compact_report"]

_FUSER_EXTRA = (
    ' It fuses the per-batch summaries of covered chains; "none": no fusion (render '
    "concatenates the per-batch summaries)."
)


def _open(session: Path, out_file: Optional[Path], in_place: bool, tmp: str) -> SessionFile:
    """The session to compact: the file itself, a fresh copy, or an in-memory copy."""
    return note_loaded(_load(session, out_file, in_place, tmp), session)


def _load(session: Path, out_file: Optional[Path], in_place: bool, tmp: str) -> SessionFile:
    if session.name.endswith(".gz") and (in_place or out_file is not None):
        fail(f"{session}: --in-place and --out need a plain .jsonl session (not .gz)")
    try:
        if session.name.endswith(".gz"):
            data = read_input(session)  # decompressed within the bound of every command
            return SessionFile.parse(data, name=str(session), session_dir=tmp)
        if in_place:
            return SessionFile.load(session)
        if out_file is not None:
            if os.path.lexists(out_file):
                fail(f"{out_file}: already exists (pick a new file or use --in-place)")
            data = read_regular(session)
            # The copy is no more open than the session (a private session stays private).
            write_new(out_file, data, stat.S_IMODE(os.stat(session).st_mode))
            return SessionFile.load(out_file)
        return SessionFile.parse(read_regular(session), name=str(session), session_dir=tmp)
    except (OSError, CondenseError, EOFError, gzip.BadGzipFile) as exc:
        fail_at(session, "cannot read session file", exc)


def _body(entry: ChainEntry) -> str:
    if entry.get("bodySource") == "deterministic":
        return "deterministic"
    return "fused" if "rangeSummaryText" in entry else "per-batch"


def compact_report(
    state: PrunerState, result: ChainRunResult, *, dry_run: bool, output: Optional[str]
) -> dict[str, Any]:
    """The facts `compact` prints, as a JSON-ready dict."""
    rows = []
    # Each row is what its chain adds to the running estimate, so the rows add up to the
    # total the reference's message prints (rounding each chain alone would not).
    before = 0
    for i, entry in enumerate(result.entries):
        upto = estimate_reclaim_tokens(state, result.entries[: i + 1])
        start = entry["startUserTimestamp"]
        rows.append(
            {
                "blockId": entry["blockId"],
                "startUserTimestamp": start,
                "start": jstime.to_iso_string(float(start)),
                "calls": len(entry["droppedToolCallIds"]),
                "body": _body(entry),
                "toolRefs": entry["toolRefs"],
                "reclaimTokens": upto - before,
            }
        )
        before = upto
    return {
        "output": output,
        "dryRun": dry_run,
        "compacted": result.block_ids,
        "skippedNoSummary": result.skipped_no_summary,
        "deferred": result.deferred,
        "backfilledRecords": result.backfilled,
        "rangesSummarized": result.ranges_summarized,
        "reclaimedTokens": estimate_reclaim_tokens(state, result.entries),
        "entries": rows,
    }


def _message(report: dict[str, Any]) -> str:
    """The reference's notification text (in the conditional for a dry run)."""
    ids = report["compacted"]
    if not ids:
        skipped = report["skippedNoSummary"]
        if skipped:
            return (
                f"pruner: no chains eligible for compaction ({skipped} skipped "
                "\u2014 no per-batch summary available)"
            )
        return "pruner: no chains eligible for compaction"
    plural = "" if len(ids) == 1 else "s"
    if report["dryRun"]:
        return (
            f"pruner: would compact {len(ids)} chain{plural} ({', '.join(ids)}), "
            f"reclaiming ~{report['reclaimedTokens']} tokens"
        )
    return (
        f"pruner: compacted {len(ids)} chain{plural} ({', '.join(ids)}), "
        f"reclaimed ~{report['reclaimedTokens']} tokens"
    )


def _print(report: dict[str, Any]) -> None:
    if report["entries"]:
        title = "chains that would be compressed" if report["dryRun"] else "compressed chains"
        table = Table(title=title, title_justify="left")
        for column in ("block", "start", "calls", "body", "refs", "~tokens"):
            table.add_column(column, justify="right" if column in ("calls", "~tokens") else "left")
        for row in report["entries"]:
            refs = row["toolRefs"]
            shown = (
                ", ".join(refs) if len(refs) <= 2 else f"{refs[0]}\u2026{refs[-1]} ({len(refs)})"
            )
            table.add_row(
                row["blockId"],
                row["start"][:16].replace("T", " "),
                str(row["calls"]),
                row["body"],
                shown,
                f"{row['reclaimTokens']:,}",
            )
        out.print(table)
    out.print(_message(report), markup=False)
    if report["deferred"]:
        out.print(
            f"{report['deferred']} chain(s) deferred: they hold a context_tree_query output "
            "still in its recovery grace window",
            markup=False,
        )
    if report["dryRun"]:
        out.print("dry run: nothing written (use --in-place or --out FILE)", markup=False)
    elif report["compacted"]:
        out.print(f"written to {report['output']}", markup=False)


def compact_command(
    session: Path = typer.Argument(
        ..., help="The Pi session file (.jsonl, or .jsonl.gz for a dry run)."
    ),
    out_file: Optional[Path] = typer.Option(
        None, "--out", help="Write the compacted session to this new file."
    ),
    in_place: bool = typer.Option(
        False, "--in-place", help="Append the entries to the session file itself."
    ),
    config_file: Optional[Path] = config_option(),
    summarizer_name: Optional[str] = summarizer_option("default", _FUSER_EXTRA),
    base_url: Optional[str] = base_url_option(),
    compat: Optional[str] = compat_option(),
    as_json: bool = json_option(),
    strict: bool = strict_option(),
) -> None:
    """Compress every eligible chain of SESSION now, with the estimated reclaim."""
    if out_file is not None and in_place:
        fail("--out and --in-place are exclusive")
    config = load_cli_config(config_file, compat)
    if summarizer_name == "none":
        if base_url is not None:
            fail('--base-url does not apply to --summarizer "none"')
        summarizer, session_model = None, None
        config = config.with_value("chainCompression.fuseRangeSummary", False)
    else:
        summarizer, session_model = make_cli_summarizers(
            summarizer_name, base_url, config, "default"
        )
    from ..condenser import Condenser  # the pipeline is loaded only when the command runs

    notices: list[str] = []
    failure: Optional[str] = None
    with tempfile.TemporaryDirectory(prefix="pi-condense-compact-") as tmp:
        source = _open(session, out_file, in_place, tmp)
        print_warnings(source, session)
        condenser = Condenser(
            source,
            config,
            summarizer=summarizer,
            session_model=session_model,
            notify=lambda message, level: notices.append(message),
        )
        try:
            result = run_with_summarizer(summarizer, condenser.compact)
        except ChainCompressionError as exc:
            # Entries appended before the failure stay: report them, then exit 3.
            failure, result = str(exc), exc.partial
        except OSError as exc:
            fail(f"pruner: compact failed: {exc.strerror or exc}")
        dry_run = not in_place and out_file is None
        target = None if dry_run else os.fspath(out_file if out_file is not None else session)
        report = compact_report(condenser.state, result, dry_run=dry_run, output=target)
    if failure is not None:
        report["error"] = failure
    for notice in notices:
        err.print(notice, markup=False)
    if as_json:
        sys.stdout.write(jsjson.dumps(report, 2) + "\n")
    else:
        _print(report)
    if failure is not None:
        err.print(f"pi-condense: pruner: compact failed: {failure}", markup=False)
    exit_for_warnings(source, strict, failed=failure is not None)
