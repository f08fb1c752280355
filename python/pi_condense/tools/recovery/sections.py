"""Sections: runs of entries that start at a user message, a compaction or a branch summary.

The first selected entry also starts a section. A section's id is ``section:<start entry
id>``, so it stays the same while that entry exists; which entries a section holds depends
on the scope (the active branch or every entry).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .entries import Entry, role_of, search_text, tool_calls_of, tool_result_of
from .files import file_evidence
from .text import preview

__all__ = ["Section", "build_sections", "section_ids_by_entry", "section_summary"]

_STARTS = ("compaction", "branch_summary")


@dataclass
class Section:
    """One section: its id, label and entries (at least one)."""

    id: str
    label: str
    entries: list[Entry] = field(default_factory=list)

    @property
    def start_entry_id(self) -> str:
        """Id of the entry that opens the section."""
        return str(self.entries[0]["id"])

    @property
    def end_entry_id(self) -> str:
        """Id of the section's last entry."""
        return str(self.entries[-1]["id"])


def _label(entry: Entry) -> str:
    text = preview(search_text(entry))
    kind = entry.get("type")
    if role_of(entry) == "user":
        return text or "User message"
    if kind == "compaction":
        return f"Compaction: {text or entry['id']}"
    if kind == "branch_summary":
        return f"Branch summary: {text or entry['id']}"
    return text or f"{kind} {entry['id']}"


def _starts_section(entry: Entry) -> bool:
    return role_of(entry) == "user" or entry.get("type") in _STARTS


def build_sections(entries: Sequence[Entry]) -> list[Section]:
    """Split ``entries`` (already filtered to usable ones) into sections, in order."""
    sections: list[Section] = []
    for entry in entries:
        if not sections or _starts_section(entry):
            sections.append(Section(f"section:{entry['id']}", _label(entry), [entry]))
        else:
            sections[-1].entries.append(entry)
    return sections


def section_ids_by_entry(sections: Sequence[Section]) -> dict[str, str]:
    """Entry id -> id of the section holding it."""
    return {str(entry["id"]): s.id for s in sections for entry in s.entries}


def section_summary(section: Section) -> dict[str, Any]:
    """What the overview lists for a section: range, counts by role, calls, results, errors
    and file counts."""
    roles: dict[str, int] = {}
    calls = results = errors = 0
    for entry in section.entries:
        role = role_of(entry)
        if role is not None:
            roles[role] = roles.get(role, 0) + 1
        calls += len(tool_calls_of(entry))
        result = tool_result_of(entry)
        if result is not None:
            results += 1
            errors += result.get("isError") is True
    files = file_evidence(section.entries)
    return {
        "id": section.id,
        "label": section.label,
        "startEntryId": section.start_entry_id,
        "endEntryId": section.end_entry_id,
        "entryCount": len(section.entries),
        "roles": roles,
        "toolCalls": calls,
        "toolResults": results,
        "errors": errors,
        "readFileCount": len(files.read_files),
        "modifiedFileCount": len(files.modified_files),
    }
