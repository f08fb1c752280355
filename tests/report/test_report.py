"""`pi-condense report`: the HTML page, loaded in a real headless browser (Debian's chromium,
which `.ci/run` installs). The page records console errors and each chart's point counts in
attributes of <body>; the browser's DOM dump is read back, and a screenshot is written."""

from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pi_condense.cli._common import EXAMPLE_SESSION
from pi_condense.report import SECTIONS, common_prefix_chars
from pi_condense.session import SessionFile

CLI = [sys.executable, "-c", "from pi_condense.cli import main; main()"]


def run(*args: str, cwd: Path, code: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", code, *args] if code else [*CLI, *args]
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(cwd / "agent")}
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


# Without a browser these tests are skipped with NOT_CHECKED as their reason (conftest.py
# repeats it in a banner at the end of the run); `.ci/run` sets REQUIRE_BROWSER, which makes
# a missing browser a failure instead.
REQUIRE_BROWSER = "PI_CONDENSE_REQUIRE_BROWSER"
NOT_CHECKED = (
    "NOT CHECKED (no chromium on PATH): the report page's own JavaScript, chart points, "
    "console errors and screenshot; install it with `apt-get install -y chromium`"
)


@pytest.fixture(scope="session")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get(REQUIRE_BROWSER):
        pytest.fail(f"{REQUIRE_BROWSER} is set but there is no chromium on PATH", pytrace=False)
    pytest.skip(NOT_CHECKED)


def browse(chromium: str, page: Path, tmp: Path, *extra: str) -> str:
    """Load ``page`` in headless chromium (own profile under ``tmp``) and return stdout."""
    profile = tmp / "chromium-profile"
    proc = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--host-resolver-rules=MAP * ~NOTFOUND",  # no network: the page must not need it
            f"--user-data-dir={profile}",
            "--virtual-time-budget=20000",
            *extra,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "HOME": str(tmp)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def body_attributes(dom: str) -> dict[str, str]:
    match = re.search(r"<body([^>]*)>", dom)
    assert match, dom[:500]
    return dict(re.findall(r'([\w-]+)="([^"]*)"', match.group(1)))


def charts(attributes: dict[str, str]) -> dict[str, dict[str, int]]:
    """``data-charts``: ``id:trace=n,trace=n;id:...``."""
    out: dict[str, dict[str, int]] = {}
    for chart in attributes["data-charts"].split(";"):
        name, _, traces = chart.partition(":")
        out[name] = {t.rsplit("=", 1)[0]: int(t.rsplit("=", 1)[1]) for t in traces.split(",")}
    return out


