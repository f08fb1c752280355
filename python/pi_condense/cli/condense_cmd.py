"""`pi-condense condense` and `pi-condense replay`: run a recorded Pi session through the pruner.

Both replay the session's branch through a :class:`~pi_condense.condenser.Condenser` with the
event model of :mod:`pi_condense.replay`. ``condense`` writes the condensed session (a new file
beside the input, or the input itself with a backup) and reports what was reclaimed;
``replay`` writes the conformance vectors' files (``session.jsonl``, ``contexts.jsonl``,
``summarizer.jsonl``) into a directory that is also the new session's directory.
"""

from __future__ import annotations

import gzip
import os
import secrets
import shutil
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .. import jsjson
from ..config import Config, load_config
from ..errors import CondenseError
from ..render import render
from ..replay import ReplayOptions, ReplayResult, replay
from ..session import SessionFile
from ..state import PrunerState
from ..summarize.base import Summarizer
from ._common import err, fail, out

__all__ = ["EXIT_HANDLER_ERRORS", "condense_report", "register"]

EXIT_HANDLER_ERRORS = 3
"""Exit code when a condenser event failed during the replay (the output is still written)."""

_COMPAT_HELP = 'Config normalization: "default" or "reference" (exactly the TypeScript rules).'
_SUMMARIZER_HELP = (
    'Summarizer: "default" (embedded, offline), "conformance" (the test vectors\' fake model), '
    '"openai:MODEL" or "anthropic:MODEL".'
)


# ---------------------------------------------------------------------------------- inputs


def _read_source(path: Path) -> SessionFile:
    try:
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            data = gzip.decompress(data)
        return SessionFile.parse(data, name=str(path))
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        fail(f"{path}: cannot read session file: {exc}")
    except CondenseError as exc:
        fail(str(exc))


def _config_block(path: Path) -> dict[str, Any]:
    """The ``contextPrune`` block of a settings file, or the file itself if it is the block."""
    try:
        value = jsjson.loads(path.read_bytes())
    except (OSError, CondenseError) as exc:
        fail(f"{path}: cannot read config: {exc}")
    if isinstance(value, dict) and isinstance(value.get("contextPrune"), dict):
        value = value["contextPrune"]
    if not isinstance(value, dict):
        fail(f"{path}: the config must be a JSON object (a contextPrune block or settings.json)")
    return value


def _load_config(path: Optional[Path], compat: Optional[str]) -> Config:
    """The replay's config: pruning enabled unless the block says otherwise."""
    mode: Any = compat
    try:
        if path is None:
            config = load_config(compat=mode)
            return config if config.enabled else config.with_value("enabled", True)
        block = dict(_config_block(path))
        block.setdefault("enabled", True)
        return Config.from_settings_dict(block, compat=mode)
    except CondenseError as exc:
        fail(str(exc))


def _summarizer(name: str, base_url: Optional[str], config: Config) -> Summarizer:
    from ..summarize.factory import make_summarizer

    try:
        return make_summarizer(name, base_url=base_url, config=config)
    except (CondenseError, ValueError, ImportError) as exc:
        fail(f"summarizer {name!r}: {exc}")


def _check_compat(compat: Optional[str]) -> None:
    if compat is not None and compat not in ("default", "reference"):
        fail(f"--compat must be default or reference, not {compat!r}")


# --------------------------------------------------------------------------------- running


def _run(
    source: SessionFile,
    config: Config,
    summarizer: Summarizer,
    options: ReplayOptions,
    show_progress: bool,
    label: str,
) -> ReplayResult:
    if not show_progress:
        return replay(source, config, summarizer, options)
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

        return replay(source, config, summarizer, options, on_progress=advance)


def _stamp(path: Path) -> tuple[int, int]:
    try:
        info = path.stat()
    except OSError:
        return (-1, -1)
    return (info.st_size, info.st_mtime_ns)


