"""Every fenced block of README.md and docs/**/*.md is checked, or skipped here with a reason.

- ```python blocks run (tests/docs/test_readme.py); a ```text block right after one is what it
  prints.
- ```console blocks whose lines start with ``$ `` run through bash, in page order, in one
  scratch directory, and print exactly what the page shows (stdout and stderr together). The
  directory holds ``session.jsonl`` (a copy of the bundled example),
  ``example-session.condensed.jsonl`` (made by the quickstart's ``pi-condense condense
  --example``) and ``tests`` (this checkout's tests, read only), so it stands for the top of a
  clone, shown as ``/home/me/pi-condense``. A shown line ``...`` stands for any lines, and
  trailing blanks are not compared.
- ```console blocks without prompts are command synopses: every ``pi-condense`` line names a
  command that exists and only options its ``--help`` lists.
- ```json and ```toml blocks (a client's config file) parse.
- The rest (installs, builds, network, a cluster) is in :data:`SKIP`, each with the reason it
  cannot run here; an entry that matches no block fails, so the list stays reviewed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from pi_condense.cli._common import EXAMPLE_SESSION

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```$", re.S | re.M)
CLONE = "/home/me/pi-condense"

# (page, the block's first line with its runs of blanks made one) -> why it cannot run here.
SKIP = {
    (
        "docs/performance.md",
        "PI_CONDENSE_REFERENCE=/work/ref/pi-condense "
        "PI_CONDENSE_REFERENCE_RUNNER=../shared/reference-runner \\",
    ): "runs the TypeScript reference under Deno, which the CI machine does not have",
    ("README.md", "pip install . && pi-condense condense --example"): (
        "installs the checkout; .ci/run installs the built wheel the same way and this module's "
        "scratch directory runs `pi-condense condense --example`"
    ),
    ("README.md", 'pip install ".[test]" && python -m pytest'): (
        "the test suite itself: .ci/run runs it"
    ),
    ("README.md", "pip install . # from a clone: needs a Rust toolchain"): (
        "installs the checkout with its extras (.ci/run installs the wheel with [test])"
    ),
    ("docs/getting-started.md", "pip install . && pi-condense condense --example"): (
        "installs the checkout (as README.md's quickstart)"
    ),
    ("docs/getting-started.md", 'pip install ".[test]" && python -m pytest'): (
        "the test suite itself: .ci/run runs it"
    ),
    ("docs/getting-started.md", "pip install . # from source (a clone): needs a Rust toolchain"): (
        "installs and builds the release wheel: .ci/run runs the same maturin build"
    ),
    (
        "docs/development.md",
        "maturin build --release -o /tmp/wheels # once: the abi3 wheel serves every "
        "CPython >= 3.11",
    ): "builds the wheel and runs the suite per interpreter: .ci/run does the same",
    (
        "docs/performance.md",
        "pytest benches --copies 10,100 # all suites (after `maturin develop --release`)",
    ): ("the benchmarks (minutes); .ci/run runs benches/gate.py"),
    ("docs/cli.md", "$ pip install 'pi-condense[dask]' # dask[distributed]"): (
        "needs a Dask scheduler and a Ray head at the addresses shown"
    ),
    ("docs/python-api.md", "from pi_condense import Condenser, make_summarizer"): (
        "API summarizers: needs OpenAI's service and a server on localhost:8000"
    ),
    ("docs/python-api.md", '$ pip install ".[anthropic]"'): (
        "calls Anthropic's API (a key) and an Ollama server"
    ),
    ("docs/python-api.md", "$ cat settings.json"): (
        "calls OpenAI's API (the configured summarizerModel)"
    ),
    ("docs/proxy.md", '$ pip install "pi-condense[proxy]"'): (
        "installs the extra and starts the long-running proxy server on port 8787"
    ),
    ("docs/proxy/aider.md", "$ pi-condense proxy &"): (
        "needs the aider program and an OpenAI key behind the proxy"
    ),
    ("docs/proxy/claude-code.md", "$ pi-condense proxy &"): (
        "needs the Claude Code program and an Anthropic account behind the proxy"
    ),
    ("docs/proxy/codex.md", "$ pi-condense proxy &"): (
        "needs the Codex CLI program and an OpenAI key behind the proxy"
    ),
    ("docs/mcp.md", 'pip install "pi-condense[mcp]" # the official MCP Python SDK (mcp >= 2.3)'): (
        "installs the extra and starts the long-running MCP server on stdio"
    ),
    (
        "docs/mcp.md",
        "claude mcp add pi-condense -- pi-condense mcp --sessions "
        "~/.pi/agent/sessions/--pi-condense-proxy--",
    ): "needs the Claude Code program (it registers the server in the user's Claude settings)",
    ("docs/mcp.md", "name: pi-condense"): (
        "a Continue config file (YAML): the test extras have no YAML parser"
    ),
}


def blocks() -> list[tuple[str, int, str, str, str]]:
    """(page, line, language, body, language of the block before) of every fenced block."""
    found = []
    for page in PAGES:
        text = page.read_text("utf-8")
        name = page.relative_to(REPO_ROOT).as_posix()
        previous, end = "", 0
        for match in FENCE.finditer(text):
            between = text[end : match.start()]
            before = previous if not between.strip() else ""
            line = text.count("\n", 0, match.start()) + 1
            found.append((name, line, match.group(1), match.group(2), before))
            previous, end = match.group(1), match.end()
    return found


BLOCKS = blocks()


def first_line(body: str) -> str:
    return " ".join(body.split("\n", 1)[0].split())


def skipped(page: str, body: str) -> bool:
    return (page, first_line(body)) in SKIP


def kind(page: str, language: str, body: str, before: str) -> str:
    if skipped(page, body):
        return "skipped"
    if language == "python":
        return "python"
    if language == "text" and before == "python":
        return "output"
    if language == "console":
        return "session" if body.startswith("$ ") else "synopsis"
    if language in ("json", "toml"):
        return "config"
    return "unchecked"


SESSIONS = [
    pytest.param(page, body, id=f"{page}:{line}")
    for page, line, language, body, before in BLOCKS
    if kind(page, language, body, before) == "session"
]
SYNOPSES = [
    pytest.param(page, body, id=f"{page}:{line}")
    for page, line, language, body, before in BLOCKS
    if kind(page, language, body, before) == "synopsis"
]


def test_every_block_is_checked_or_skipped_with_a_reason() -> None:
    unchecked = [
        f"{page}:{line} ```{language}"
        for page, line, language, body, before in BLOCKS
        if kind(page, language, body, before) == "unchecked"
    ]
    assert not unchecked, "blocks no test checks (run them, or add to SKIP with why): " + ", ".join(
        unchecked
    )
    present = {(page, first_line(body)) for page, _, _, body, _ in BLOCKS}
    assert not set(SKIP) - present, f"SKIP entries that match no block: {set(SKIP) - present}"
    assert all(len(reason) > 20 for reason in SKIP.values())
    assert len(SESSIONS) >= 12
    assert len(SYNOPSES) >= 10


@pytest.mark.parametrize(
    ("page", "language", "body"),
    [
        pytest.param(page, language, body, id=f"{page}:{line}")
        for page, line, language, body, before in BLOCKS
        if kind(page, language, body, before) == "config"
    ],
)
def test_config_file_block_parses(page: str, language: str, body: str) -> None:
    """A client's config file shown as JSON or TOML is valid as shown."""
    parsed = json.loads(body) if language == "json" else tomllib.loads(body)
    assert parsed, page


