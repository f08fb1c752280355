"""`pi-condense condense` and `pi-condense replay`: run a recorded Pi session through the pruner.

Both replay the session's branch through a :class:`~pi_condense.condenser.Condenser` with the
event model of :mod:`pi_condense.replay`. ``condense`` writes the condensed session (a new file
beside the input, or the input itself with a backup; for ``--example``, a new file in the
current directory) and reports what was reclaimed;
``replay`` writes the conformance vectors' files (``session.jsonl``, ``contexts.jsonl``,
``summarizer.jsonl``) into a directory that is also the new session's directory.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .. import jsjson
from ..config import Config
from ..inplace import InPlaceError, backup_blocker, fingerprint, replace_in_place, write_new
from ..render import render
from ..replay import ReplayOptions, ReplayResult, replay_async
from ..session import SessionFile
from ..state import PrunerState
from ..summarize.base import Summarizer
from ._common import (
    base_url_option,
    check_leaf,
    compat_option,
    config_option,
    err,
    example_option,
    exit_for_warnings,
    fail,
    json_option,
    leaf_option,
    load_cli_config,
    make_cli_summarizers,
    out,
    print_warnings,
    quiet_option,
    read_session,
    resolve_file,
    run_with_summarizer,
    show_progress,
    strict_option,
    summarizer_option,
)

__all__ = ["condense_report", "problems", "register"]


# ---------------------------------------------------------------------------------- inputs


def _inputs(
    path: Path,
    leaf: Optional[str],
    config_file: Optional[Path],
    compat: Optional[str],
    spec: Optional[str],
    base_url: Optional[str],
    offline: str,
) -> tuple[SessionFile, Config, Summarizer, Optional[Summarizer]]:
    """The source session (its load warnings printed), the config (pruning on), the
    summarizer and its session model (None: the summarizer itself; see
    `make_cli_summarizers`), or exit 2 on the first that is wrong."""
    config = load_cli_config(config_file, compat, enable=True)
    source = read_session(path)
    check_leaf(source, path, leaf)
    print_warnings(source, path)
    summarizer, session_model = make_cli_summarizers(spec, base_url, config, offline)
    return source, config, summarizer, session_model


# --------------------------------------------------------------------------------- running


def _run(
    source: SessionFile,
    config: Config,
    summarizers: tuple[Summarizer, Optional[Summarizer]],
    options: ReplayOptions,
    progress_bar: bool,
    label: str,
) -> ReplayResult:
    """Replay in one event loop with (summarizer, session model) (the summarizer's client is
    closed at the end), with a progress bar on stderr when ``progress_bar``."""
    summarizer, session_model = summarizers
    if not progress_bar:
        return run_with_summarizer(
            summarizer,
            lambda: replay_async(source, config, summarizer, options, session_model=session_model),
        )
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("entries"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, transient=False) as progress:
        task = progress.add_task(label, total=len(source.branch(options.leaf)))

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        return run_with_summarizer(
            summarizer,
            lambda: replay_async(
                source,
                config,
                summarizer,
                options,
                on_progress=advance,
                session_model=session_model,
            ),
        )


def _cold_chars(session: SessionFile, config: Config) -> tuple[int, int]:
    """(context chars, rendered chars) of a session's current branch, as a fresh load sees it."""
    messages = session.build_context().messages
    before = jsjson.length(messages)
    result = render(messages, PrunerState.from_session(session), config)
    return before, result.after_chars if result.pruned else before


# ---------------------------------------------------------------------------------- report

_OVERSIZED = "pruner: skipped pruning turn "
_DEDUPED = "pruner: deduplicated "


def _notification_counts(result: ReplayResult) -> dict[str, int]:
    counts = {"oversized": 0, "trivial": 0, "deduped": 0}
    for message, _kind in result.notifications:
        if message.startswith(_OVERSIZED):
            counts["trivial" if "minBatchChars=" in message else "oversized"] += 1
        elif message.startswith(_DEDUPED) and "(turn " in message:
            counts["deduped"] += 1
    return counts


def problems(result: ReplayResult) -> list[dict[str, Any]]:
    """The condenser's warning and error notifications (e.g. failed summarizer calls), each
    once with its count, in order of first appearance."""
    counts: dict[tuple[str, str], int] = {}
    for message, level in result.notifications:
        if level in ("warning", "error"):
            counts[(level, message)] = counts.get((level, message), 0) + 1
    return [{"level": k[0], "message": k[1], "count": n} for k, n in counts.items()]


def _print_problems(result: ReplayResult) -> None:
    """Notifications, replay warnings and failed events on stderr."""
    for problem in problems(result):
        times = f" (x{problem['count']})" if problem["count"] > 1 else ""
        err.print(f"pi-condense: {problem['level']}: {problem['message']}{times}", markup=False)
    for warning in dict.fromkeys(result.warnings):
        err.print(f"pi-condense: warning: {warning}", markup=False)
    for event, message in result.handler_errors:
        err.print(f"pi-condense: {event} failed: {message}", markup=False)


