"""`pi-condense tree`: the pruned tool calls of a session, grouped under their summaries and
the chains that compressed them (the `/pruner tree` browser, printed).

Summary and tool-call labels are the reference's (``buildPruneTree``). Ours on top: a summary
whose every call a compressed chain dropped is shown under that chain's node. On a terminal
the tree is drawn with rich; piped, it is plain text indented by two spaces per level.
"""

from __future__ import annotations

import datetime
import re
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.text import Text
from rich.tree import Tree

from .. import keys
from ..js import json as jsjson
from ..state import PrunerState
from ..status import cc
from ._common import (
    check_leaf,
    exit_for_warnings,
    json_option,
    leaf_option,
    out,
    plural,
    print_warnings,
    read_session,
    strict_option,
)

__all__ = ["prune_tree", "tree_command", "tree_lines"]

SUMMARY = "context-prune-summary"
NO_ROOTS = "No pruned tool calls found in this session."
_WS = re.compile(r"\s+")


def locale_time(ms: float) -> str:
    """``new Date(ms).toLocaleString()`` in the en-US form (local time zone)."""
    when = datetime.datetime.fromtimestamp(ms / 1000)
    hour = when.hour % 12 or 12
    half = "AM" if when.hour < 12 else "PM"
    return f"{when.month}/{when.day}/{when.year}, {hour}:{when.minute:02}:{when.second:02} {half}"


def _normalized_refs(details: Any) -> list[dict[str, Any]]:
    """``normalizeSummaryToolCallRefs``."""
    if not isinstance(details, dict):
        return []
    refs = details.get("toolCallRefs")
    if isinstance(refs, list):
        out = []
        for ref in refs:
            if (
                isinstance(ref, dict)
                and isinstance(ref.get("shortId"), str)
                and isinstance(ref.get("toolCallId"), str)
            ):
                stamp = ref.get("resultTimestamp")
                number = (
                    stamp
                    if isinstance(stamp, (int, float)) and not isinstance(stamp, bool)
                    else None
                )
                out.append({"toolCallId": ref["toolCallId"], "resultTimestamp": number})
        return out
    ids = details.get("toolCallIds")
    if isinstance(ids, list):
        return [{"toolCallId": i, "resultTimestamp": None} for i in ids if isinstance(i, str)]
    return []


def _call_node(record: dict[str, Any]) -> dict[str, Any]:
    args = record.get("args")
    pairs = args.items() if isinstance(args, dict) else []
    arg_text = ", ".join(f"{k}={jsjson.dumps(v)}" for k, v in pairs)
    raw_text = record.get("resultText")
    text: str = raw_text if isinstance(raw_text, str) else ""
    raw_spill = record.get("spillBytes")
    spilled = raw_spill if isinstance(raw_spill, int) and not isinstance(raw_spill, bool) else 0
    count = jsjson.utf16_len(text) or spilled or 0
    unit = "chars" if text else ("bytes" if spilled else "chars")
    error = " [error]" if record.get("isError") else ""
    stored = record.get("resultPreview")
    preview: str = text or (stored if isinstance(stored, str) else "")
    return {
        "kind": "toolCall",
        "label": f"{record.get('toolName')}({arg_text}) \u00b7 {cc(count)} {unit}{error}",
        "toolCallId": record.get("toolCallId"),
        "chars": count,
        "detail": _WS.sub(" ", preview[:200]),
        "children": [],
    }


