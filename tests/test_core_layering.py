"""`rust/core` is layered: its top-level modules import each other without a cycle, the base
modules (collections, JS values, message views, keys, placeholder texts) import no feature
module, and chain detection reads the render only for the chain range resolver."""

from __future__ import annotations

import re
from pathlib import Path

from _graph import cycle_in

SRC = Path(__file__).resolve().parents[1] / "rust" / "core" / "src"
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