def _entry_facts(session: SessionFile) -> dict[str, Any]:
    facts: dict[str, Any] = {"summaries": 0, "chains": 0, "aliases": 0, "spilled": 0}
    stats: dict[str, Any] = {}
    for entry in session.entries:
        kind = entry.get("customType")
        data = entry.get("data")
        if kind == "context-prune-summary":
            facts["summaries"] += 1
        elif kind == "context-prune-chain":
            facts["chains"] += 1
        elif kind == "context-prune-dedup-alias":
            facts["aliases"] += 1
        elif kind == "context-prune-index" and isinstance(data, dict):
            calls = data.get("toolCalls")
            facts["spilled"] += (
                sum(1 for r in calls if isinstance(r, dict) and r.get("spillPath"))
                if isinstance(calls, list)
                else 0
            )
        elif kind == "context-prune-stats" and isinstance(data, dict):
            stats = data
    facts["stats"] = stats
    return facts


def condense_report(result: ReplayResult, raw_chars: int, condensed_chars: int) -> dict[str, Any]:
    """The figures `condense` prints: calls, batch outcomes, chains, sizes, summarizer cost."""
    facts = _entry_facts(result.session)
    skipped = _notification_counts(result)
    sizes = result.contexts.sizes
    before = sum(s.before for s in sizes)
    after = sum(s.after for s in sizes)
    stats = facts["stats"]
    return {
        "llmCalls": len(sizes),
        "summarizerCalls": len(result.summarizer.calls),
        "batches": {
            "summarized": facts["summaries"],
            "deduped": skipped["deduped"],
            "trivial": skipped["trivial"],
            "oversized": skipped["oversized"],
        },
        "dedupedToolCalls": facts["aliases"],
        "spilled": facts["spilled"],
        "chains": facts["chains"],
        "perCall": {
            "beforeChars": round(before / len(sizes)) if sizes else 0,
            "afterChars": round(after / len(sizes)) if sizes else 0,
            "lastBeforeChars": sizes[-1].before if sizes else 0,
            "lastAfterChars": sizes[-1].after if sizes else 0,
        },
        "context": {"rawChars": raw_chars, "condensedChars": condensed_chars},
        "summarizer": {
            "inputTokens": stats.get("totalInputTokens", 0),
            "outputTokens": stats.get("totalOutputTokens", 0),
            "cost": stats.get("totalCost", 0),
        },
        "handlerErrors": [{"event": e, "error": m} for e, m in result.handler_errors],
        "warnings": list(dict.fromkeys(result.warnings)),
        "problems": problems(result),
    }


def _pct(before: int, after: int) -> str:
    if before <= 0:
        return ""
    return f" ({(before - after) / before * 100:.1f}% smaller)"


def _print_report(report: dict[str, Any], target: Path) -> None:
    table = Table(title=f"Condensed -> {target}", show_header=False, title_justify="left")
    table.add_column("what")
    table.add_column("value", justify="right")
    batches = report["batches"]
    per_call = report["perCall"]
    context = report["context"]
    money = report["summarizer"]
    rows = [
        ("LLM calls replayed", f"{report['llmCalls']}"),
        ("summarizer calls", f"{report['summarizerCalls']}"),
        ("batches summarized", f"{batches['summarized']}"),
        (
            "batches deduped / trivial / oversized",
            f"{batches['deduped']} / {batches['trivial']} / {batches['oversized']}",
        ),
        ("tool calls deduped", f"{report['dedupedToolCalls']}"),
        ("outputs spilled", f"{report['spilled']}"),
        ("chains compressed", f"{report['chains']}"),
        (
            "chars per call (avg)",
            f"{per_call['beforeChars']:,} -> {per_call['afterChars']:,}"
            f"{_pct(per_call['beforeChars'], per_call['afterChars'])}",
        ),
        (
            "chars at the last call",
            f"{per_call['lastBeforeChars']:,} -> {per_call['lastAfterChars']:,}",
        ),
        (
            "context on reload",
            f"{context['rawChars']:,} -> {context['condensedChars']:,}"
            f"{_pct(context['rawChars'], context['condensedChars'])}",
        ),
        ("summarizer tokens (in / out)", f"{money['inputTokens']:,} / {money['outputTokens']:,}"),
        ("summarizer cost", f"${money['cost']:.4f}"),
    ]
    for what, value in rows:
        table.add_row(what, value)
    out.print(table)


# -------------------------------------------------------------------------------- commands


def _targets(
    session_path: Path, out_file: Optional[Path], in_place: bool, example: bool
) -> tuple[Path, Path]:
    """(output file, backup file or the output) after checking they can be written."""
    if in_place and out_file is not None:
        fail("--out and --in-place are exclusive")
    if in_place:
        if example:
            fail("--in-place cannot rewrite the bundled example (use --out, or no option)")
        if session_path.name.endswith(".gz"):
            fail("--in-place needs a plain .jsonl session (not .gz)")
        return session_path, session_path.with_name(session_path.name + ".bak")
    if out_file is None:
        name = session_path.name
        for suffix in (".gz", ".jsonl"):
            name = name[: -len(suffix)] if name.endswith(suffix) else name
        # The example lives in the installed package: its output goes to the current directory.
        folder = Path() if example else session_path.parent
        out_file = folder / f"{name}.condensed.jsonl"
    return out_file, out_file


