"""File activity evidence: which paths recognized tools read, and which they modified.

Only tools known by name count, so an unknown tool is never guessed to be a mutation. Read
and modified paths stay separate, each in first-seen order without repeats. Compaction and
branch-summary entries carry Pi's own ``details.readFiles`` / ``details.modifiedFiles``
forward.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .entries import Entry, tool_calls_of
from .text import js_trim

__all__ = ["MODIFYING_TOOLS", "READING_TOOLS", "FileEvidence", "file_evidence"]

READING_TOOLS = frozenset(
    {
        "read", "grep", "glob", "find", "ls", "ast_grep", "repo_architecture", "repo_structure",
        "repo_ast", "repo_search", "repo_explain", "repo_deps",
    }
)  # fmt: skip
"""Tool names (lower-cased) whose path arguments are reads."""

MODIFYING_TOOLS = frozenset({"write", "edit", "apply_patch", "ast_apply"})
"""Tool names (lower-cased) whose path arguments are modifications."""

_ANY = "[^\n\r\u2028\u2029]+"  # JS `.+`
_PATCH_HEADER = re.compile(rf"\*\*\* (?:(?:Add|Update|Delete) File|Move to): ({_ANY})")
_UNIFIED_HEADER = re.compile(rf"\+\+\+ (?:b/)?({_ANY})")
_LINE_BREAK = re.compile(r"\r?\n")


@dataclass(frozen=True)
class FileEvidence:
    """Paths read and paths modified, in first-seen order."""

    read_files: list[str]
    modified_files: list[str]


def _strings(value: Any) -> list[str]:
    """A trimmed non-blank string, or the trimmed non-blank strings of a list."""
    values = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return [js_trim(v) for v in values if isinstance(v, str) and js_trim(v)]


def _argument_paths(arguments: Any) -> list[str]:
    if not isinstance(arguments, Mapping):
        return []
    paths = [
        *_strings(arguments.get("path")),
        *_strings(arguments.get("file_path")),
        *_strings(arguments.get("paths")),
    ]
    return list(dict.fromkeys(paths))


def _patch_paths(arguments: Any) -> list[str]:
    if not isinstance(arguments, Mapping):
        return []
    patch = arguments.get("input")
    if not isinstance(patch, str):
        patch = arguments.get("patch")
    if not isinstance(patch, str):
        return []
    paths: list[str] = []
    for line in _LINE_BREAK.split(patch):
        match = _PATCH_HEADER.fullmatch(line) or _UNIFIED_HEADER.fullmatch(line)
        if match and match.group(1) != "/dev/null" and js_trim(match.group(1)):
            paths.append(js_trim(match.group(1)))
    return list(dict.fromkeys(paths))


def file_evidence(entries: Iterable[Entry]) -> FileEvidence:
    """Read and modified paths over ``entries`` (see the module docstring)."""
    read: dict[str, None] = {}
    modified: dict[str, None] = {}
    for entry in entries:
        for call in tool_calls_of(entry):
            name = call.name.lower()
            if name in READING_TOOLS:
                read.update(dict.fromkeys(_argument_paths(call.arguments)))
            if name in MODIFYING_TOOLS:
                modified.update(dict.fromkeys(_argument_paths(call.arguments)))
                if name == "apply_patch":
                    modified.update(dict.fromkeys(_patch_paths(call.arguments)))
        details = entry.get("details")
        if entry.get("type") in ("compaction", "branch_summary") and isinstance(details, Mapping):
            read.update(dict.fromkeys(_strings(details.get("readFiles"))))
            modified.update(dict.fromkeys(_strings(details.get("modifiedFiles"))))
    return FileEvidence(list(read), list(modified))