def assistant_messages(path: Path) -> int:
    messages = SessionFile.load(path).build_context().messages
    return sum(1 for m in messages if m.get("role") == "assistant")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The report of the bundled (raw) example: the page and the --json figures."""
    root = tmp_path_factory.mktemp("report")
    page = root / "report.html"
    proc = run("report", str(EXAMPLE_SESSION), "-o", str(page), "--json", cwd=root)
    assert proc.returncode == 0, proc.stderr
    return page, json.loads(proc.stdout)


def test_the_page_is_self_contained(report: tuple[Path, dict[str, Any]]) -> None:
    page, _ = report
    text = page.read_text("utf-8")
    assert not re.search(r"<script[^>]+src=", text)
    assert not re.search(r"<link[^>]+href=", text)
    assert "plotly.js v" in text  # the library itself is inlined
    for section in SECTIONS:
        assert f"<h2>{section}</h2>" in text


def test_the_page_loads_in_chromium_with_every_point(
    chromium: str, report: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    page, figures = report
    calls = assistant_messages(EXAMPLE_SESSION)  # one model call per assistant message
    assert calls == 453
    attributes = body_attributes(browse(chromium, page, tmp_path, "--dump-dom"))
    assert attributes["data-ready"] == "1"
    assert attributes["data-console-errors"] == "0"
    shown = charts(attributes)
    assert shown["context"]["raw"] == calls
    assert shown["context"]["condensed"] == calls
    assert shown["context"]["cache prefix kept"] == calls
    assert shown["context"]["flush"] == len(figures["flushCalls"]) > 0
    assert shown["context"]["chain compression"] == len(figures["chainCalls"]) > 0
    assert shown["outputs"] == {"raw chars": 15, "its summary": 15}
    assert shown["summarizer"]["input tokens"] == len(figures["summarizer"]) > 0
    assert figures["modelCalls"] == calls
    assert figures["replayed"] is True
    # The condensed context is never larger than the raw one, and the first call has no
    # previous request to share a prefix with.
    assert all(c <= r for c, r in zip(figures["condensedChars"], figures["rawChars"], strict=False))
    assert figures["cachedPrefixChars"][0] == 0
    assert max(figures["cachedPrefixChars"][1:]) > 0


def test_a_screenshot_of_the_page(
    chromium: str, report: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    page, _ = report
    shot = tmp_path / "report.png"
    browse(chromium, page, tmp_path, f"--screenshot={shot}", "--window-size=1280,2600")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 2600)
    assert len(data) > 50_000  # charts drawn, not a blank page


def test_the_probe_sees_console_errors(
    chromium: str, report: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    page, _ = report
    broken = tmp_path / "broken.html"
    text = page.read_text("utf-8")
    broken.write_text(text.replace("</body>", "<script>console.error('boom')</script></body>"))
    attributes = body_attributes(browse(chromium, broken, tmp_path, "--dump-dom"))
    assert attributes["data-console-errors"] == "1"


def test_a_condensed_session_is_measured_from_its_entries(tmp_path: Path) -> None:
    leaf = SessionFile.load(EXAMPLE_SESSION).branch()[300]["id"]
    condensed = tmp_path / "prefix.jsonl"
    made = run(
        "condense", str(EXAMPLE_SESSION), "--leaf", leaf, "-o", str(condensed), "-q", cwd=tmp_path
    )
    assert made.returncode == 0, made.stderr
    page = tmp_path / "r.html"
    proc = run("report", str(condensed), "-o", str(page), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(proc.stdout)
    assert figures["replayed"] is False
    assert figures["modelCalls"] == assistant_messages(condensed)
    assert figures["condensedChars"][-1] < figures["rawChars"][-1]
    again = run("report", str(condensed), "-o", str(page), cwd=tmp_path)
    assert again.returncode == 2
    assert "exists (use --force" in again.stderr


def test_without_plotly_the_error_names_the_extra(tmp_path: Path) -> None:
    blocked = "import sys\nsys.modules['plotly'] = None\nfrom pi_condense.cli import main; main()"
    leaf = SessionFile.load(EXAMPLE_SESSION).branch()[40]["id"]
    source = tmp_path / "s.jsonl"
    made = run(
        "condense", str(EXAMPLE_SESSION), "--leaf", leaf, "-o", str(source), "-q", cwd=tmp_path
    )
    assert made.returncode == 0, made.stderr
    proc = run("report", str(source), "-o", str(tmp_path / "r.html"), cwd=tmp_path, code=blocked)
    assert proc.returncode == 2
    assert 'pip install "pi-condense[report]"' in proc.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([], []),
        ([], ["{}"]),
        (['{"a":1}'], ['{"a":1}']),
        (['{"a":1}'], ['{"a":2}']),
        (['{"a":1}', "{}"], ['{"a":1}']),
        (['{"a":1}'], ['{"a":1}', "{}"]),
        (["x" * 5000 + "a"], ["x" * 5000 + "b"]),
    ],
)
def test_cache_prefix_is_the_common_prefix_of_the_json(a: list[str], b: list[str]) -> None:
    def text(items: list[str]) -> str:
        return "[" + ",".join(items) + "]"

    assert common_prefix_chars(a, b) == len(posixpath.commonprefix([text(a), text(b)]))
