"""Every Python example in README.md and the docs pages (docs/**/*.md) runs as written (in a
scratch directory), and where a ```text block follows it, prints exactly that."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
from pathlib import Path

import pytest

from conftest import REPO_ROOT

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
EXAMPLE = re.compile(r"```python\n(.*?)```(?:\n\n```text\n(.*?)```)?", re.S)


def examples() -> list[tuple[str, str, str | None]]:
    """(where, code, shown output or None) of every Python block."""
    found = []
    for page in PAGES:
        name = page.relative_to(REPO_ROOT).as_posix()
        for i, match in enumerate(EXAMPLE.finditer(page.read_text("utf-8"))):
            found.append((f"{name} block {i}", match.group(1), match.group(2)))
    return found


EXAMPLES = examples()


def test_readme_and_docs_have_examples() -> None:
    assert len(EXAMPLES) >= 3
    assert sum(1 for _, _, shown in EXAMPLES if shown is not None) >= 5


@pytest.mark.parametrize(("where", "code", "shown"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_readme_example_runs(
    where: str,
    code: str,
    shown: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fixtures_dir: Path,
) -> None:
    shutil.copy(fixtures_dir / "large-session.jsonl", tmp_path / "session.jsonl")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, where, "exec"), {"__name__": "readme"})
    if shown is not None:
        assert printed.getvalue() == shown, where
