"""Shared pieces of the `pi-condense` commands: consoles, exit codes, options, inputs.

Every command reads its session, config and summarizer through these helpers, so a bad input
fails the same way everywhere: one line on stderr naming the file or option, exit code 2.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Optional, TypeVar, Union, cast

from .._fs.atomic import read_input, read_regular
from ..config import Config, load_config
from ..errors import CondenseError, warn_once
from ..js import json as jsjson
from ..session import SessionFile
from ..summarize.base import Summarizer
from ..summarize.factory import OPENAI_COMPATIBLE_SERVERS, make_summarizer
from ..summarize.resolve import resolve_summarizers

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "EXAMPLE_SESSION",
    "EXIT_HANDLER_ERRORS",
    "EXIT_OK",
    "EXIT_UNREADABLE",
    "EXIT_WARNINGS",
    "SUMMARIZER_FORMS",
    "base_url_option",
    "check_compat",
    "check_leaf",
    "compat_option",
    "config_block",
    "config_option",
    "err",
    "err_console",
    "example_option",
    "exit_code",
    "exit_for_warnings",
    "fail",
    "fail_at",
    "json_option",
    "leaf_option",
    "load_cli_config",
    "make_cli_summarizer",
    "make_cli_summarizers",
    "open_at_leaf",
    "open_session",
    "out",
    "plural",
    "print_warnings",
    "quiet_option",
    "read_session",
    "resolve_file",
    "run_with_summarizer",
    "show_progress",
    "shown_warnings",
    "strict_option",
    "summarizer_option",
]

EXIT_OK = 0
"""The command did its job."""
EXIT_WARNINGS = 1
"""``--strict`` was given and the session file had lines that were skipped on load."""
EXIT_UNREADABLE = 2
"""Nothing was done: an input cannot be read, an argument is wrong, or an output cannot be
written (typer's own usage errors exit 2 too)."""
EXIT_HANDLER_ERRORS = 3
"""A condenser event (or a compaction) failed; whatever the command writes was still written."""

EXAMPLE_SESSION = Path(__file__).parent.parent / "examples" / "example-session.jsonl"
"""The bundled example session (a real Pi session of 1018 entries)."""

SUMMARIZER_FORMS = (
    '"default" (embedded, offline), "conformance" (the test vectors\' fake model, offline), '
    '"openai:MODEL", "anthropic:MODEL", or '
    + ", ".join(f'"{name}:MODEL"' for name in OPENAI_COMPATIBLE_SERVERS)
    + " (OpenAI-compatible servers)"
)
"""The `--summarizer` values every command accepts, for help texts."""

shown_warnings: set[str] = set()
"""The CondenseWarnings this process printed (cli.main's hook): a notification with the same
text is not printed again."""


class _LazyConsole:
    """A rich ``Console`` made on first use: a command that prints nothing through it (a
    ``--json`` run, a quiet one) does not import rich."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Optional[Console] = None

    def get(self) -> Console:
        """The console itself (made now if need be)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)


out = cast("Console", _LazyConsole(highlight=False, soft_wrap=True))
err = cast("Console", _LazyConsole(stderr=True, highlight=False, soft_wrap=True))


def err_console() -> Console:
    """The rich console of stderr itself (for a progress display that takes one)."""
    return cast(_LazyConsole, err).get()


T = TypeVar("T")