def prune_tree(branch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``buildPruneTree`` over a branch: one root per summary message, its recorded calls as
    children; summaries all of whose calls a chain dropped are grouped under that chain."""
    state = PrunerState.from_branch(branch)
    summaries: list[tuple[set[str], dict[str, Any]]] = []
    for entry in branch:
        if entry.get("type") != "custom_message" or entry.get("customType") != SUMMARY:
            continue
        details = entry.get("details")
        children = []
        calls: set[str] = set()
        for ref in _normalized_refs(details):
            key = keys.occ_key(ref["toolCallId"], ref["resultTimestamp"])
            record = state.get_record(key)
            if record is None:
                continue
            calls.add(key)
            children.append(_call_node(record))
        content = entry.get("content")
        text = content if isinstance(content, str) else ""
        original = sum(child["chars"] for child in children)
        turn = details.get("turnIndex") if isinstance(details, dict) else None
        label = (
            f"[pruner] Turn {jsjson.dumps(turn) if turn is not None else '?'} summary "
            f"({plural(len(children), 'tool')} \u00b7 {cc(jsjson.utf16_len(text))} chars "
            f"\u00b7 original {cc(original)})"
        )
        stamp = details.get("timestamp") if isinstance(details, dict) else None
        if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) and stamp:
            label += f" \u00b7 {locale_time(stamp)}"
        node = {"kind": "summary", "label": label, "summary": text, "children": children}
        summaries.append((calls, node))
    roots: list[dict[str, Any]] = []
    chains = state.chain_entries()
    placed: dict[int, dict[str, Any]] = {}
    for calls, node in summaries:
        home = None
        for number, chain in enumerate(chains):
            dropped = chain.get("droppedOccurrenceKeys") or chain.get("droppedToolCallIds") or []
            if calls and calls <= set(dropped):
                home = number
                break
        if home is None:
            roots.append(node)
            continue
        if home not in placed:
            chain = chains[home]
            dropped = chain.get("droppedOccurrenceKeys") or chain.get("droppedToolCallIds") or []
            placed[home] = {
                "kind": "chain",
                "label": f"[pruner] Chain {chain.get('blockId')} "
                f"({plural(len(dropped), 'tool call')} dropped)",
                "blockId": chain.get("blockId"),
                "children": [],
            }
            roots.append(placed[home])
        placed[home]["children"].append(node)
    for chain_node in placed.values():
        count = len(chain_node["children"])
        chain_node["label"] += f" \u00b7 {_summaries_word(count)}"
    return roots


def _summaries_word(n: int) -> str:
    return f"{n} summary" if n == 1 else f"{n} summaries"


def tree_lines(roots: list[dict[str, Any]], details: bool) -> list[str]:
    """The tree as plain text: two spaces per level, call previews one level further."""
    lines: list[str] = []

    def walk(node: dict[str, Any], depth: int) -> None:
        lines.append("  " * depth + node["label"])
        if details and node.get("detail"):
            lines.append("  " * (depth + 1) + node["detail"])
        for child in node["children"]:
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    return lines


def _rich_tree(roots: list[dict[str, Any]], details: bool) -> Tree:
    top = Tree("pruned tool calls", guide_style="dim")

    def walk(parent: Tree, node: dict[str, Any]) -> None:
        style = "bold" if node["kind"] != "toolCall" else ""
        branch = parent.add(Text(node["label"], style=style))
        if details and node.get("detail"):
            branch.add(Text(node["detail"], style="dim"))
        for child in node["children"]:
            walk(branch, child)

    for root in roots:
        walk(top, root)
    return top


def tree_command(
    session_file: Path = typer.Argument(
        ..., metavar="SESSION", help="Pi session file (.jsonl or .jsonl.gz)."
    ),
    details: bool = typer.Option(
        False, "--details", help="Show each call's result preview (first 200 chars)."
    ),
    leaf: Optional[str] = leaf_option(),
    as_json: bool = json_option(),
    strict: bool = strict_option(),
) -> None:
    """The pruned tool calls, grouped under their summaries and chains (/pruner tree)."""
    session = read_session(session_file)
    check_leaf(session, session_file, leaf)
    print_warnings(session, session_file)
    roots = prune_tree(session.branch(leaf))
    if as_json:
        sys.stdout.write(jsjson.dumps({"file": str(session_file), "roots": roots}, 2) + "\n")
    elif not roots:
        out.print(NO_ROOTS, markup=False)
    elif out.is_terminal:
        out.print(_rich_tree(roots, details), markup=False)
    else:
        sys.stdout.write("\n".join(tree_lines(roots, details)) + "\n")
    exit_for_warnings(session, strict)
