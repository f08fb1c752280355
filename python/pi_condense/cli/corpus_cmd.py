"""`pi-condense corpus`: scan, what-if and batch condense over many sessions.

A thin layer over :mod:`pi_condense.corpus`: options to an engine and a cache, a progress
bar on stderr (sessions done, MB/s, ETA), tables or ``--json`` / ``--csv`` on stdout, one
stderr line per failed session (``path:line: error``) and per skipped line.
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import orjson
import typer
from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from ..corpus import CorpusError, EngineError
from ..corpus.batch import condense as condense_corpus
from ..corpus.cache import default_cache_dir
from ..corpus.discover import discover
from ..corpus.grid import expand_grid, parse_set
from ..corpus.models import CondenseResult, Problem, ScanResult, TaskFailure, WhatIfResult
from ..corpus.scan import scan as scan_corpus
from ..corpus.tasks import Outcome
from ..corpus.whatif import whatif as whatif_corpus
from ..errors import ConfigError
from ._common import (
    EXIT_HANDLER_ERRORS,
    EXIT_OK,
    EXIT_WARNINGS,
    base_url_option,
    compat_option,
    config_option,
    err,
    err_console,
    fail,
    json_option,
    load_cli_config,
    make_cli_summarizer,
    out,
    quiet_option,
    show_progress,
    strict_option,
)

__all__ = ["corpus_app"]

corpus_app = typer.Typer(
    help="Many sessions at once: scan, what-if over a config grid, batch condense "
    "(local cores, or a Dask / Ray cluster).",
    no_args_is_help=True,
)

# ---------------------------------------------------------------------------------- options


def _paths_argument() -> Any:
    return typer.Argument(
        None,
        metavar="[PATH]...",
        help="Session files (.jsonl, .jsonl.gz), directories (searched recursively) or globs; "
        "default: Pi's sessions directory (<agentDir>/sessions).",
    )


def _engine_option() -> Any:
    return typer.Option(
        "local",
        "--engine",
        help="local (a process pool over the cores), serial (in this process), dask or ray "
        "(extras pi-condense[dask] / [ray]).",
    )


def _address_option() -> Any:
    return typer.Option(
        None,
        "--address",
        help="Cluster address: a Dask scheduler (tcp://host:8786) or a Ray cluster "
        "(ray://host:10001, or auto); default: a local cluster started for the run.",
    )


def _workers_option() -> Any:
    return typer.Option(None, "--workers", "-j", min=1, help="Local processes (default: cores).")


def _cache_option() -> Any:
    return typer.Option(
        None,
        "--cache-dir",
        help="Result cache (default: $PI_CONDENSE_CACHE_DIR, else ~/.cache/pi-condense/corpus); "
        "on a cluster, a directory the workers share.",
    )


def _no_cache_option() -> Any:
    return typer.Option(False, "--no-cache", help="Neither read nor write the result cache.")


def _cache_dir(cache_dir: Optional[Path], no_cache: bool) -> Optional[str]:
    if no_cache:
        return None
    return str(cache_dir if cache_dir is not None else default_cache_dir())


# Tables are wider than 80 columns: a pipe or a file gets them whole.
table_out = out if out.is_terminal else Console(highlight=False, soft_wrap=True, width=140)

# --------------------------------------------------------------------------------- progress


class _Throughput(ProgressColumn):
    """MB/s of session bytes finished."""

    def render(self, task: Task) -> Text:
        elapsed = task.finished_time if task.finished else task.elapsed
        done = float(task.fields.get("bytes_done", 0))
        if not elapsed:
            return Text("- MB/s")
        return Text(f"{done / elapsed / 1e6:.1f} MB/s")


@contextmanager
def _progress(label: str, total: int, total_bytes: int, shown: bool) -> Iterator[Optional[Any]]:
    if not shown:
        yield None
        return
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("sessions"),
        _Throughput(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err_console(), transient=False) as progress:
        task = progress.add_task(label, total=total, bytes_done=0)
        state = {"bytes": 0}

        def advance(outcome: Outcome) -> None:
            state["bytes"] += outcome.size
            progress.update(task, advance=1, bytes_done=state["bytes"])

        yield advance


def _total(paths: Optional[Sequence[str]]) -> tuple[int, int]:
    try:
        sources = discover(list(paths) if paths else None)
    except CorpusError as exc:
        fail(str(exc))
    return len(sources), sum(s.size for s in sources)


# ---------------------------------------------------------------------------------- output


def _report_problems(failures: Sequence[TaskFailure], problems: Sequence[Problem]) -> None:
    for problem in problems:
        err.print(f"{problem.path}:{problem.line}: warning: {problem.message}", markup=False)
    for failure in failures:
        err.print(f"{failure}", markup=False)


def _exit(failures: int, problems: int, strict: bool) -> None:
    if failures:
        raise typer.Exit(EXIT_HANDLER_ERRORS)
    if strict and problems:
        raise typer.Exit(EXIT_WARNINGS)
    raise typer.Exit(EXIT_OK)


def _pct(value: float) -> str:
    return f"{value * 100:.0f}%"


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    return {
        k: orjson.dumps(v).decode() if isinstance(v, (dict, list)) else v for k, v in row.items()
    }


def _write_csv(rows: Sequence[dict[str, Any]], target: Path) -> None:
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(_flat(r) for r in rows)
    try:
        if str(target) == "-":
            sys.stdout.write(buffer.getvalue())
        else:
            target.write_text(buffer.getvalue(), encoding="utf-8")
    except OSError as exc:
        fail(f"{target}: cannot write: {exc}")


def _print_scan(result: ScanResult, rows: bool) -> None:
    agg = result.aggregate
    if rows:
        table = Table(title="Sessions", title_justify="left")
        for column in ("path", "bytes", "UTG", "branch", "ctx chars", "rendered", "ctq", "gaps"):
            table.add_column(column, justify="left" if column == "path" else "right")
        for row in result.rows:
            table.add_row(
                row.path,
                f"{row.bytes:,}",
                str(row.user_turn_groups),
                str(row.branch_length),
                f"{row.context_chars:,}",
                "-" if row.rendered_chars is None else f"{row.rendered_chars:,}",
                str(row.query_calls),
                ",".join(map(str, row.requery_gaps)) or "-",
            )
        table_out.print(table)
    summary = Table(title="Corpus", show_header=False, title_justify="left")
    summary.add_column("what")
    summary.add_column("value", justify="right")
    roles = ", ".join(f"{k} {v:,}" for k, v in agg.messages_by_role.items())
    tools = ", ".join(
        f"{k} {v:,}" for k, v in sorted(agg.tool_calls_by_tool.items(), key=lambda kv: -kv[1])
    )
    for what, value in (
        ("sessions (failed)", f"{agg.sessions:,} ({agg.failed})"),
        ("bytes", f"{agg.bytes:,}"),
        ("entries", f"{agg.entries:,}"),
        ("messages by role", roles or "-"),
        ("tool calls by tool", tools or "-"),
        ("raw context chars / tokens", f"{agg.context_chars:,} / {agg.context_tokens:,}"),
        ("sessions with pruner entries", f"{agg.pruner_sessions:,}"),
        (
            "their context raw -> rendered",
            f"{agg.pruner_context_chars:,} -> {agg.rendered_chars:,}",
        ),
        ("computed / from cache", f"{result.computed:,} / {result.cached:,}"),
    ):
        summary.add_row(what, value)
    table_out.print(summary)
    gaps = agg.gaps
    table = Table(title="Re-query gaps (user-turn groups)", show_header=False, title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    share = _pct(gaps.requery_sessions / gaps.query_sessions) if gaps.query_sessions else "-"
    table.add_row("sessions with context_tree_query", f"{gaps.query_sessions:,}")
    table.add_row(
        "context_tree_query calls (no ref)", f"{gaps.query_calls:,} ({gaps.empty_query_calls:,})"
    )
    table.add_row(
        "sessions with >= 1 re-query", f"{gaps.requery_sessions:,} ({share} of ctq sessions)"
    )
    table.add_row("re-query events", f"{gaps.events:,}")
    table.add_row("gap median", "-" if gaps.median is None else f"{gaps.median:g} UTG")
    table.add_row(
        "gap <= 1 / <= 2 / <= 3 / <= 5",
        " / ".join(_pct(gaps.within[k]) for k in ("1", "2", "3", "5")),
    )
    table.add_row("gap == 0 (same user turn)", f"{gaps.counts.get('0', 0):,}")
    table_out.print(table)
    lengths = agg.lengths
    table = Table(title="Session length (user-turn groups)", title_justify="left")
    for column in ("UTG", "sessions", "share", "with pruner", "share "):
        table.add_column(column, justify="right")
    for bucket in lengths.buckets:
        span = (
            str(bucket.low)
            if bucket.high == bucket.low
            else (f"{bucket.low}+" if bucket.high is None else f"{bucket.low}-{bucket.high}")
        )
        table.add_row(
            span,
            f"{bucket.sessions:,}",
            _pct(bucket.share),
            f"{bucket.pruner_sessions:,}",
            _pct(bucket.pruner_share),
        )
    median = "-" if lengths.median is None else f"{lengths.median:g}"
    pmedian = "-" if lengths.pruner_median is None else f"{lengths.pruner_median:g}"
    table.add_row("median", median, "", pmedian, "")
    table.add_row("<= 3", "", _pct(lengths.at_most_3), "", _pct(lengths.pruner_at_most_3))
    table_out.print(table)


# --------------------------------------------------------------------------------- commands


@corpus_app.command("scan")
def scan_command(
    paths: Optional[list[str]] = _paths_argument(),
    engine: str = _engine_option(),
    address: Optional[str] = _address_option(),
    workers: Optional[int] = _workers_option(),
    cache_dir: Optional[Path] = _cache_option(),
    no_cache: bool = _no_cache_option(),
    config_file: Optional[Path] = config_option(),
    compat: Optional[str] = compat_option(),
    rows: bool = typer.Option(False, "--rows", help="Also print a row per session."),
    csv_file: Optional[Path] = typer.Option(
        None, "--csv", help="Write the per-session rows as CSV to this file ('-': stdout)."
    ),
    as_json: bool = json_option("Print the rows, failures and aggregate as JSON."),
    quiet: bool = quiet_option(),
    strict: bool = strict_option(),
) -> None:
    """One row per session and the corpus tables (re-query gaps, session lengths).

    Sessions holding pruner entries are also rendered (with --config, default Pi's
    settings, pruning on) to show what they cost the model today.
    """
    config = load_cli_config(config_file, compat, enable=True)
    count, size = _total(paths)
    shown = not as_json and show_progress(quiet)
    try:
        with _progress("scanning", count, size, shown) as advance:
            result = scan_corpus(
                paths or None,
                engine=engine,
                address=address,
                workers=workers,
                cache_dir=_cache_dir(cache_dir, no_cache),
                config=config,
                on_outcome=advance,
            )
    except (CorpusError, EngineError) as exc:
        fail(str(exc))
    problems = [p for row in result.rows for p in row.problems]
    if csv_file is not None:
        _write_csv([r.model_dump(mode="json") for r in result.rows], csv_file)
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
    elif csv_file is None or str(csv_file) != "-":
        _print_scan(result, rows)
    _report_problems(result.failures, problems)
    _exit(len(result.failures), len(problems), strict)


def _grid_label(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={orjson.dumps(v).decode()}" for k, v in settings.items()) or "(base)"


def _print_whatif(result: WhatIfResult) -> None:
    rows = result.rows
    befores = {(r.model_calls, r.before_mean, r.before_p50, r.before_p95) for r in rows}
    same_before = len(befores) == 1
    if rows and same_before:
        first = rows[0]
        out.print(
            f"{first.sessions} sessions, {first.model_calls:,} model calls; chars per call "
            f"before: mean {first.before_mean:,.0f}, p50 {first.before_p50:,.0f}, "
            f"p95 {first.before_p95:,.0f}",
            markup=False,
        )
        out.print(
            "after: mean chars per call after render, p50, p95; saved: reclaimed share; "
            "served: re-queries the grace window would have served verbatim",
            markup=False,
        )
    table = Table(title="What-if, most reclaimed first", title_justify="left", box=box.SIMPLE)
    table.add_column("config", no_wrap=True)
    if not same_before:
        table.add_column("before", justify="right")
    for column in ("after", "p50", "p95", "saved", "flushes", "summ.", "cost", "served"):
        table.add_column(column, justify="right")
    for row in rows:
        cells = [_grid_label(row.settings)]
        if not same_before:
            cells.append(f"{row.before_mean:,.0f}")
        cells += [
            f"{row.after_mean:,.0f}",
            f"{row.after_p50:,.0f}",
            f"{row.after_p95:,.0f}",
            _pct(row.reclaimed_share),
            f"{row.flushes:,}",
            f"{row.summarizer_calls:,}",
            f"${row.cost:.2f}",
            f"{row.served_verbatim}/{row.requeries}",
        ]
        table.add_row(*cells)
    table_out.print(table)
    out.print(f"computed {result.computed}, from cache {result.cached}", markup=False)


def _write_parquet(rows: Sequence[dict[str, Any]], target: Path) -> None:
    try:
        import pyarrow as pa  # type: ignore[import-not-found, unused-ignore]
        import pyarrow.parquet as pq  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        fail("--parquet needs pyarrow (pip install pyarrow); use --csv or --json instead")
    try:
        pq.write_table(pa.Table.from_pylist([_flat(r) for r in rows]), str(target))
    except OSError as exc:
        fail(f"{target}: cannot write: {exc}")


@corpus_app.command("whatif")
def whatif_command(
    paths: list[str] = typer.Argument(
        ..., metavar="PATH...", help="Raw sessions: files, directories or globs."
    ),
    sets: Optional[list[str]] = typer.Option(
        None,
        "--set",
        help="A grid axis KEY=V1,V2,... (settings key, camelCase or dotted, e.g. "
        "recoveryGraceTurns=0,3 or chainCompression.rollingWindow=2,4); repeat for more axes.",
    ),
    summarizer_name: str = typer.Option(
        "default",
        "--summarizer",
        help="Summarizer spec as for `condense --summarizer` (default: the offline one).",
    ),
    base_url: Optional[str] = base_url_option(),
    config_file: Optional[Path] = config_option(),
    compat: Optional[str] = compat_option(),
    engine: str = _engine_option(),
    address: Optional[str] = _address_option(),
    workers: Optional[int] = _workers_option(),
    cache_dir: Optional[Path] = _cache_option(),
    no_cache: bool = _no_cache_option(),
    csv_file: Optional[Path] = typer.Option(
        None, "--csv", help="Write the per-config rows as CSV to this file ('-': stdout)."
    ),
    parquet_file: Optional[Path] = typer.Option(
        None, "--parquet", help="Write the per-config rows as Parquet (needs pyarrow)."
    ),
    as_json: bool = json_option("Print the rows and failures as JSON."),
    quiet: bool = quiet_option(),
    strict: bool = strict_option(),
) -> None:
    """Replay every session under each config of the grid and compare the outcomes.

    Per config: context chars per model call before/after (mean, p50, p95), the reclaimed
    share, flushes, summarizer calls/tokens/cost, and how many of the re-queries observed in
    the corpus the recovery grace window would have served verbatim.
    """
    config = load_cli_config(config_file, compat, enable=True)
    make_cli_summarizer(summarizer_name, base_url, config)  # exit 2 now on a bad spec
    try:
        axes = [parse_set(option) for option in sets or []]
        expand_grid(config, axes)
    except ConfigError as exc:
        fail(str(exc))
    count, size = _total(paths)
    shown = not as_json and show_progress(quiet)
    try:
        with _progress("replaying", count * max(1, _grid_size(axes)), size, shown) as advance:
            result = whatif_corpus(
                paths,
                axes,
                config=config,
                summarizer=summarizer_name,
                base_url=base_url,
                engine=engine,
                address=address,
                workers=workers,
                cache_dir=_cache_dir(cache_dir, no_cache),
                on_outcome=advance,
            )
    except (CorpusError, EngineError, ConfigError) as exc:
        fail(str(exc))
    rows = [r.model_dump(mode="json") for r in result.rows]
    if csv_file is not None:
        _write_csv(rows, csv_file)
    if parquet_file is not None:
        _write_parquet(rows, parquet_file)
    if as_json:
        payload = {
            "rows": rows,
            "failures": [f.model_dump(mode="json") for f in result.failures],
            "computed": result.computed,
            "cached": result.cached,
        }
        sys.stdout.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif csv_file is None or str(csv_file) != "-":
        _print_whatif(result)
    problems = {
        (p.path, p.line, p.message): p for s in result.sessions for r in s for p in r.problems
    }
    _report_problems(result.failures, list(problems.values()))
    _exit(len(result.failures), len(problems), strict)


def _grid_size(axes: Sequence[tuple[str, Sequence[Any]]]) -> int:
    size = 1
    for _, values in axes:
        size *= len(values)
    return size


def _print_condense(result: CondenseResult, target: str) -> None:
    table = Table(title="Condensed", title_justify="left", box=box.SIMPLE)
    table.add_column("session", no_wrap=True)
    for column in ("calls", "chars/call before", "after", "summaries", "chains", "cost"):
        table.add_column(column, justify="right")
    for row in result.rows:
        table.add_row(
            row.path,
            f"{row.model_calls:,}",
            f"{row.before_chars:,}",
            f"{row.after_chars:,}",
            f"{row.summaries:,}",
            f"{row.chains:,}",
            f"${row.cost:.4f}",
        )
    table_out.print(table)
    rows = len(result.rows)
    out.print(
        f"{rows} condensed ({rows - result.cached} now, {result.cached} from cache), "
        f"{len(result.skipped)} already condensed in place (skipped), "
        f"{len(result.failures)} failed -> {target}",
        markup=False,
    )


@corpus_app.command("condense")
def condense_command(
    paths: list[str] = typer.Argument(
        ..., metavar="PATH...", help="Raw sessions: files, directories or globs."
    ),
    out_dir: Optional[Path] = typer.Option(
        None, "--out", "-o", help="Output directory: the input tree is mirrored below it."
    ),
    in_place: bool = typer.Option(
        False,
        "--in-place",
        help="Replace each session (the original is kept as SESSION.bak, never overwritten; "
        "a session already condensed in place is skipped, so a rerun finishes a batch).",
    ),
    force: bool = typer.Option(
        False, "--force", help="Overwrite existing output files (never a backup)."
    ),
    config_file: Optional[Path] = config_option(),
    summarizer_name: str = typer.Option(
        "default",
        "--summarizer",
        help="Summarizer spec as for `condense --summarizer` (default: the offline one).",
    ),
    base_url: Optional[str] = base_url_option(),
    compat: Optional[str] = compat_option(),
    engine: str = _engine_option(),
    address: Optional[str] = _address_option(),
    workers: Optional[int] = _workers_option(),
    cache_dir: Optional[Path] = _cache_option(),
    no_cache: bool = _no_cache_option(),
    as_json: bool = json_option("Print the rows and failures as JSON."),
    quiet: bool = quiet_option(),
    strict: bool = strict_option(),
) -> None:
    """Condense many sessions, each as `pi-condense condense` would.

    Outputs are written atomically; an input is never modified except with --in-place
    (as `condense --in-place`: its original kept as .bak, only if it did not change
    meanwhile; a session already condensed in place is skipped and said so). A session that fails is
    reported with its path (and line) on stderr; the others go on (exit 3 when any failed).
    """
    if (out_dir is None) == (not in_place):
        fail("give --out DIR or --in-place (exactly one)")
    config = load_cli_config(config_file, compat, enable=True)
    make_cli_summarizer(summarizer_name, base_url, config)
    count, size = _total(paths)
    shown = not as_json and show_progress(quiet)
    try:
        with _progress("condensing", count, size, shown) as advance:
            result = condense_corpus(
                paths,
                str(out_dir) if out_dir is not None else None,
                in_place=in_place,
                force=force,
                config=config,
                summarizer=summarizer_name,
                base_url=base_url,
                engine=engine,
                address=address,
                workers=workers,
                cache_dir=_cache_dir(cache_dir, no_cache),
                on_outcome=advance,
            )
    except (CorpusError, EngineError) as exc:
        fail(str(exc))
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
    else:
        _print_condense(result, str(out_dir) if out_dir is not None else "in place (.bak kept)")
    problems = [p for row in result.rows for p in row.problems]
    for skipped in result.skipped:
        err.print(f"pi-condense: {skipped}", markup=False)
    _report_problems(result.failures, problems)
    errors = sum(1 for row in result.rows if row.handler_errors)
    _exit(len(result.failures) + errors, len(problems), strict)
