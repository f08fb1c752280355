"""``context_tree_query``: give the model back the original output of summarized tool calls.

Registration strings and the output format are the reference's, byte for byte (spec 06
part A): they reach the model. Each requested id (short ref ``tN``, occurrence key
``id@ts`` or raw provider id) becomes one block per matching record; a raw id that was
reused yields every occurrence, dedup aliases included, labelled ``id@<resultTimestamp>``.

Spilled outputs are read back from their sidecar file, but only from inside the session's
blob directory (see :mod:`pi_condense.tools.spill_access`); a refused path falls back to the
stored preview and the block says why.

Paging (ours, with ``paging=True``; the reference only cuts an output at 2000 lines / 50 KB
and points the model at the spill file): a cut output ends with a note naming the ref of the
next part, ``<ref>#<line>`` (the output from that 1-based line on, cut the same way). The
parts, joined with one line break, are the original output exactly. A single line longer
than a part (a minified file, a one-line log) is cut inside the line: the next part is
``<ref>#<line>.<column>`` and its note says to join it without a line break.

Images (pi-condense 2.11.2): a captured result's text starts with one ``[image returned:
<type> sha256:<8 hex>]`` marker per image it carried. Given the session branch, the tool
appends after its text block the image blocks of the branch's tool results whose data hash
those markers name, in record order and then marker order; a record without markers, or
whose images are not on the branch, gives text only.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional

from ..capture import image_digest
from ..js import json as jsjson
from ..js.json import utf8_len
from ..js.values import to_string, truthy
from ..state import PrunerState, ToolCallRecord
from .base import ToolResult, ToolSpec
from .spill_access import read_spill
from .truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, truncate_head

__all__ = ["QUERY_TOOL", "ContextTreeQuery", "missing_refs"]

_log = logging.getLogger(__name__)

QUERY_TOOL = ToolSpec(
    name="context_tree_query",
    label="Query Original Tool History",
    description=(
        "Retrieve original tool call results that have been pruned from active context. "
        "Pass the short refs listed in a pruner-summary message, e.g. "
        'context_tree_query({ toolCallIds: ["t12", "t3"] }), to get back the full original '
        "outputs. A raw id that was reused returns every occurrence, each labelled id@timestamp. "
        "Results include the original image blocks when the pruned output carried images."
    ),
    # Key order as TypeBox builds it (options first), which is how Pi serializes it.
    parameters={
        "type": "object",
        "properties": {
            "toolCallIds": {
                "description": (
                    'Required. One or more short refs (e.g. "t12") or raw tool call IDs from a '
                    "pruner-summary message. A reused raw id returns every occurrence, each "
                    "labelled id@timestamp."
                ),
                "type": "array",
                "items": {"type": "string"},
            }
        },
        "required": ["toolCallIds"],
    },
    prompt_snippet="Retrieve original pruned tool outputs by short ref",
    prompt_guidelines=(
        "When you need the full output of a tool call that was summarized and pruned from "
        "context, use context_tree_query with the short refs listed in the relevant "
        "pruner-summary message.",
    ),
)
"""Registration of ``context_tree_query`` (spec 06 A.1)."""

_PAGE = re.compile(r"^(.+)#([1-9][0-9]{0,8})(?:\.([1-9][0-9]{0,9}))?$")
"""``<ref>#<line>`` or ``<ref>#<line>.<column>``: a part of an output, from a 1-based line
(and column) on (paging)."""

_MARKER = re.compile(r"\[image returned: [^\n]*? sha256:([0-9a-f]{8})\]")

_NOT_FOUND = "(not found in index \u2014 may not have been summarized yet)"
_SPILL_MISSING = "(spilled output unavailable \u2014 sidecar file missing)"


def _field(record: Mapping[str, Any], key: str) -> str:
    """A record field inside a JS template literal (a missing key prints ``undefined``)."""
    return to_string(record[key]) if key in record else "undefined"


def image_marker_digests(text: str) -> list[str]:
    """The ``sha256:<8 hex>`` digests of the image markers in ``text``, in order."""
    return _MARKER.findall(text)


def branch_images(entries: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """digest -> image block, over the image blocks of the toolResult messages of a branch
    (session entries); the first block of a digest wins (equal digests are equal data)."""
    images: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if not isinstance(entry, Mapping) or entry.get("type") != "message":
            continue
        message = entry.get("message")
        if not isinstance(message, Mapping) or message.get("role") != "toolResult":
            continue
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "image":
                images.setdefault(image_digest(block.get("data")), block)
    return images


def _text(value: Any) -> str:
    """A record body as a string (a malformed record's non-string body is shown as JSON)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else jsjson.dumps(value)


class ContextTreeQuery:
    """The ``context_tree_query`` tool over one pruner state.

    ``session_dir`` and ``session_id`` locate the session's spill files
    (``<session_dir>/<session_id>-blobs/``). ``recorded_session_dir`` is the directory the
    session was written in when it has since moved: recorded spill paths under it are looked
    up under ``session_dir`` instead (see :mod:`pi_condense.tools.spill_access`).
    ``full`` leaves outputs whole instead of cutting them at 2000 lines / 50 KB as the tool
    does for the model (for people reading an output, e.g. ``pi-condense query --full``).
    ``paging`` makes a cut output say how to get the rest (module docstring).
    ``branch`` returns the session branch (its entries), where recovered images are looked up
    (without it, outputs are text only).
    """

    spec = QUERY_TOOL

    def __init__(
        self,
        state: PrunerState,
        session_dir: str,
        session_id: str,
        *,
        recorded_session_dir: Optional[str] = None,
        full: bool = False,
        paging: bool = False,
        branch: Optional[Callable[[], Iterable[Any]]] = None,
    ) -> None:
        self.full = full
        self.paging = paging
        self.branch = branch
        self.state = state
        self.session_dir = session_dir
        self.session_id = session_id
        self.recorded_session_dir = recorded_session_dir

    def execute(self, args: Mapping[str, Any]) -> ToolResult:
        """Run the tool with the model's arguments ``{"toolCallIds": [...]}``."""
        ids = args.get("toolCallIds") if isinstance(args, Mapping) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return ToolResult(
                "context_tree_query: toolCallIds must be an array of strings "
                '(e.g. {"toolCallIds": ["t12"]}).',
                {"results": {}},
                is_error=True,
            )
        return self.query(ids)

    def query(self, ids: list[str]) -> ToolResult:
        """The blocks for ``ids`` in order, joined by ``---`` separators (spec 06 A.2)."""
        blocks: list[str] = []
        results: dict[str, ToolCallRecord] = {}
        digests: list[str] = []
        for id_ in ids:
            records = self.state.records_for_id(id_)
            if not records:
                page = self._page(id_)
                if page is not None:
                    record, start = page
                    results[id_] = record
                    blocks.append(self._block(id_, record, False, digests, start))
                    continue
                blocks.append(f"## toolRef: {id_}\n{_NOT_FOUND}")
                continue
            several = len(records) > 1
            for record in records:
                stamp = record.get("resultTimestamp")
                label = f"{id_}@{to_string(stamp)}" if several and stamp is not None else id_
                results[label] = record
                blocks.append(self._block(label, record, several and stamp is None, digests))
        images: tuple[dict[str, Any], ...] = ()
        if digests and self.branch is not None:
            found = branch_images(self.branch())
            images = tuple(found[d] for d in digests if d in found)
        return ToolResult("\n\n---\n\n".join(blocks), {"results": results}, images=images)

    def _page(self, id_: str) -> Optional[tuple[ToolCallRecord, tuple[int, int]]]:
        """``<ref>#<line>[.<column>]`` naming one record: that record and where its part
        starts (paging only)."""
        match = _PAGE.match(id_) if self.paging and not self.full else None
        if match is None:
            return None
        records = self.state.records_for_id(match.group(1))
        if len(records) != 1:
            return None
        return records[0], (int(match.group(2)), int(match.group(3) or 1))

    def _block(
        self,
        label: str,
        record: ToolCallRecord,
        legacy: bool,
        digests: list[str],
        start: tuple[int, int] = (1, 1),
    ) -> str:
        header = [f"## toolRef: {label}"]
        if legacy:
            header.append("Occurrence: legacy (no resultTimestamp)")
        args = jsjson.dumps(record["args"], 2) if "args" in record else "undefined"
        header += [
            f"Tool: {_field(record, 'toolName')}",
            f"Args: {args}",
            f"Status: {'ERROR' if truthy(record.get('isError')) else 'OK'}",
            f"Turn: {_field(record, 'turnIndex')}",
            "",
        ]
        # A part, and with paging a first part too (its first line may be longer than what a
        # head read holds), reads the whole output.
        raw, refused, total_lines = self._raw(record, whole=self.paging or start != (1, 1))
        digests += image_marker_digests(raw)
        if self.full:
            body = raw
        elif start != (1, 1):
            body = self._part(label, raw, *start)
        else:
            cut = truncate_head(raw, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES)
            body = cut.content
            if cut.truncated:
                total = cut.total_lines if total_lines is None else total_lines
                note = f"\n[Output truncated: {cut.output_lines}/{total} lines shown]"
                if not self.paging:
                    body += note
                elif cut.output_lines:
                    body += note + _next_note(_base_ref(label), cut.output_lines + 1, total)
                else:
                    piece = _line_piece(raw)
                    body = piece + note + _continue_note(_base_ref(label), 1, len(piece) + 1)
        if refused is not None:
            body += f"\n[Spill file not read: {refused}]"
        return "\n".join(header) + "\n" + body

    def _part(self, label: str, raw: str, first_line: int, column: int) -> str:
        """The output from 1-based line ``first_line`` (and ``column``) on, cut as a first
        part is, with a note saying what it holds and the ref of the next part."""
        ref = _base_ref(label)
        starts = _line_starts(raw)
        total = len(starts)
        if first_line > total:
            return f"[No line {first_line}: the output has {total} lines]"
        begin = starts[first_line - 1]
        line_end = raw.find("\n", begin)
        width = (len(raw) if line_end < 0 else line_end) - begin
        if column > max(width, 1):
            return f"[No column {column} in line {first_line}: it has {width} characters]"
        rest = raw[begin + column - 1 :]
        cut = truncate_head(rest, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES)
        if not cut.truncated:
            return rest
        where = f"line {first_line}" + (f" from column {column}" if column > 1 else "")
        if not cut.output_lines:
            piece = _line_piece(rest)
            return (
                piece
                + f"\n[Output part: {where}, {len(piece)} characters shown]"
                + _continue_note(ref, first_line, column + len(piece))
            )
        last = first_line + cut.output_lines - 1
        note = f"\n[Output part: {where} to line {last} of {total} shown]"
        return cut.content + note + _next_note(ref, last + 1, total)

    def _raw(
        self, record: ToolCallRecord, *, whole: bool = False
    ) -> tuple[str, Optional[str], Optional[int]]:
        """The record's output (a spill file's head only when the file is larger than the
        truncation can show, unless ``whole``), why its spill file was refused (None if it
        was not), and the whole file's line count when only its head was read."""
        spill_path = record.get("spillPath")
        if not truthy(spill_path):
            return _text(record.get("resultText")), None, None
        read = read_spill(
            spill_path,
            self.session_dir,
            self.session_id,
            self.recorded_session_dir,
            max_bytes=None if self.full or whole else DEFAULT_MAX_BYTES,
            record=record,
        )
        if read.text is not None:
            return read.text, None, (None if read.complete else read.total_lines)
        if read.refused is not None:
            _log.warning("context_tree_query: refused spill path %r: %s", spill_path, read.refused)
        else:
            _log.warning("context_tree_query: failed to read spilled output: %s", read.error)
        preview = record.get("resultPreview")
        fallback = preview if isinstance(preview, str) else _SPILL_MISSING
        return fallback, read.refused, None


def missing_refs(ids: Iterable[str], result: ToolResult) -> list[str]:
    """The ids of a call whose answer ``result`` found nothing for them (each once, in call
    order). A bare id with several occurrences is answered as ``id@timestamp`` labels."""
    found = result.details.get("results", {})
    return [
        id_
        for id_ in dict.fromkeys(ids)
        if id_ not in found and not any(label.startswith(id_ + "@") for label in found)
    ]


def _next_note(ref: str, line: int, total: int) -> str:
    return (
        f"\n[Next part (lines {line}-{total}): context_tree_query with ref `{ref}#{line}`; "
        "the parts joined with one line break are the whole output]"
    )


def _base_ref(label: str) -> str:
    """The ref a part's label (``<ref>#<line>[.<column>]``) is a part of."""
    base = _PAGE.match(label)
    return base.group(1) if base is not None else label


def _continue_note(ref: str, line: int, column: int) -> str:
    return (
        f"\n[Next part (line {line} from column {column}): context_tree_query with ref "
        f"`{ref}#{line}.{column}`; it continues the same line: join it to this part without "
        "a line break]"
    )


def _line_piece(text: str) -> str:
    """The longest start of ``text``'s first line within a part's byte budget (that line is
    longer than the budget)."""
    end = text.find("\n")
    line = text if end < 0 else text[:end]
    low, high = 1, min(len(line), DEFAULT_MAX_BYTES)  # a character is at least one byte
    while low < high:
        middle = (low + high + 1) // 2
        if utf8_len(line[:middle]) <= DEFAULT_MAX_BYTES:
            low = middle
        else:
            high = middle - 1
    return line[:low]


def _line_starts(text: str) -> list[int]:
    """Where each line starts, lines counted as :func:`truncate_head` counts them."""
    if not text:
        return []
    starts = [0]
    at = text.find("\n")
    while at != -1 and at + 1 < len(text):
        starts.append(at + 1)
        at = text.find("\n", at + 1)
    return starts
