"""The binding's borrowed pointers are typed and its unsafe reads are one operation each.

`rust/py` names a borrowed object with one `#[repr(transparent)]` type (`cpython::Obj`), not a
raw-pointer alias; the two modules that read objects through raw pointers (`cpython.rs`, the
layout reads, and `jsread.rs`, the JS reader) deny `clippy::multiple_unsafe_ops_per_block`
(the CI's clippy run holds the rule), and their SAFETY comments say what keeps each pointer
alive instead of pointing at "the contract"."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "rust" / "py" / "src"
READERS = ("cpython.rs", "jsread.rs")
RAW_ALIAS = re.compile(r"\btype\s+\w+\s*=\s*\*(?:mut|const)\s+(?:ffi::)?PyObject\s*;")
BORROWED = re.compile(
    r"#\[repr\(transparent\)\]\s*(?:#\[derive\([^)]*\)\]\s*)*pub struct Obj\(\*mut ffi::PyObject\);"
)
SAFETY = re.compile(r"// SAFETY:(.*(?:\n\s*//(?! SAFETY:).*)*)")


def test_no_raw_pointer_alias_in_the_binding() -> None:
    aliases = [
        f"{path.relative_to(SRC)}: {match.group(0)}"
        for path in sorted(SRC.rglob("*.rs"))
        for match in RAW_ALIAS.finditer(path.read_text(encoding="utf-8"))
    ]
    assert aliases == []


def test_one_transparent_borrowed_object_type() -> None:
    defined = [
        path.relative_to(SRC).as_posix()
        for path in sorted(SRC.rglob("*.rs"))
        if BORROWED.search(path.read_text(encoding="utf-8"))
    ]
    assert defined == ["cpython.rs"]


def test_the_readers_deny_several_unsafe_operations_per_block() -> None:
    for name in READERS:
        text = (SRC / name).read_text(encoding="utf-8")
        assert "#![deny(clippy::multiple_unsafe_ops_per_block)]" in text, name


def test_the_readers_safety_comments_name_no_bare_contract() -> None:
    vague = [
        f"{name}: {' '.join(match.group(1).split())}"
        for name in READERS
        for match in SAFETY.finditer((SRC / name).read_text(encoding="utf-8"))
        if re.search(r"\bcontract\b", match.group(1))
    ]
    assert vague == []