def steps(block: str) -> list[tuple[str, str]]:
    """(command, expected output) pairs of a console block (a trailing ``\\`` continues)."""
    pairs: list[tuple[str, str]] = []
    for line in block.splitlines(keepends=True):
        if line.startswith("$ "):
            pairs.append((line[2:], ""))
        elif pairs and pairs[-1][0].endswith("\\\n") and not pairs[-1][1]:
            pairs[-1] = (pairs[-1][0] + line, "")
        else:
            command, expected = pairs[-1]
            pairs[-1] = (command, expected + line)
    return [(command.rstrip("\n"), expected) for command, expected in pairs]


def matches(printed: str, shown: str) -> bool:
    """``printed == shown``, where a shown line that is ``...`` (indented or not) stands for
    any number of lines."""
    pattern = "".join(
        r"(?:.*\n)*?" if line.strip() == "..." else re.escape(line + "\n")
        for line in shown.splitlines()
    )
    return re.fullmatch(pattern, printed) is not None


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cli = shlex.join([sys.executable, "-c", "from pi_condense.cli import main; main()"])
    script = (
        f'pi-condense() {{ {cli} "$@"; }}\npython() {{ {shlex.quote(sys.executable)} "$@"; }}\n'
    )
    env = {
        **os.environ,
        "PI_CODING_AGENT_DIR": str(cwd / "agent"),
        "PI_CONDENSE_CACHE_DIR": str(cwd / "cache"),
        "XDG_CACHE_HOME": str(cwd / "xdg-cache"),
        "COLUMNS": "100",
    }
    return subprocess.run(
        ["bash", "-c", script + command],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("docs-console")
    shutil.copy(EXAMPLE_SESSION, root / "session.jsonl")
    (root / "tests").symlink_to(REPO_ROOT / "tests", target_is_directory=True)
    made = shell("pi-condense condense --example -q", root)
    assert made.returncode == 0, made.stdout
    assert (root / "example-session.condensed.jsonl").is_file()
    return root


@pytest.mark.parametrize(("page", "block"), SESSIONS)
def test_console_block_prints_what_the_page_shows(page: str, block: str, scratch: Path) -> None:
    for command, shown in steps(block):
        printed = shell(command, scratch).stdout.replace(str(scratch), CLONE)
        # A page keeps no trailing blanks (rich pads its table rows with them).
        printed = re.sub(r"[ \t]+$", "", printed, flags=re.M)
        assert matches(printed, shown), f"{page}: $ {command}\n--- printed:\n{printed}"


def _help(path: list[str], cwd: Path) -> str:
    proc = shell(shlex.join(["pi-condense", *path, "--help"]), cwd)
    assert proc.returncode == 0, f"pi-condense {' '.join(path)} --help: {proc.stdout}"
    return proc.stdout


@pytest.mark.parametrize(("page", "block"), SYNOPSES)
def test_synopsis_names_commands_and_options_that_exist(
    page: str, block: str, tmp_path: Path
) -> None:
    lines = block.replace("\\\n", " ").splitlines()
    usages: list[str] = []
    for line in lines:
        code = line.split("  #", 1)[0]
        if code.startswith("pi-condense"):
            usages.append(code)
        elif code.startswith(" ") and usages:
            usages[-1] += " " + code.strip()
    assert usages, f"{page}: a console block with neither prompts nor pi-condense lines"
    for usage in usages:
        words = usage.split()[1:]
        path = []
        for word in words:
            if not re.fullmatch(r"[a-z][a-z-]*", word):
                break
            path.append(word)
        if path[:1] == ["recover"]:  # recover SESSION SUBCOMMAND: its options are the sub's
            path = ["recover", "session.jsonl", words[2]]
        options = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", usage))
        text = _help(path, tmp_path)
        missing = sorted(o for o in options if not re.search(rf"(?<![\w-]){o}(?![\w-])", text))
        assert not missing, f"{page}: `{usage}` names options `{' '.join(path)} --help` lacks"
