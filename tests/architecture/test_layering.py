"""The Python package is layered: every module belongs to one layer of :data:`LAYERS`, imports
only from its own layer or a lower one, no modules import each other in a circle, and a
function-level import is kept for the few reasons of :data:`DEFERRED` (an optional SDK, a CLI
command loaded when it runs). The module map of ``docs/architecture.md`` is this table.

The imports are read from the source with :mod:`ast` (nothing is imported), so a module that
cannot be imported without an extra is checked as well.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from support.graph import cycle_in

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "pi_condense"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("_core", "_fs", "errors", "lazy", "collector", "frozen", "keys")),
    ("js", ("js", "jsjson", "jstime")),
    ("config", ("config",)),
    ("session", ("session", "usage", "inplace")),
    ("state", ("state", "session_stats")),
    ("render", ("render", "image_cap", "supersede")),
    ("summarize", ("summarize",)),
    (
        "pipeline",
        (
            "capture",
            "spill",
            "triggers",
            "metrics",
            "status",
            "branch_facts",
            "chains",
            "live_state",
            "flush",
        ),
    ),
    ("tools", ("tools",)),
    ("condenser", ("condenser",)),
    ("replay", ("replay_log", "replay")),
    ("adapters", ("adapters",)),
    ("live", ("live",)),
    ("integrations", ("integrations",)),
    ("report", ("report",)),
    ("corpus", ("corpus",)),
    ("servers", ("mcp", "proxy")),
    ("cli", ("cli", "__init__", "__main__")),
)
"""The layers, lowest first; each names the modules and packages (relative to ``pi_condense``;
a package covers its modules) that belong to it. ``__init__`` is the package itself, the
public surface, which names everything."""

DEFERRED: tuple[tuple[str, str, str], ...] = (
    (
        "pi_condense.cli",
        "",
        "a command loads what it runs when it runs: `pi-condense --help` and `--version` start "
        "without the pruner",
    ),
    (
        "pi_condense.replay",
        "pi_condense.tools.query",
        "only a replay that runs the query tool loads the model's tools: `pi-condense condense` "
        "starts without them (tests/cli/test_cli_startup.py)",
    ),
    (
        "pi_condense.summarize.factory",
        "",
        "a model summarizer's client (and its httpx stack) loads with the first one made: an "
        "offline `condense` starts without them (tests/cli/test_cli_startup.py)",
    ),
    (
        "pi_condense.summarize.runner",
        "email.utils",
        "only a Retry-After given as an HTTP date needs the date parser",
    ),
    ("pi_condense.integrations.openai_agents", "agents", "the openai-agents extra"),
    ("pi_condense.report.html", "plotly", "the report extra"),
    (
        "pi_condense.mcp.server",
        "uvicorn",
        "only the streamable HTTP transport runs a web server; stdio needs none",
    ),
    ("pi_condense.corpus", "fsspec", "reading a corpus from a URL needs fsspec (not a dependency)"),
    (
        "pi_condense.config._plain",
        "pi_condense.config._twin",
        "the config classes' pydantic twins (pydantic, about 0.1 s) load only for a value that is "
        "not of its field's exact type: reading a settings file does not import pydantic",
    ),
)
"""Function-level imports allowed: (importing module or package, imported module or package,
why); an empty imported name allows any."""


DYNAMIC: dict[str, str] = {
    "pi_condense.lazy": "the package names imported on first use (PEP 562)",
    "pi_condense.cli": "the command named on the command line, loaded when it runs",
    "pi_condense.summarize.runner": "a summarizer's SDK (an optional extra), with its install hint",
    "pi_condense.corpus.engines": "the Dask and Ray engines (optional extras)",
}
"""Modules (or packages) that import by name at run time (``importlib.import_module``,
``__import__``): an import the scan cannot follow, so kept to these, with why."""


@dataclass(frozen=True)
class Import:
    module: str
    target: str
    line: int
    kind: str  # "top", "function" or "type-checking"


@functools.cache
def module_names(package: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package (a native module by its stub)."""
    names: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py*")):
        if path.suffix not in (".py", ".pyi") or "__pycache__" in path.parts:
            continue
        if path.suffix == ".pyi" and path.with_suffix(".py").exists():
            continue
        parts = [package.name, *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts.pop()
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def imports_in(
    module: str, source: str, is_package: bool, modules: dict[str, Path]
) -> Iterator[Import]:
    """The imports of one module's source, each resolved to a module of ``modules`` where it
    names one (``from . import render`` is ``pi_condense.render``)."""

    def walk(node: ast.AST, kind: str) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from walk(child, "function")
            elif isinstance(child, ast.If) and _is_type_checking(child) and kind == "top":
                yield from walk(child, "type-checking")
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(module, alias.name, child.lineno, kind)
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(module, is_package, child)
                for alias in child.names:
                    name = f"{base}.{alias.name}"
                    yield Import(module, name if name in modules else base, child.lineno, kind)
            else:
                yield from walk(child, kind)

    yield from walk(ast.parse(source), "top")


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> Iterator[Import]:
    return imports_in(module, path.read_text(encoding="utf-8"), path.stem == "__init__", modules)


@functools.cache
def all_imports() -> tuple[Import, ...]:
    modules = module_names(PACKAGE)
    return tuple(i for name, path in modules.items() for i in imports_of(name, path, modules))


def _covers(unit: str, module: str) -> bool:
    return module == unit or module.startswith(unit + ".")


def layer_of(module: str) -> int | None:
    """The index of the layer ``module`` belongs to (the most specific entry wins)."""
    relative = module.removeprefix("pi_condense").removeprefix(".") or "__init__"
    found: tuple[int, int] | None = None
    for index, (_, units) in enumerate(LAYERS):
        for unit in units:
            if _covers(unit, relative) and (found is None or len(unit) > found[1]):
                found = (index, len(unit))
    return found[0] if found else None


def internal_graph(imports: tuple[Import, ...]) -> dict[str, set[str]]:
    modules = module_names(PACKAGE)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for i in imports:
        if i.target in modules and i.target != i.module:
            graph[i.module].add(i.target)
    return graph


def _deferred_reason(i: Import) -> str | None:
    for importer, target, reason in DEFERRED:
        if _covers(importer, i.module) and (not target or _covers(target, i.target)):
            return reason
    return None


# ------------------------------------------------------------------------------------ tests


def test_the_scan_sees_the_package() -> None:
    modules = module_names(PACKAGE)
    assert {"pi_condense", "pi_condense._core", "pi_condense.render", "pi_condense.cli"} <= set(
        modules
    )
    graph = internal_graph(all_imports())
    assert "pi_condense._core" in graph["pi_condense.keys"]  # the native module, by its stub
    assert "pi_condense.session" in graph["pi_condense.state"]
    kinds = {i.kind for i in all_imports() if i.module.startswith("pi_condense.cli")}
    assert {"top", "function"} <= kinds  # the CLI's deferred commands are seen


def test_every_module_belongs_to_a_layer() -> None:
    assert [m for m in module_names(PACKAGE) if layer_of(m) is None] == []


def test_every_unit_of_the_layers_is_a_module_or_package() -> None:
    modules = set(module_names(PACKAGE))
    units = [u for _, names in LAYERS for u in names]
    assert len(units) == len(set(units))
    missing = [u for u in units if u != "__init__" and f"pi_condense.{u}" not in modules]
    assert missing == []


def test_no_import_cycle() -> None:
    assert cycle_in(internal_graph(all_imports())) == []


def test_imports_run_downhill() -> None:
    modules = module_names(PACKAGE)
    uphill = []
    for i in all_imports():
        if i.target not in modules:
            continue
        own, other = layer_of(i.module), layer_of(i.target)
        if own is not None and other is not None and other > own:
            uphill.append(
                f"{i.module}:{i.line} ({LAYERS[own][0]}) imports {i.target} ({LAYERS[other][0]})"
            )
    assert uphill == []


def test_function_level_imports_only_for_optional_sdks_and_cli_commands() -> None:
    deferred = [
        f"{i.module}:{i.line} imports {i.target}"
        for i in all_imports()
        if i.kind == "function" and _deferred_reason(i) is None
    ]
    assert deferred == []


def test_imports_by_name_only_where_listed() -> None:
    found = set()
    for module, path in module_names(PACKAGE).items():
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                if name.endswith("import_module") or name == "__import__":
                    found.add(module)
    assert sorted(m for m in found if not any(_covers(d, m) for d in DYNAMIC)) == []
    assert sorted(d for d in DYNAMIC if not any(_covers(d, m) for m in found)) == []


def test_the_checks_find_what_they_look_for() -> None:
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle_in({"a": {"b"}, "b": set()}) == []
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import render\n"
        "from .state import PrunerState\n"
        "if TYPE_CHECKING:\n"
        "    from .cli import main\n"
        "def f():\n"
        "    import plotly\n"
        "    from .live import LiveDriver\n"
    )
    modules = dict.fromkeys(("pi_condense.render", "pi_condense.state"), PACKAGE)
    found = list(imports_in("pi_condense.x", source, False, modules))
    assert [(i.target, i.kind) for i in found] == [
        ("typing", "top"),
        ("pi_condense.render", "top"),
        ("pi_condense.state", "top"),
        ("pi_condense.cli", "type-checking"),
        ("plotly", "function"),
        ("pi_condense.live", "function"),
    ]
    assert _deferred_reason(found[4]) is None  # plotly outside the report is not allowed
    assert _deferred_reason(Import("pi_condense.report.html", "plotly", 1, "function"))
    assert _deferred_reason(Import("pi_condense.cli.render_cmd", "pi_condense.render", 1, "x"))
    assert layer_of("pi_condense") == len(LAYERS) - 1
    assert layer_of("pi_condense.session.file") == layer_of("pi_condense.usage")
    assert layer_of("pi_condense.no_such_module") is None


# ------------------------------------------------------------------------ the documented map

_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*([a-z]+)\s*\|(.*?)\|")
_UNIT = re.compile(r"`([A-Za-z_][A-Za-z0-9_.]*/?)`")


def documented_layers() -> list[tuple[str, tuple[str, ...]]]:
    """The rows of the module map in ``docs/architecture.md``: (layer, units) in order."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Module map", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        match = _ROW.match(line)
        if match:
            units = tuple(u.removesuffix(".py").rstrip("/") for u in _UNIT.findall(match[3]))
            rows.append((int(match[1]), match[2], units))
    assert [n for n, _, _ in rows] == list(range(1, len(rows) + 1))
    return [(name, units) for _, name, units in rows]


def test_the_documented_module_map_is_the_layer_table() -> None:
    assert documented_layers() == [(name, units) for name, units in LAYERS]


def test_the_picture_is_drawn_from_the_map() -> None:
    script = ROOT / "scripts" / "architecture_svg.py"
    check = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stderr
    picture = (ROOT / "docs" / "architecture.svg").read_text(encoding="utf-8")
    for number, (name, _) in enumerate(LAYERS, 1):
        assert f">{number} {name}</text>" in picture
