"""`pi-condense condense` and `pi-condense replay`: run a recorded Pi session through the pruner.

Both replay the session's branch through a :class:`~pi_condense.condenser.Condenser` with the
event model of :mod:`pi_condense.replay`. ``condense`` writes the condensed session (a new file
beside the input, or the input itself with a backup; for ``--example``, a new file in the
current directory) and reports what was reclaimed;
``replay`` writes the conformance vectors' files (``session.jsonl``, ``contexts.jsonl``,
``summarizer.jsonl``) into a directory that is also the new session's directory.

This module holds the commands' typer signatures; what they run is in :mod:`._condense`
(``pi-condense condense`` with plain arguments runs it without typer: :mod:`._main`).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Optional

import typer

from ..errors import SessionError
from ..replay import ReplayOptions
from ..report.condense import condense_report, problems
from ._common import (
    base_url_option,
    compat_option,
    config_option,
    err,
    example_option,
    exit_code,
    fail,
    fail_at,
    json_option,
    leaf_option,
    quiet_option,
    show_progress,
    strict_option,
    summarizer_option,
)
from ._condense import (
    REPLAY_FILES,
    example_folder,
    exit_with,
    fail_written,
    inputs,
    print_problems,
    release,
    run,
    run_condense,
    write_through_file,
)

__all__ = ["condense_report", "example_folder", "problems", "register"]


def condense(
    session_path: Optional[Path] = typer.Argument(
        None, metavar="SESSION", help="Raw Pi session (.jsonl or .jsonl.gz)."
    ),
    example: bool = example_option(
        "Condense the bundled example session into ./example-session.condensed.jsonl; a rerun "
        "replaces it."
    ),
    out_file: Optional[Path] = typer.Option(
        None, "--out", "-o", help="Output file (default: <name>.condensed.jsonl beside SESSION)."
    ),
    in_place: bool = typer.Option(
        False,
        "--in-place",
        help="Replace SESSION (the original is kept as SESSION.bak, which is never "
        "overwritten: a session already condensed in place is skipped).",
    ),
    force: bool = typer.Option(
        False, "--force", help="Overwrite an existing output file (never a backup)."
    ),
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
    run_condense(
        session_path,
        example,
        out_file,
        in_place,
        force,
        config_file,
        summarizer_name,
        base_url,
        compat,
        leaf,
        as_json,
        quiet,
        strict,
    )


def replay_command(
    raw: Path = typer.Argument(..., metavar="RAW", help="Raw Pi session (.jsonl or .jsonl.gz)."),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Output and session directory."),
    recorded_session_dir: Optional[str] = typer.Option(
        None,
        "--recorded-session-dir",
        help="The session directory the new session names (spill paths, stubs), when it is "
        "not --out; the spill files still go under --out.",
    ),
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
    force: bool = typer.Option(
        False, "--force", help="Write into --out even when it is not empty (files replaced)."
    ),
    quiet: bool = quiet_option(),
    strict: bool = strict_option(),
) -> None:
    """Replay a raw session and write the conformance vectors' files into --out.

    --out must be empty or new, unless --force is given.
    """
    if out_dir.is_symlink():
        # The session's spill paths name the directory given: one reached through a link
        # would be written somewhere the user did not name (and may not own).
        fail(f"{out_dir}: a symbolic link; give the directory itself ({os.path.realpath(out_dir)})")
    if not force and out_dir.is_dir() and any(out_dir.iterdir()):
        fail(f"{out_dir}: directory is not empty (use --force to write into it)")
    if out_dir.exists() and not out_dir.is_dir():
        fail(f"{out_dir}: not a directory")
    for name in REPLAY_FILES:
        if os.path.lexists(out_dir / name) and not stat.S_ISREG(os.lstat(out_dir / name).st_mode):
            fail(f"{out_dir / name}: not a regular file; only a regular file is replaced")
    source, config, summarizer, session_model = inputs(
        raw, leaf, config_file, compat, summarizer_name, base_url, "conformance"
    )
    root = out_dir.resolve()
    if recorded_session_dir is not None and not os.path.isabs(recorded_session_dir):
        fail(f"--recorded-session-dir {recorded_session_dir}: not an absolute path")
    load_code = exit_code(source, strict)
    with contextlib.ExitStack() as stack:
        # The new session is written to a file as it grows (its pruner entries are not held),
        # unless a condenser started at every prompt reads them all back each time.
        spool = None if restart_each_prompt else stack.enter_context(write_through_file(root))
        options = ReplayOptions(
            session_dir=str(root),
            recorded_session_dir=recorded_session_dir,
            leaf=leaf,
            restart_each_prompt=restart_each_prompt,
            deterministic=deterministic,
            write_through=spool,
        )
        sources = [source]
        del source  # the replay takes it (see `run`)
        progress = show_progress(quiet)
        try:
            result = run(
                sources, config, (summarizer, session_model), options, progress, "replaying"
            )
        except SessionError as exc:  # the new session could not be written through (a full disk)
            fail_written(root / "session.jsonl", exc)
        release(result)
        try:
            result.write(root)
        except SessionError as exc:
            fail_written(root / "session.jsonl", exc)
        except OSError as exc:
            fail_at(root, "cannot write", exc)
        counts = result.meta()["counts"]
    err.print(
        f"replayed {counts['llmCalls']} LLM calls, {counts['summarizerCalls']} summarizer "
        f"calls, {counts['entries']} entries -> {root}",
        markup=False,
    )
    print_problems(result)
    exit_with(result, load_code)


def register(app: typer.Typer) -> None:
    """Add `condense` and `replay` to the `pi-condense` app."""
    app.command("condense")(condense)
    app.command("replay")(replay_command)
