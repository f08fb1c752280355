"""What a new user meets in their first hour (issue 40): a test run without a browser, the
figures the CLI prints adding up, help texts that say what the options do."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from pi_condense.cli._common import EXAMPLE_SESSION, plural
from pi_condense.session import SessionFile

CLI = [sys.executable, "-c", "from pi_condense.cli import main; main()"]
TESTS = Path(__file__).resolve().parents[1]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PI_CODING_AGENT_DIR": str(cwd / "agent"), "COLUMNS": "200"}
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, cwd=cwd, env=environ, timeout=300
    )


@pytest.fixture(scope="module")
def condensed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example's first 801 entries, condensed (several chains left to compact)."""
    root = tmp_path_factory.mktemp("condensed")
    leaf = SessionFile.load(EXAMPLE_SESSION).branch()[800]["id"]
    target = root / "condensed.jsonl"
    proc = run("condense", str(EXAMPLE_SESSION), "--leaf", leaf, "-o", str(target), "-q", cwd=root)
    assert proc.returncode == 0, proc.stderr
    return target


def test_compact_rows_add_up_to_the_total_it_prints(condensed: Path, tmp_path: Path) -> None:
    proc = run("compact", str(condensed), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    total = re.search(r"reclaiming ~(\d+) tokens$", proc.stdout, re.M)
    assert total, proc.stdout
    shown = [int(m.replace(",", "")) for m in re.findall(r"│\s+([\d,]+) │$", proc.stdout, re.M)]
    assert len(shown) >= 2, proc.stdout
    assert sum(shown) == int(total.group(1))
    report = json.loads(run("compact", str(condensed), "--json", cwd=tmp_path).stdout)
    assert [row["reclaimTokens"] for row in report["entries"]] == shown
    assert report["reclaimedTokens"] == int(total.group(1))


def test_counts_are_spelled_in_the_singular_for_one() -> None:
    assert plural(1, "flush point") == "1 flush point"
    assert plural(24, "flush point") == "24 flush points"
    assert plural(1_018, "entry point") == "1,018 entry points"


def test_the_report_line_uses_the_counts(condensed: Path, tmp_path: Path) -> None:
    proc = run("report", str(condensed), "-o", str(tmp_path / "r.html"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip().splitlines()[-1]
    assert re.fullmatch(
        r"report -> \S+ \(\d+ model calls?, \d+ flush points?, \d+ chain points?\)", line
    ), line
    assert not re.search(r"\b1 \w+ points\b", line)


def _shown_rows(text: str) -> dict[str, str]:
    """``{label: value}`` of the table `condense` prints."""
    return {
        m.group(1).strip(): m.group(2).strip()
        for m in re.finditer(r"^│ (.+?) │ (.+?) │$", text, re.M)
    }


def test_the_report_headline_is_what_condense_printed(tmp_path: Path) -> None:
    """The example condensed as the quickstart does, then reported: the report's headline
    figures of that session are the ones `condense` printed for the run (issue 40 saw
    139,468 / 199,795 against 141,015 / 211,045: the report rendered calls with entries
    that a flush wrote while the model answered)."""
    proc = run("condense", "--example", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    printed = _shown_rows(proc.stdout)
    target = tmp_path / "example-session.condensed.jsonl"
    assert target.is_file(), proc.stdout
    page = tmp_path / "report.html"
    proc = run("report", str(target), "-o", str(page), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    shown = re.findall(r"<div><b>([^<]+)</b><br>([^<]*)</div>", page.read_text("utf-8"))
    facts = {label: html.unescape(value) for label, value in shown}
    for label in ("chars per call (avg)", "chars at the last call", "batches summarized"):
        assert facts[label] == printed[label], label
    assert facts["model calls"] == printed["LLM calls replayed"]
    assert re.fullmatch(r"[\d,]+ -> [\d,]+ \(\d+\.\d% smaller\)", facts["chars per call (avg)"])


def test_recover_help_says_the_scope_defaults_to_the_current_branch(tmp_path: Path) -> None:
    for args in (["recover", "--help"], ["--help"]):
        text = " ".join(run(*args, cwd=tmp_path).stdout.split())
        text = text.replace("│ ", "").replace(" │", "")
        assert "raw entries, every branch" not in text
    text = " ".join(run("recover", "--help", cwd=tmp_path).stdout.split())
    assert "the current branch, or every branch with --scope all" in text


# ------------------------------------------------------------- the tests without a browser


def pytest_report(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The report module's browser tests in a child pytest, with no chromium on PATH."""
    bare = tmp_path / "bin"
    bare.mkdir()
    python = Path(sys.executable)
    environ = {k: v for k, v in os.environ.items() if k != "PI_CONDENSE_REQUIRE_BROWSER"}
    environ.update(env, PATH=f"{bare}:{python.parent}")
    assert shutil.which("chromium", path=environ["PATH"]) is None
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "probe_sees_console_errors or screenshot",
            f"--rootdir={TESTS.parent}",
            str(TESTS / "report/test_report.py"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environ,
        timeout=300,
    )


def test_without_a_browser_the_report_tests_say_what_they_did_not_check(
    tmp_path: Path,
) -> None:
    proc = pytest_report(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "2 skipped" in proc.stdout
    assert "NOT CHECKED: no chromium on PATH" in proc.stdout
    assert "apt-get install -y chromium" in proc.stdout
    assert "not run: " in proc.stdout


def test_ci_makes_a_missing_browser_an_error(tmp_path: Path) -> None:
    proc = pytest_report(tmp_path, PI_CONDENSE_REQUIRE_BROWSER="1")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "2 errors" in proc.stdout or "2 failed" in proc.stdout, proc.stdout[-3000:]
    assert "PI_CONDENSE_REQUIRE_BROWSER is set but there is no chromium on PATH" in proc.stdout


# ------------------------------------------------------------------ config warnings


def condense_with(settings: str, tmp_path: Path) -> list[str]:
    """stderr of a condense of the example's first 101 entries with ``settings``."""
    config = tmp_path / "settings.json"
    config.write_text(settings)
    leaf = SessionFile.load(EXAMPLE_SESSION).branch()[100]["id"]
    out = tmp_path / "out.jsonl"
    proc = run(
        "condense", str(EXAMPLE_SESSION), "--leaf", leaf, "--config", str(config), "-o", str(out),
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stderr.splitlines()


def test_a_disabled_config_in_the_cli_is_one_line_without_python_source(tmp_path: Path) -> None:
    assert condense_with('{"contextPrune": {"enabled": false}}', tmp_path) == [
        "pi-condense: pruning is disabled (contextPrune.enabled is false), so this Condenser "
        "changes nothing; pass a config with enabled: true"
    ]


def test_an_unknown_key_warns_once_in_the_cli(tmp_path: Path) -> None:
    settings = '{"contextPrune": {"enabled": true, "protectedTool": ["read"]}}'
    assert condense_with(settings, tmp_path) == [
        "pi-condense: warning: contextPrune.protectedTool: unknown setting, ignored (kept in "
        "the file); did you mean protectedTools?"
    ]


def test_an_unknown_key_warns_once_in_the_api_and_the_hooks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pi_condense import Condenser, CondenseWarning, Config, errors
    from pi_condense.adapters.pi_messages import PiCodec
    from pi_condense.integrations.openai_chat import ChatCondenser
    from pi_condense.live import LiveDriver

    monkeypatch.setattr(errors, "_WARNED", set(), raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ChatCondenser(session=":memory:", config={"protectedTool": ["read"]})
        LiveDriver(PiCodec(), session=":memory:", config={"protectedTool": ["read"]})
        Condenser(SessionFile.in_memory(), Config.from_settings_dict({"protectedTool": ["x"]}))
    texts = [str(w.message) for w in caught if issubclass(w.category, CondenseWarning)]
    assert len(texts) == 1, texts
    assert "contextPrune.protectedTool: unknown setting" in texts[0]
    assert "did you mean protectedTools?" in texts[0]


def _here() -> tuple[str, int]:
    """(file, line) of the caller's next line."""
    caller = sys._getframe(1)
    return caller.f_code.co_filename, caller.f_lineno + 1


@pytest.mark.parametrize("build", ["chat-hook", "driver", "condenser-open"])
def test_a_config_warning_points_at_the_users_line(
    build: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not at pi-condense's own code (``live.py:443: ... self._condenser = ...``)."""
    from pi_condense import Condenser, CondenseWarning, Config, errors
    from pi_condense.adapters.pi_messages import PiCodec
    from pi_condense.integrations.openai_chat import ChatCondenser
    from pi_condense.live import LiveDriver

    monkeypatch.setattr(errors, "_WARNED", set(), raising=False)
    session = tmp_path / "s.jsonl"
    shutil.copy(EXAMPLE_SESSION, session)
    config = {"protectedTool": ["read"]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if build == "chat-hook":
            where = _here()
            ChatCondenser(session=":memory:", config=config)
        elif build == "driver":
            where = _here()
            LiveDriver(PiCodec(), session=":memory:", config=config)
        else:
            where = _here()
            Condenser.open(session, Config.from_settings_dict(config))
    found = [w for w in caught if issubclass(w.category, CondenseWarning)]
    assert len(found) == 1, [str(w.message) for w in found]
    assert (found[0].filename, found[0].lineno) == where


def test_printing_a_hooks_stats_is_one_short_line(tmp_path: Path) -> None:
    from pi_condense.adapters.pi_messages import PiCodec
    from pi_condense.live import LiveDriver

    driver = LiveDriver(PiCodec(), session=tmp_path / "s.jsonl")
    history = SessionFile.load(EXAMPLE_SESSION).build_context().messages[:200]
    driver.condense(history)
    assert driver.stats.last is not None  # the full render is still there to read
    text = str(driver.stats)
    assert text.startswith("LiveStats(calls=1, messages_seen=")
    assert "last=" not in text
    assert len(text) < 200, len(text)


def test_status_of_a_session_a_hook_pruned_says_who_pruned_it(tmp_path: Path) -> None:
    from pi_condense.adapters.pi_messages import PiCodec
    from pi_condense.live import LiveDriver

    session = tmp_path / "hook.jsonl"
    driver = LiveDriver(PiCodec(), session=session)
    messages = SessionFile.load(EXAMPLE_SESSION).build_context().messages[:300]
    driver.condense(messages)
    driver.close()
    proc = run("status", str(session), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "  enabled:  false" in proc.stdout  # Pi's settings (none here) say so
    summaries = int(re.search(r"summaries:\s+(\d+)", proc.stdout).group(1))  # type: ignore[union-attr]
    assert summaries > 0
    assert "pruned by:        a pruner with its own settings" in proc.stdout
    facts = json.loads(run("status", str(session), "--json", cwd=tmp_path).stdout)
    assert facts["settingsEnabled"] is False


def test_the_summarizer_chart_with_no_tokens_has_whole_ticks_from_zero(condensed: Path) -> None:
    import plotly.graph_objects as go

    from pi_condense.config import Config
    from pi_condense.report.data import collect
    from pi_condense.report.html import _summarizer_figure
    from pi_condense.summarize.factory import make_summarizer

    offline = make_summarizer("default")  # the embedded offline summarizer: no tokens
    data = collect(SessionFile.load(condensed), Config(), offline, title="t", top_outputs=3)
    assert data.summarizer
    assert all(u["inputTokens"] == 0 for u in data.summarizer)
    layout = _summarizer_figure(data, go).layout
    assert tuple(layout.yaxis.range) == (0, 1)
    assert layout.yaxis.dtick == 1
    assert layout.yaxis2.rangemode == "tozero"
    assert layout.yaxis2.tickformat == "d"
    assert float(layout.yaxis2.dtick).is_integer()
    assert layout.margin.r >= 60


def test_no_example_writes_the_users_real_pi_settings() -> None:
    """The docs' examples run with PI_CODING_AGENT_DIR pointed away (tests/docs/test_readme.py);
    as a user runs them, none may save to Pi's real settings file."""
    pages = [TESTS.parent / "README.md", *sorted((TESTS.parent / "docs").rglob("*.md"))]
    for page in pages:
        for code in re.findall(r"```python\n(.*?)```", page.read_text("utf-8"), re.S):
            for call in re.findall(r"^[^#\n]*\bsave_config\((.*)\)", code, re.M):
                assert "," in call, f"{page.name}: save_config({call}) writes Pi's settings"


def test_the_docs_name_only_commands_that_exist(tmp_path: Path) -> None:
    pages = [TESTS.parent / "README.md", *sorted((TESTS.parent / "docs").rglob("*.md"))]
    command = re.compile(r"`pi-condense ([a-z][a-z-]*)(?: ([a-z][\w.-]*))?")
    named = {m for page in pages for m in command.findall(page.read_text("utf-8"))}
    listed = re.compile(r"^│ ([a-z][a-z-]+) ", re.M)
    commands = set(listed.findall(run("--help", cwd=tmp_path).stdout))
    assert {"condense", "session", "corpus", "recover", "config"} <= commands
    groups = {"session", "corpus", "config"}  # recover takes SESSION before its subcommand
    subcommands = {g: set(listed.findall(run(g, "--help", cwd=tmp_path).stdout)) for g in groups}
    for name, sub in sorted(named):
        assert name in commands, f"`pi-condense {name}` is no command"
        if name in groups and sub:
            assert sub in subcommands[name], f"`pi-condense {name} {sub}` is no command"


def test_corpus_condense_counts_failures_apart_from_condensed(tmp_path: Path) -> None:
    sessions = tmp_path / "in"
    sessions.mkdir()
    raw = SessionFile.load(EXAMPLE_SESSION).branch()[:61]
    lines = EXAMPLE_SESSION.read_text("utf-8").splitlines()[:1]
    lines += [json.dumps(entry) for entry in raw]
    for name in ("a", "b"):
        (sessions / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    (sessions / "broken.jsonl").write_text("garbage{\n")
    proc = run("corpus", "condense", str(sessions), "--out", str(tmp_path / "out"), cwd=tmp_path)
    summary = [line for line in proc.stdout.splitlines() if " condensed (" in line]
    assert summary == [
        "2 condensed (2 now, 0 from cache), 0 already condensed in place (skipped), 1 failed "
        f"-> {tmp_path / 'out'}"
    ], proc.stdout