def _write_atomic(target: Path, text: str) -> None:
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    try:
        with open(tmp, "xb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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
    for warning in report["warnings"]:
        err.print(f"pi-condense: warning: {warning}", markup=False)
    for error in report["handlerErrors"]:
        err.print(f"pi-condense: {error['event']} failed: {error['error']}", markup=False)


# -------------------------------------------------------------------------------- commands


def _targets(session_path: Path, out_file: Optional[Path], in_place: bool) -> tuple[Path, Path]:
    """(output file, backup file or the output) after checking they can be written."""
    if in_place and out_file is not None:
        fail("--out and --in-place are exclusive")
    if in_place:
        if session_path.name.endswith(".gz"):
            fail("--in-place needs a plain .jsonl session (not .gz)")
        return session_path, session_path.with_name(session_path.name + ".bak")
    if out_file is None:
        name = session_path.name
        for suffix in (".gz", ".jsonl"):
            name = name[: -len(suffix)] if name.endswith(suffix) else name
        out_file = session_path.with_name(f"{name}.condensed.jsonl")
    return out_file, out_file


def condense(
    session_path: Path = typer.Argument(..., metavar="SESSION", help="Raw Pi session (.jsonl)."),
    out_file: Optional[Path] = typer.Option(
        None, "--out", "-o", help="Output file (default: <name>.condensed.jsonl beside SESSION)."
    ),
    in_place: bool = typer.Option(
        False, "--in-place", help="Replace SESSION (a copy is kept as SESSION.bak)."
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing output or backup."),
    config_file: Optional[Path] = typer.Option(
        None, "--config", help="contextPrune settings (the block, or a settings.json)."
    ),
    summarizer_name: str = typer.Option("default", "--summarizer", help=_SUMMARIZER_HELP),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Summarizer API base URL."),
    compat: Optional[str] = typer.Option(None, "--compat", help=_COMPAT_HELP),
    leaf: Optional[str] = typer.Option(None, "--leaf", help="Condense this entry's branch."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Prune a recorded session as the extension would have, turn by turn.

    The session's branch (the current one, or --leaf's) is replayed through the pruner and
    written with the pruner's entries; other branches are not carried over.
    """
    _check_compat(compat)
    target, backup = _targets(session_path, out_file, in_place)
    if not force and (backup if in_place else target).exists():
        fail(f"{backup if in_place else target} exists (use --force to overwrite it)")
    stamp = _stamp(session_path)
    source = _read_source(session_path)
    if leaf is not None and source.get_entry(leaf) is None:
        fail(f"{session_path}: no entry with id {leaf!r}")
    config = _load_config(config_file, compat)
    summarizer = _summarizer(summarizer_name, base_url, config)
    options = ReplayOptions(
        session_dir=str(target.parent.resolve()),
        leaf=leaf,
        deterministic=False,
        record_contexts=False,
    )
    result = _run(source, config, summarizer, options, not as_json, "condensing")
    text = result.session_text()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if in_place:
            if _stamp(session_path) != stamp:
                fail(
                    f"{session_path} changed while it was being condensed (is Pi still "
                    "writing it?); nothing was replaced"
                )
            shutil.copy2(session_path, backup)
        _write_atomic(target, text)
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
    if result.handler_errors:
        raise typer.Exit(EXIT_HANDLER_ERRORS)


def replay_command(
    raw: Path = typer.Argument(..., metavar="RAW", help="Raw Pi session (.jsonl or .jsonl.gz)."),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Output and session directory."),
    config_file: Optional[Path] = typer.Option(
        None, "--config", help="contextPrune settings (the block, or a settings.json)."
    ),
    summarizer_name: str = typer.Option("conformance", "--summarizer", help=_SUMMARIZER_HELP),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Summarizer API base URL."),
    deterministic: bool = typer.Option(
        False, "--deterministic", help="Number entry ids 00000001, 00000002, ... (as the vectors)."
    ),
    restart_each_prompt: bool = typer.Option(
        False, "--restart-each-prompt", help="Start a fresh condenser before every prompt."
    ),
    compat: Optional[str] = typer.Option(None, "--compat", help=_COMPAT_HELP),
    leaf: Optional[str] = typer.Option(None, "--leaf", help="Replay this entry's branch."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Replay a raw session and write the conformance vectors' files into --out."""
    _check_compat(compat)
    source = _read_source(raw)
    if leaf is not None and source.get_entry(leaf) is None:
        fail(f"{raw}: no entry with id {leaf!r}")
    config = _load_config(config_file, compat)
    summarizer = _summarizer(summarizer_name, base_url, config)
    root = out_dir.resolve()
    options = ReplayOptions(
        session_dir=str(root),
        leaf=leaf,
        restart_each_prompt=restart_each_prompt,
        deterministic=deterministic,
    )
    result = _run(source, config, summarizer, options, not quiet, "replaying")
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
    for error_event, message in result.handler_errors:
        err.print(f"pi-condense: {error_event} failed: {message}", markup=False)
    if result.handler_errors:
        raise typer.Exit(EXIT_HANDLER_ERRORS)


def register(app: typer.Typer) -> None:
    """Add `condense` and `replay` to the `pi-condense` app."""
    app.command("condense")(condense)
    app.command("replay")(replay_command)