def plural(n: int, word: str) -> str:
    """``1 tool``, ``2 tools``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def fail(message: str) -> NoReturn:
    """Print ``pi-condense: message`` on stderr and exit 2."""
    err.print(f"pi-condense: {message}", markup=False)
    raise SystemExit(EXIT_UNREADABLE)


def fail_at(path: Union[str, os.PathLike[str]], action: str, exc: BaseException) -> NoReturn:
    """Exit 2 with ``path: action: reason``, naming the path once: an OS error gives its
    reason alone (no ``[Errno N]``), and a message that already names the path is kept."""
    name = os.fspath(path)
    if isinstance(exc, OSError) and exc.strerror:
        reason = exc.strerror
    else:
        reason = str(exc)
        if name in reason or os.path.abspath(name) in reason:
            fail(reason)
    fail(f"{name}: {action}: {reason}" if action else f"{name}: {reason}")


# ---------------------------------------------------------------------------------- options


def _option(*args: Any, **kwargs: Any) -> Any:
    """``typer.Option(...)`` (typer imported when a command's signature is built)."""
    import typer

    return typer.Option(*args, **kwargs)


def leaf_option(help: str = "Entry id to use as the leaf.") -> Any:
    """``--leaf ID``."""
    return _option(None, "--leaf", help=help)


def json_option(help: str = "Print the report as JSON.") -> Any:
    """``--json``."""
    return _option(False, "--json", help=help)


def strict_option() -> Any:
    """``--strict``: exit 1 when the session file had lines skipped on load."""
    return _option(False, "--strict", help="Exit 1 when the session file had bad lines.")


def example_option(help: str = "Use the bundled example session.") -> Any:
    """``--example``: the bundled example session instead of a file."""
    return _option(False, "--example", help=help)


def quiet_option() -> Any:
    """``--quiet`` / ``-q``: no progress bar."""
    return _option(False, "--quiet", "-q", help="No progress bar.")


def config_option() -> Any:
    """``--config FILE``: a ``contextPrune`` block or a settings.json holding one."""
    return _option(
        None,
        "--config",
        help="contextPrune settings: the block, or a settings.json holding one "
        "(default: Pi's settings file).",
    )


def compat_option() -> Any:
    """``--compat MODE``."""
    return _option(
        None,
        "--compat",
        help='Config normalization: "default" or "reference" (exactly the TypeScript rules).',
    )


def summarizer_option(offline: str, extra: str = "") -> Any:
    """``--summarizer SPEC`` (None when absent: see :func:`make_cli_summarizers`, whose
    session model is the ``offline`` summarizer); ``extra`` is appended to the help."""
    return _option(
        None,
        "--summarizer",
        help=f"Summarizer: {SUMMARIZER_FORMS}. Default: the config's summarizerModel "
        '("provider/model-id" as in Pi, e.g. "openai/gpt-4o-mini"; --base-url applies to it) '
        f'with "{offline}" as its outage fallback, or "{offline}" alone when summarizerModel is '
        f'"default" or names no usable model (with a warning).{extra}',
    )


def base_url_option() -> Any:
    """``--base-url URL``: the API server of an API summarizer."""
    return _option(
        None,
        "--base-url",
        help="Summarizer API base URL (e.g. http://127.0.0.1:8000/v1 for a local "
        "OpenAI-compatible server); only with an API summarizer (--summarizer, or else the "
        "config's summarizerModel).",
    )


# ----------------------------------------------------------------------------------- inputs


def resolve_file(file: Optional[Path], example: bool) -> Path:
    """The session file to read: FILE, or the bundled example with ``--example``."""
    if example and file is not None:
        fail("give a session file or --example, not both")
    if example:
        return EXAMPLE_SESSION
    if file is None:
        fail("no session file given (pass FILE or --example)")
    return file


DEEP_LINES: list[str] = []
"""``path:line: reason`` of every loaded session line nested deeper than ``jsjson.MAX_DEPTH``
(named by :func:`pi_condense.cli.main` if serializing one fails)."""


def note_loaded(session: SessionFile, path: Union[str, os.PathLike[str]]) -> SessionFile:
    """Remember ``session``'s too-deep lines (see :data:`DEEP_LINES`); returns it."""
    for warning in session.warnings:
        if warning.kind == "deep":
            DEEP_LINES.append(f"{os.fspath(path)}:{warning.line}: {warning.reason}")
    return session


def open_session(path: Path) -> SessionFile:
    """Load a session file (read-only), or exit 2 naming it. A ``.jsonl.gz`` file is read
    into memory (its directory stays the session directory, for spill files)."""
    try:
        if path.name.endswith(".gz"):
            data = read_input(path)
            return note_loaded(
                SessionFile.parse(data, name=str(path), session_dir=str(path.parent.resolve())),
                path,
            )
        return note_loaded(SessionFile.load(path), path)
    except (CondenseError, OSError, EOFError, gzip.BadGzipFile) as exc:
        fail_at(path, "cannot read session file", exc)


def open_at_leaf(path: Path, leaf: Optional[str]) -> SessionFile:
    """:func:`open_session`, then :func:`check_leaf`."""
    session = open_session(path)
    check_leaf(session, path, leaf)
    return session


def read_session(path: Path, share_strings: bool = False) -> SessionFile:
    """An in-memory copy of a session file (``.jsonl`` or ``.jsonl.gz``), or exit 2;
    ``share_strings``: see :meth:`SessionFile.parse`."""
    try:
        data = read_input(path)
        session = SessionFile.parse(data, name=str(path), share_strings=share_strings)
        return note_loaded(session, path)
    except (OSError, EOFError, gzip.BadGzipFile, CondenseError) as exc:
        fail_at(path, "cannot read session file", exc)


def check_leaf(session: SessionFile, path: Path, leaf: Optional[str]) -> None:
    """Exit 2 when ``leaf`` is given and names no entry of the session."""
    if leaf is not None and session.get_entry(leaf) is None:
        fail(f"{path}: no entry with id {leaf!r}")


def print_warnings(session: SessionFile, path: Path) -> None:
    """One stderr line per line of the file skipped on load."""
    for warning in session.warnings:
        err.print(f"{path}:{warning.line}: warning: {warning.reason}", markup=False)


def exit_code(session: SessionFile, strict: bool, failed: bool = False) -> int:
    """3 when a condenser event failed, else 1 for load warnings with ``--strict``, else 0."""
    if failed:
        return EXIT_HANDLER_ERRORS
    return EXIT_WARNINGS if strict and session.warnings else EXIT_OK


def exit_for_warnings(session: SessionFile, strict: bool, failed: bool = False) -> None:
    """Exit with :func:`exit_code` unless it is 0."""
    code = exit_code(session, strict, failed)
    if code != EXIT_OK:
        raise SystemExit(code)


# ----------------------------------------------------------------------- config, summarizer


def check_compat(compat: Optional[str]) -> None:
    """Exit 2 unless ``--compat`` is absent, ``default`` or ``reference``."""
    if compat is not None and compat not in ("default", "reference"):
        fail(f"--compat must be default or reference, not {compat!r}")


def config_block(path: Path) -> dict[str, Any]:
    """The ``contextPrune`` block of a settings file, or the file itself if it is the block."""
    try:
        value = jsjson.loads(read_regular(path))
    except (OSError, CondenseError) as exc:
        fail_at(path, "cannot read config", exc)
    if isinstance(value, dict) and isinstance(value.get("contextPrune"), dict):
        value = value["contextPrune"]
    if not isinstance(value, dict):
        fail(f"{path}: the config must be a JSON object (a contextPrune block or settings.json)")
    return value


def load_cli_config(path: Optional[Path], compat: Optional[str], *, enable: bool = False) -> Config:
    """The config of ``--config FILE`` (default: Pi's settings file) in ``--compat`` mode.

    With ``enable``, pruning is on unless the given block says ``enabled: false`` (the
    settings file's own ``enabled`` is overridden). Normalization warnings go to stderr.
    """
    check_compat(compat)
    mode: Any = compat
    try:
        if path is None:
            config = load_config(compat=mode)
            if enable and not config.enabled:
                config = config.with_value("enabled", True)
        else:
            block = dict(config_block(path))
            if enable:
                block.setdefault("enabled", True)
            config = Config.from_settings_dict(block, compat=mode)
    except CondenseError as exc:
        fail(f"{path}: {exc}" if path is not None else str(exc))
    for warning in config.warnings:
        # Once per process: the Condenser the command makes issues the same ones.
        warn_once(f"pi-condense: warning: {warning}")
    return config


def make_cli_summarizer(spec: str, base_url: Optional[str], config: Config) -> Summarizer:
    """The summarizer of ``--summarizer SPEC`` and ``--base-url``, or exit 2 saying why."""
    try:
        return make_summarizer(spec, base_url=base_url, config=config)
    except (CondenseError, ValueError, ImportError) as exc:
        fail(f"summarizer {spec!r}: {exc}")


def make_cli_summarizers(
    spec: Optional[str], base_url: Optional[str], config: Config, offline: str
) -> tuple[Summarizer, Optional[Summarizer]]:
    """(summarizer, session model) of a command, or exit 2 saying why.

    With ``--summarizer SPEC``: that summarizer, and None (it is its own session model, as with
    ``summarizerModel: "default"``). Without: the config's ``summarizerModel`` is resolved with
    the ``offline`` summarizer as the session model (``--base-url`` applies to the configured
    model; the reference's warnings go to stderr): the configured model and the ``offline``
    one as its outage fallback, else the ``offline`` one and None. ``--base-url`` with no API
    model to apply to exits 2.
    """
    if spec is not None:
        return make_cli_summarizer(spec, base_url, config), None
    session_model = make_cli_summarizer(offline, None, config)

    def warn(level: str, text: str) -> None:
        err.print(f"pi-condense: {level}: {text}", markup=False)

    primary, _ = resolve_summarizers(
        config, session_model=session_model, base_url=base_url, notify=warn
    )
    if primary is None or primary is session_model:
        if base_url is not None:
            fail(
                "--base-url needs an API summarizer: give --summarizer, or set summarizerModel "
                f'to a usable "provider/model-id" (it is "{config.summarizer_model}")'
            )
        return session_model, None
    return primary, session_model


def run_with_summarizer(summarizer: Optional[Summarizer], work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work()`` in a new event loop, then close the summarizer's API client (if any)."""

    async def main() -> T:
        try:
            return await work()
        finally:
            close = getattr(summarizer, "aclose", None)
            if close is not None:
                await close()

    return asyncio.run(main())


def show_progress(quiet: bool) -> bool:
    """Whether a progress bar is drawn: not ``--quiet``, and both stdout and stderr are
    terminals (the bar goes to stderr; piped or captured output stays free of it)."""
    return not quiet and sys.stdout.isatty() and err.is_terminal
