"""``context_tree_query``: give the model back the original output of summarized tool calls.

Registration strings and the output format are the reference's, byte for byte (spec 06
part A): they reach the model. Each requested id (short ref ``tN``, occurrence key
``id@ts`` or raw provider id) becomes one block per matching record; a raw id that was
reused yields every occurrence, dedup aliases included, labelled ``id@<resultTimestamp>``.

Spilled outputs are read back from their sidecar file, but only from inside the session's
blob directory (see :mod:`pi_condense.tools.spill_access`); a refused path falls back to the
stored preview and the block says why.

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
from ..js.values import to_string, truthy
from ..state import PrunerState, ToolCallRecord
from .base import ToolResult, ToolSpec
from .spill_access import read_spill
from .truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, truncate_head

__all__ = ["QUERY_TOOL", "ContextTreeQuery"]

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
        branch: Optional[Callable[[], Iterable[Any]]] = None,
    ) -> None:
        self.full = full
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

    def _block(self, label: str, record: ToolCallRecord, legacy: bool, digests: list[str]) -> str:
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
        raw, refused, total_lines = self._raw(record)
        digests += image_marker_digests(raw)
        if self.full:
            body = raw
        else:
            cut = truncate_head(raw, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES)
            body = cut.content
            if cut.truncated:
                total = cut.total_lines if total_lines is None else total_lines
                body += f"\n[Output truncated: {cut.output_lines}/{total} lines shown]"
        if refused is not None:
            body += f"\n[Spill file not read: {refused}]"
        return "\n".join(header) + "\n" + body

    def _raw(self, record: ToolCallRecord) -> tuple[str, Optional[str], Optional[int]]:
        """The record's output (a spill file's head only when the file is larger than the
        truncation can show), why its spill file was refused (None if it was not), and the
        whole file's line count when only its head was read."""
        spill_path = record.get("spillPath")
        if not truthy(spill_path):
            return _text(record.get("resultText")), None, None
        read = read_spill(
            spill_path,
            self.session_dir,
            self.session_id,
            self.recorded_session_dir,
            max_bytes=None if self.full else DEFAULT_MAX_BYTES,
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