def condense(
    session_path: Optional[Path] = typer.Argument(
        None, metavar="SESSION", help="Raw Pi session (.jsonl or .jsonl.gz)."
    ),
    example: bool = example_option(
        "Condense the bundled example session into ./example-session.condensed.jsonl."
    ),
    out_file: Optional[Path] = typer.Option(
        None, "--out", "-o", help="Output file (default: <name>.condensed.jsonl beside SESSION)."
    ),
    in_place: bool = typer.Option(
        False, "--in-place", help="Replace SESSION (a copy is kept as SESSION.bak)."
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing output or backup."),
    config_file: Optional[Path] = config_option(),
    summarizer_name: Optional[str] = summarizer_option("default"),
    base_url: Optional[str] = base_url_option(),
    compat: Optional[str] = compat_option(),
    leaf: Optional[str] = leaf_option("Condense this entry's branch."),
    as_json: bool = json_option(),
    quiet: bool = quiet_option(),
    strict: bool = strict_option(),
) -> None:
    """Prune a recorded session as the extension would have, turn by turn.

    The session's branch (the current one, or --leaf's) is replayed through the pruner and
    written with the pruner's entries; other branches are not carried over. A progress bar
    is drawn on a terminal (not with --quiet, --json, or when the output is piped).
    """
    path = resolve_file(session_path, example)
    target, backup = _targets(path, out_file, in_place, example)
    if in_place:
        blocker = backup_blocker(path, backup, force)
        if blocker is not None:
            fail(blocker)
    elif not force and target.exists():
        fail(f"{target} exists (use --force to overwrite it)")
    try:
        before = fingerprint(path) if in_place else None
    except OSError as exc:
        fail(f"{path}: cannot read session file: {exc.strerror or exc}")
    source, config, summarizer, session_model = _inputs(
        path, leaf, config_file, compat, summarizer_name, base_url, "default"
    )
    options = ReplayOptions(
        session_dir=str(target.parent.resolve()),
        leaf=leaf,
        deterministic=False,
        record_contexts=False,
    )
    progress = not as_json and show_progress(quiet)
    result = _run(source, config, (summarizer, session_model), options, progress, "condensing")
    text = result.session_text()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if before is not None:
            replace_in_place(path, text.encode("utf-8"), backup, before)
        else:
            write_new(target, text.encode("utf-8"))
    except InPlaceError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{target}: cannot write: {exc}")
    raw_chars = jsjson.length(source.build_context(leaf).messages)
    _, condensed_chars = _cold_chars(result.session, config)
    report = condense_report(result, raw_chars, condensed_chars)
    report["output"] = str(target)
    if in_place:
        report["backup"] = str(backup)
    if as_json:
        sys.stdout.write(jsjson.dumps(report, 2) + "\n")
    else:
        _print_report(report, target)
        _print_problems(result)
    exit_for_warnings(source, strict, failed=bool(result.handler_errors))


def replay_command(
    raw: Path = typer.Argument(..., metavar="RAW", help="Raw Pi session (.jsonl or .jsonl.gz)."),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Output and session directory."),
    config_file: Optional[Path] = config_option(),
    summarizer_name: Optional[str] = summarizer_option("conformance"),
    base_url: Optional[str] = base_url_option(),
    deterministic: bool = typer.Option(
        False,
        "--deterministic",
        help="Number entry ids 00000001, 00000002, ... (as the vectors). Any summarizer may be "
        "used; the summaries are reproducible only with the offline ones (conformance, "
        "default), an API model's are whatever it answers.",
    ),
    restart_each_prompt: bool = typer.Option(
        False, "--restart-each-prompt", help="Start a fresh condenser before every prompt."
    ),
    compat: Optional[str] = compat_option(),
    leaf: Optional[str] = leaf_option("Replay this entry's branch."),
    quiet: bool = quiet_option(),
    strict: bool = strict_option(),
) -> None:
    """Replay a raw session and write the conformance vectors' files into --out."""
    source, config, summarizer, session_model = _inputs(
        raw, leaf, config_file, compat, summarizer_name, base_url, "conformance"
    )
    root = out_dir.resolve()
    options = ReplayOptions(
        session_dir=str(root),
        leaf=leaf,
        restart_each_prompt=restart_each_prompt,
        deterministic=deterministic,
    )
    result = _run(
        source, config, (summarizer, session_model), options, show_progress(quiet), "replaying"
    )
    try:
        result.write(root)
    except OSError as exc:
        fail(f"{root}: cannot write: {exc}")
    counts = result.meta()["counts"]
    err.print(
        f"replayed {counts['llmCalls']} LLM calls, {counts['summarizerCalls']} summarizer "
        f"calls, {counts['entries']} entries -> {root}",
        markup=False,
    )
    _print_problems(result)
    exit_for_warnings(source, strict, failed=bool(result.handler_errors))


def register(app: typer.Typer) -> None:
    """Add `condense` and `replay` to the `pi-condense` app."""
    app.command("condense")(condense)
    app.command("replay")(replay_command)
