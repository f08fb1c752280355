"""`rust/core` is layered: its top-level modules import each other without a cycle, the base
modules (collections, JS values, message views, keys, placeholder texts) import no feature
module, and chain detection reads the render only for the chain range resolver. In both
crates, `rust/core` and the binding `rust/py`, no source file reaches back to itself through
the files it names (`crate::`, `super::` and `self::` paths)."""

from __future__ import annotations

import re
from pathlib import Path

from support.graph import cycle_in

RUST = Path(__file__).resolve().parents[2] / "rust"
SRC = RUST / "core" / "src"
USE = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")
BASE = {"collections", "js", "jsstr", "json", "keys", "placeholders", "view"}
RENDER_PATH = re.compile(r"\bcrate::render::([a-z_][a-z0-9_:]*)")
FEATURES = {"index", "render", "chains"}


def top_level_modules() -> dict[str, list[Path]]:
    modules: dict[str, list[Path]] = {}
    for path in SRC.iterdir():
        if path.name == "lib.rs":
            continue
        name = path.stem if path.is_file() else path.name
        files = [path] if path.is_file() else sorted(path.rglob("*.rs"))
        modules[name] = files
    return modules


def imports() -> dict[str, set[str]]:
    modules = top_level_modules()
    graph: dict[str, set[str]] = {}
    for name, files in modules.items():
        used = set()
        for file in files:
            used.update(USE.findall(file.read_text(encoding="utf-8")))
        graph[name] = {m for m in used if m in modules and m != name}
    return graph


def test_the_scan_sees_the_crate() -> None:
    graph = imports()
    assert set(graph) >= FEATURES | BASE
    assert "index" in graph["render"]  # the render reads the index: the scan finds uses


def test_top_level_modules_have_no_cycle() -> None:
    assert cycle_in(imports()) == []


def test_base_modules_import_no_feature_module() -> None:
    graph = imports()
    assert {name: sorted(graph[name] & FEATURES) for name in BASE} == {name: [] for name in BASE}


def test_the_cycle_finder_finds_one() -> None:
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_chain_detection_reads_only_the_range_resolver_of_the_render() -> None:
    used = set()
    for file in top_level_modules()["chains"]:
        used.update(RENDER_PATH.findall(file.read_text(encoding="utf-8")))
    assert used == {"chain::range::resolve_range"}


# A path through the crate's modules, as written in a `use` or an expression.
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
# `use crate::{a::b, c}` / `use super::{x, y::z}`: each listed path, with its prefix.
GROUP = re.compile(r"\buse\s+(crate|super|self)::\{([^;]*)\};", re.S)
LINE_COMMENT = re.compile(r"//[^\n]*")


def file_modules(src: Path) -> dict[tuple[str, ...], Path]:
    """Every source file of a crate by its module path (`lib.rs` is the root, `()`)."""
    modules: dict[tuple[str, ...], Path] = {}
    for path in sorted(src.rglob("*.rs")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "mod" or parts == ("lib",):
            parts = parts[:-1]
        modules[parts] = path
    return modules


def named_paths(text: str) -> list[tuple[str, list[str]]]:
    """The module paths a file names outside its unit tests, as (prefix, segments)."""
    text = LINE_COMMENT.sub("", text)
    cut = text.find("#[cfg(test)]\nmod tests")
    if cut >= 0:
        text = text[:cut]
    found = [(m.group(1), m.group(2).split("::")[1:]) for m in PATH.finditer(text)]
    for group in GROUP.finditer(text):
        for item in re.split(r"[,\s]+", group.group(2)):
            item = item.split("::{")[0].strip("{} ")
            if item:
                found.append((group.group(1), item.split("::")))
    return found


def file_imports(src: Path) -> dict[tuple[str, ...], set[tuple[str, ...]]]:
    """Which files each file of a crate names (a file owning a submodule is not an edge by
    that alone: `mod x;` declares, it does not use)."""
    modules = file_modules(src)
    graph: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
    for module, path in modules.items():
        used: set[tuple[str, ...]] = set()
        for prefix, segments in named_paths(path.read_text(encoding="utf-8")):
            if prefix == "crate":
                base: list[str] = []
            elif prefix == "self":
                base = list(module)
            else:  # super: the parent of the module the file is
                base = list(module[:-1])
            full = base + segments
            for end in range(len(full), 0, -1):
                target = tuple(full[:end])
                if target in modules:
                    if target not in (module, ()):
                        used.add(target)
                    break
        graph[module] = used
    return graph


def cycle_of_files(src: Path) -> list[str]:
    graph = {"/".join(k): {"/".join(v) for v in vs} for k, vs in file_imports(src).items()}
    return cycle_in(graph)


def test_the_file_scan_sees_both_crates() -> None:
    binding = file_imports(RUST / "py" / "src")
    assert ("json",) in binding[("render", "sizes")]
    assert ("size_memo",) in binding[("render", "cache")]  # a `use crate::x::Y` is seen
    core = file_imports(SRC)
    assert ("render", "resume", "seen") in core[("render", "resume", "chains")]


def test_no_file_cycle_in_the_binding() -> None:
    assert cycle_of_files(RUST / "py" / "src") == []


def test_no_file_cycle_in_the_core() -> None:
    assert cycle_of_files(SRC) == []
