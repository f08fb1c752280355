"""The test suite's own layout (issue 42): test modules live in one folder per area, helpers in
``tests/support/``, and no test module imports another test module (shared parts go to
``support``)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
AREAS = {
    "architecture",
    "bench",
    "cli",
    "config",
    "conformance",
    "corpus",
    "docs",
    "hooks",
    "js",
    "pipeline",
    "reliability",
    "render",
    "report",
    "session",
    "summarize",
}


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "data" not in p.relative_to(TESTS).parts)


def test_only_the_conftest_sits_at_the_top() -> None:
    top = sorted(p.name for p in TESTS.glob("*.py"))
    assert top == ["conftest.py"]


def test_every_test_module_is_in_an_area_folder_that_is_a_package() -> None:
    folders = {p.parent.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py")}
    assert folders == AREAS
    for folder in [*AREAS, "support"]:
        assert (TESTS / folder / "__init__.py").is_file(), folder


def test_no_module_imports_a_test_module() -> None:
    offending = []
    for path in python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if node_imports_a_test(names):
                offending.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert offending == []


def node_imports_a_test(modules: list[str]) -> bool:
    """A module path whose last part is a test module, or the old top-level ``_helper``s."""
    return any(
        module.rsplit(".", 1)[-1].startswith("test_")
        or (module.startswith("_") and module != "__future__")
        for module in modules
    )


def test_the_layout_check_sees_an_import_between_test_modules() -> None:
    assert node_imports_a_test(["render.test_render_properties"])
    assert node_imports_a_test(["test_reliability_kills"])
    assert node_imports_a_test(["_builders"])
    assert not node_imports_a_test(["support.builders", "pi_condense.render", "__future__"])
