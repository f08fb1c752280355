"""Synthetic large Pi sessions for the benchmarks: real sessions scaled x N.

A source session (a raw fixture from ``tests/data/fixtures/pi-sessions``, or the session a replay
vector of the TypeScript reference left behind, pruner entries and all) is repeated ``copies``
times as one linear branch. Every copy is rewritten so that it reads as a new stretch of the
same conversation rather than a duplicate:

- entry ids are fresh (``00000001``, ...) and each copy's root hangs off the previous copy's
  last entry; entry and message timestamps move forward by a whole number of days per copy
  (more than the source's span, so no timestamp of one copy equals one of another);
- tool-call ids are fresh per copy (same prefix and shape, new characters), everywhere they
  occur: toolCall blocks, toolResults, index records, summary refs, dedup aliases, chain
  entries (``droppedToolCallIds``, ``protectedToolCallIds``, occurrence keys ``id@ts``) and the
  frontier;
- short refs ``tN`` and block ids ``bN`` are renumbered past the previous copy's (in summary
  refs and texts, chain ``toolRefs`` / ``blockId`` / range summaries, backfilled refs);
- prose varies slightly: three common words per copy (chosen by the copy number) are
  capitalized in message texts, thinking, tool output, record bodies and summaries. The words
  never occur in the texts render itself writes (stubs, chain wrappers), so the rewrite can be
  applied to the reference's own render output to predict ours (:func:`expected_render`).

Copies share no tool-call id, key, ref, block id or timestamp, so the pruner state of the
scaled session is ``copies`` times the state of the source, and the render of the scaled
context is the concatenation of the rewritten renders of each copy. :func:`expected_render`
builds that expectation from ``render.json`` of the ``large-default`` replay vector (written
by the reference): the pruned benchmarks check their output against it, not against our own.

Generated files are cached under ``$PI_CONDENSE_BENCH_CACHE`` (default: the temp dir's
``pi-condense-bench``), keyed by source, source digest, copies and generator version.

Run ``python benches/generate.py --help`` to generate or verify a session by hand.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache, cached_property, lru_cache
from pathlib import Path
from typing import Any, Callable, Optional

from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.js import time as jstime
from pi_condense.keys import occ_key, parse_occ_key
from pi_condense.session import SessionFile
from pi_condense.state import PrunerState

GENERATOR_VERSION = 1
"""Bump when the output of the generator changes (it is part of the cache key)."""

DAY_MS = 86_400_000

# Words whose capitalization varies per copy. None of them occurs in a text render writes
# itself (stub templates, <compressed-chain ...> wrappers, <protected-output tool="...">,
# the purge marker), which is what keeps expected_render exact.
VARY_WORDS = (
    "the",
    "and",
    "function",
    "const",
    "return",
    "import",
    "export",
    "string",
    "value",
    "message",
    "session",
    "theme",
    "type",
    "new",
    "for",
    "if",
    "not",
    "be",
    "of",
    "are",
)
WORDS_PER_COPY = 3

_SUMMARY_STUB = re.compile(
    r"\[Summarized in pruner summary, ref `(?P<ref>[^`]*)`\. "
    r"Use context_tree_query to retrieve full output\.\]"
)
_SPILL_STUB = re.compile(
    r"\[Oversized output spilled to file — (?P<bytes>[^ ]*) bytes\.\]\n"
    r"Tool: (?P<tool>.*)\n"
    r"Preview \(head\):\n(?P<preview>.*)\n"
    r"Full output — read this file \(offset/limit supported\): (?P<path>.*)\n"
    r"Or use context_tree_query with ref `(?P<ref>[^`]*)`\.",
    re.DOTALL,
)
_CHAIN_HEAD = re.compile(r'<compressed-chain id="(?P<id>[^"]*)" tools="(?P<tools>[^"]*)">\n')
_CHAIN_TAIL = "\n</compressed-chain>"
_PROTECTED_OPEN = '\n\n<protected-output tool="'
_REF_IN_TEXT = re.compile(r"`([tb])([0-9]+)`|\{b([0-9]+)\}")
_SHORT_REF = re.compile(r"t([0-9]+)")
_BLOCK_ID = re.compile(r"b([0-9]+)")
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_HEADER_KEYS = ("type", "version", "id", "timestamp", "cwd")


# ------------------------------------------------------------------------------ sources


def shared_root() -> Path:
    """The test material: ``$PI_CONDENSE_SHARED`` when it names a directory (the project's
    shared/ folder), else the repository's ``tests/data`` (see its README)."""
    env = os.environ.get("PI_CONDENSE_SHARED")
    if env and Path(env).is_dir():
        return Path(env)
    return Path(__file__).resolve().parents[1] / "tests" / "data"


REPLAY_VECTOR = "large-default"
"""The replay vector whose final (pruned) session is scaled for the pruned benchmarks."""


def source_path(name: str) -> Path:
    """Path of a source session: a fixture name (``large-session``, ``before-compaction``) or
    ``large-default`` (the pruned session of that replay vector, gzip'd)."""
    root = shared_root()
    if name == REPLAY_VECTOR:
        return root / "conformance" / "replay" / REPLAY_VECTOR / "session.jsonl.gz"
    path = root / "fixtures" / "pi-sessions" / f"{name}.jsonl"
    for candidate in (path, path.with_name(f"{path.name}.gz")):
        if candidate.is_file():
            return candidate
    raise ValueError(f"unknown source session {name!r} ({path}[.gz] does not exist)")


def read_source(name: str) -> bytes:
    """The source session's bytes (gunzipped)."""
    path = source_path(name)
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def cache_dir() -> Path:
    """Where generated sessions are kept between runs."""
    env = os.environ.get("PI_CONDENSE_BENCH_CACHE")
    return Path(env) if env else Path(tempfile.gettempdir()) / "pi-condense-bench"


def vector_config() -> Config:
    """The effective config of the replay vector, read as the conformance tests read it."""
    meta_path = shared_root() / "conformance" / "replay" / REPLAY_VECTOR / "meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    return Config.from_settings_dict(meta["effectiveConfig"], compat="reference")


def vector_render() -> dict[str, Any]:
    """``render.json`` of the replay vector: the reference's cold render of its session."""
    path = shared_root() / "conformance" / "replay" / REPLAY_VECTOR / "render.json.gz"
    data: dict[str, Any] = jsjson.loads(gzip.decompress(path.read_bytes()))
    return data


# ----------------------------------------------------------------------------- rewriting


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class SourceFacts:
    """What the rewrite needs to know about the source session."""

    span_days: int
    """Copies are this many days apart (more than the source's time span)."""
    short_refs: int
    """Highest ``tN`` used by the source (copy ``k`` adds ``k * short_refs``)."""
    blocks: int
    """Highest ``bN`` used by the source (copy ``k`` adds ``k * blocks``)."""


class CopyRewriter:
    """Rewrites entries and messages of the source into copy number ``k``."""

    def __init__(self, k: int, facts: SourceFacts) -> None:
        self.k = k
        self.shift = k * facts.span_days * DAY_MS
        self.ref_offset = k * facts.short_refs
        self.block_offset = k * facts.blocks
        self._ids: dict[str, str] = {}
        self._used: set[str] = set()
        words = [VARY_WORDS[(k * 7 + 3 * i) % len(VARY_WORDS)] for i in range(WORDS_PER_COPY)]
        self._vary_re = re.compile(r"\b(" + "|".join(sorted(set(words))) + r")\b")

    # ---- scalars

    def tool_id(self, old: str) -> str:
        """A fresh tool-call id for ``old`` in this copy: same prefix and shape."""
        new = self._ids.get(old)
        if new is None:
            cut = old.find("_") + 1
            salt = 0
            while True:
                seed = f"{self.k}:{salt}:{old}".encode("utf-8", "surrogatepass")
                digest = hashlib.sha256(seed).digest()
                while len(digest) < len(old):
                    digest += hashlib.sha256(digest).digest()
                chars = [
                    _ALNUM[digest[i] % len(_ALNUM)] if c.isascii() and c.isalnum() else c
                    for i, c in enumerate(old[cut:], start=cut)
                ]
                new = old[:cut] + "".join(chars)
                if new not in self._used:
                    break
                salt += 1
            self._ids[old] = new
            self._used.add(new)
        return new

    def time(self, value: Any) -> Any:
        """A numeric timestamp moved into this copy (anything else unchanged)."""
        return value + self.shift if _is_number(value) else value

    def iso(self, value: Any) -> Any:
        """An ISO timestamp moved into this copy (unparsable text unchanged)."""
        if not isinstance(value, str):
            return value
        ms = jstime.date_parse(value)
        return value if ms != ms else jstime.to_iso_string(ms + self.shift)

    def key(self, key: Any) -> Any:
        """An occurrence key ``id@ts`` (or a bare id) with both parts rewritten."""
        if not isinstance(key, str):
            return key
        tool_call_id, ts = parse_occ_key(key)
        return occ_key(self.tool_id(tool_call_id), ts + self.shift if ts is not None else None)

    def short_ref(self, ref: Any) -> Any:
        m = _SHORT_REF.fullmatch(ref) if isinstance(ref, str) else None
        return f"t{int(m.group(1)) + self.ref_offset}" if m else ref

    def block_id(self, block: Any) -> Any:
        m = _BLOCK_ID.fullmatch(block) if isinstance(block, str) else None
        return f"b{int(m.group(1)) + self.block_offset}" if m else block

    # ---- texts

    def vary(self, text: Any) -> Any:
        """Prose with this copy's words capitalized."""
        if not isinstance(text, str):
            return text
        return self._vary_re.sub(_capitalize, text)

    def _renumber(self, m: re.Match[str]) -> str:
        if m.group(3) is not None:
            return "{b" + str(int(m.group(3)) + self.block_offset) + "}"
        offset = self.ref_offset if m.group(1) == "t" else self.block_offset
        return f"`{m.group(1)}{int(m.group(2)) + offset}`"

    def pruner_text(self, text: Any) -> Any:
        """A text the pruner wrote (summary, range summary): refs renumbered, prose varied."""
        if not isinstance(text, str):
            return text
        return self._vary_re.sub(_capitalize, _REF_IN_TEXT.sub(self._renumber, text))

    def spill_path(self, path: Any, key: str) -> Any:
        """A sidecar path renamed after the rewritten occurrence key."""
        if not isinstance(path, str):
            return path
        head, sep, _ = path.replace("\\", "/").rpartition("/")
        return f"{head}{sep}{re.sub(r'[^A-Za-z0-9_-]', '_', key)}.txt" if sep else path

    # ---- messages

    def blocks(self, content: Any) -> Any:
        if isinstance(content, str):
            return self.vary(content)
        if not isinstance(content, list):
            return content
        out: list[Any] = []
        for block in content:
            if not isinstance(block, dict):
                out.append(block)
                continue
            kind = block.get("type")
            new = dict(block)
            if kind == "text":
                new["text"] = self.vary(block.get("text"))
            elif kind == "thinking":
                new["thinking"] = self.vary(block.get("thinking"))
            elif kind == "toolCall" and isinstance(block.get("id"), str):
                new["id"] = self.tool_id(block["id"])
            out.append(new)
        return out

    def summary_details(self, details: Any) -> Any:
        if not isinstance(details, dict):
            return details
        new = dict(details)
        refs = details.get("toolCallRefs")
        if isinstance(refs, list):
            new["toolCallRefs"] = [self.ref(r) for r in refs]
        ids = details.get("toolCallIds")
        if isinstance(ids, list):
            new["toolCallIds"] = [self.tool_id(i) if isinstance(i, str) else i for i in ids]
        if "timestamp" in details:
            new["timestamp"] = self.time(details["timestamp"])
        return new

    def ref(self, ref: Any) -> Any:
        """A ``{shortId, toolCallId, resultTimestamp?}`` summary ref."""
        if not isinstance(ref, dict):
            return ref
        new = dict(ref)
        if "shortId" in ref:
            new["shortId"] = self.short_ref(ref["shortId"])
        if isinstance(ref.get("toolCallId"), str):
            new["toolCallId"] = self.tool_id(ref["toolCallId"])
        if "resultTimestamp" in ref:
            new["resultTimestamp"] = self.time(ref["resultTimestamp"])
        return new

    def message(self, message: Any) -> Any:
        """A context message (as a session ``message`` entry or the context holds it)."""
        if not isinstance(message, dict):
            return message
        new = dict(message)
        role = message.get("role")
        if "timestamp" in message:
            new["timestamp"] = self.time(message["timestamp"])
        if role in ("user", "assistant", "toolResult"):
            new["content"] = self.blocks(message.get("content"))
        if role == "toolResult" and isinstance(message.get("toolCallId"), str):
            new["toolCallId"] = self.tool_id(message["toolCallId"])
        if role == "custom" and message.get("customType") == "context-prune-summary":
            new["content"] = self._summary_content(message.get("content"))
            new["details"] = self.summary_details(message.get("details"))
        return new

    def _summary_content(self, content: Any) -> Any:
        if isinstance(content, list):
            return [
                {**b, "text": self.pruner_text(b.get("text"))} if isinstance(b, dict) else b
                for b in content
            ]
        return self.pruner_text(content)

    # ---- pruner entries

    def record(self, record: Any) -> Any:
        if not isinstance(record, dict):
            return record
        new = dict(record)
        old_id = record.get("toolCallId")
        if isinstance(old_id, str):
            new["toolCallId"] = self.tool_id(old_id)
        new["resultText"] = self.vary(record.get("resultText"))
        for field in ("timestamp", "resultTimestamp"):
            if field in record:
                new[field] = self.time(record[field])
        if "resultPreview" in record:
            new["resultPreview"] = self.vary(record["resultPreview"])
        if "spillPath" in record and isinstance(old_id, str):
            ts = record.get("resultTimestamp")
            key = self.key(occ_key(old_id, ts if _is_number(ts) else None))
            new["spillPath"] = self.spill_path(record["spillPath"], key)
        return new

    def custom_data(self, custom_type: Any, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        new = dict(data)
        if custom_type == "context-prune-index":
            if isinstance(data.get("toolCalls"), list):
                new["toolCalls"] = [self.record(r) for r in data["toolCalls"]]
            if isinstance(data.get("refs"), list):
                new["refs"] = [self.ref(r) for r in data["refs"]]
        elif custom_type == "context-prune-dedup-alias":
            for id_field, ts_field in (
                ("newToolCallId", "newResultTimestamp"),
                ("originalToolCallId", "originalResultTimestamp"),
            ):
                if isinstance(data.get(id_field), str):
                    new[id_field] = self.tool_id(data[id_field])
                if ts_field in data:
                    new[ts_field] = self.time(data[ts_field])
        elif custom_type == "context-prune-chain":
            new["blockId"] = self.block_id(data.get("blockId"))
            for field in ("startUserTimestamp", "finalAssistantTimestamp", "compressedAt"):
                if field in data:
                    new[field] = self.time(data[field])
            for field in ("droppedToolCallIds", "protectedToolCallIds"):
                if isinstance(data.get(field), list):
                    new[field] = [self.key(i) for i in data[field]]
            if isinstance(data.get("droppedOccurrenceKeys"), list):
                new["droppedOccurrenceKeys"] = [self.key(i) for i in data["droppedOccurrenceKeys"]]
            if isinstance(data.get("toolRefs"), list):
                new["toolRefs"] = [self.short_ref(r) for r in data["toolRefs"]]
            if "rangeSummaryText" in data:
                new["rangeSummaryText"] = self.pruner_text(data["rangeSummaryText"])
        elif custom_type == "context-prune-frontier":
            if isinstance(data.get("lastAttemptedToolCallId"), str):
                new["lastAttemptedToolCallId"] = self.tool_id(data["lastAttemptedToolCallId"])
            if "lastAttemptedTimestamp" in data:
                new["lastAttemptedTimestamp"] = self.time(data["lastAttemptedTimestamp"])
        elif custom_type == "context-prune-flush-metrics" and "ts" in data:
            new["ts"] = self.time(data["ts"])
        return new

    def entry(
        self, entry: Mapping[str, Any], ids: Callable[[Any], Any], root_parent: Optional[str]
    ) -> dict[str, Any]:
        """A session entry; ``ids`` maps entry ids (``id``, ``parentId`` and references), a
        root entry's parent becomes ``root_parent``."""
        new = dict(entry)
        new["id"] = ids(entry.get("id"))
        parent = entry.get("parentId")
        new["parentId"] = root_parent if parent is None else ids(parent)
        new["timestamp"] = self.iso(entry.get("timestamp"))
        kind = entry.get("type")
        if kind == "message":
            new["message"] = self.message(entry.get("message"))
        elif kind == "custom":
            new["data"] = self.custom_data(entry.get("customType"), entry.get("data"))
        elif kind == "custom_message" and entry.get("customType") == "context-prune-summary":
            new["content"] = self._summary_content(entry.get("content"))
            new["details"] = self.summary_details(entry.get("details"))
        elif kind == "compaction":
            new["firstKeptEntryId"] = ids(entry.get("firstKeptEntryId"))
        elif kind == "branch_summary":
            new["fromId"] = ids(entry.get("fromId"))
        elif kind == "label":
            new["targetId"] = ids(entry.get("targetId"))
        return new

    # ---- render output (for expected_render)

    def rendered(self, message: Any) -> Any:
        """A message of the reference's render output, as it renders in this copy."""
        if not isinstance(message, dict):
            return message
        role = message.get("role")
        content = message.get("content")
        text = _first_text(content)
        if role == "toolResult" and text is not None:
            stub = self._stub(text, message)
            if stub is not None:
                new = dict(message)
                new["toolCallId"] = self.tool_id(message["toolCallId"])
                if "timestamp" in message:
                    new["timestamp"] = self.time(message["timestamp"])
                new["content"] = [{"type": "text", "text": stub}]
                return new
        if role == "user" and text is not None and _CHAIN_HEAD.match(text):
            new = dict(message)
            new["timestamp"] = self.time(message.get("timestamp"))
            new["content"] = [{"type": "text", "text": self._synthetic(text)}]
            return new
        return self.message(message)

    def _ref_or_id(self, ref: str, tool_call_id: str) -> str:
        return self.tool_id(ref) if ref == tool_call_id else self.short_ref(ref)

    def _stub(self, text: str, message: dict[str, Any]) -> Optional[str]:
        tool_call_id = message.get("toolCallId")
        if not isinstance(tool_call_id, str):
            return None
        m = _SUMMARY_STUB.fullmatch(text)
        if m:
            ref = self._ref_or_id(m.group("ref"), tool_call_id)
            return text[: m.start("ref")] + ref + text[m.end("ref") :]
        m = _SPILL_STUB.fullmatch(text)
        if m:
            ts = message.get("timestamp")
            key = self.key(occ_key(tool_call_id, ts if _is_number(ts) else None))
            parts = {
                "preview": self.vary(m.group("preview")),
                "path": self.spill_path(m.group("path"), key),
                "ref": self._ref_or_id(m.group("ref"), tool_call_id),
            }
            out, last = [], 0
            for name in ("preview", "path", "ref"):
                out += [text[last : m.start(name)], parts[name]]
                last = m.end(name)
            return "".join([*out, text[last:]])
        return None

    def _synthetic(self, text: str) -> str:
        head = _CHAIN_HEAD.match(text)
        assert head is not None
        assert text.endswith(_CHAIN_TAIL)
        tools = ",".join(self.short_ref(r) for r in head.group("tools").split(",") if r)
        rest = text[head.end() : -len(_CHAIN_TAIL)]
        body, sep, protected = rest.partition(_PROTECTED_OPEN)
        return (
            f'<compressed-chain id="{self.block_id(head.group("id"))}" tools="{tools}">\n'
            + str(self.pruner_text(body))
            + sep
            + str(self.vary(protected))
            + _CHAIN_TAIL
        )


def _capitalize(m: re.Match[str]) -> str:
    return m.group(1).capitalize()


def _first_text(content: Any) -> Optional[str]:
    if isinstance(content, list) and content and isinstance(content[0], dict):
        text = content[0].get("text")
        return text if isinstance(text, str) else None
    return None


# ------------------------------------------------------------------------------ scaling


def _facts(session: SessionFile) -> SourceFacts:
    times: list[float] = []
    for entry in session.entries:
        ms = jstime.date_parse(entry.get("timestamp", ""))
        if ms == ms:
            times.append(ms)
        message = entry.get("message")
        if isinstance(message, dict) and _is_number(message.get("timestamp")):
            times.append(message["timestamp"])
        data = entry.get("data")
        if isinstance(data, dict):
            times += [data[k] for k in ("compressedAt", "ts") if _is_number(data.get(k))]
    span = (max(times) - min(times)) if times else 0
    state = PrunerState.from_session(session)
    return SourceFacts(
        span_days=int(span // DAY_MS) + 2,
        short_refs=int(state.next_short_ref_number) - 1,
        blocks=int(state.next_block_number) - 1,
    )


def scale_lines(source: bytes, copies: int, *, salt: str = "") -> Iterator[str]:
    """The lines (without newline) of the source session repeated ``copies`` times."""
    session = SessionFile.parse(source)
    facts = _facts(session)
    legacy = not isinstance(session.header.get("version"), int) or session.header["version"] < 3
    seed = hashlib.sha256(source).hexdigest() + f":{copies}:{salt}"
    header = {
        "type": "session",
        "version": 3,
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, "pi-condense-bench:" + seed)),
        "timestamp": session.header.get("timestamp"),
        "cwd": session.header.get("cwd", ""),
    }
    yield jsjson.dumps(header)
    counter = 0
    previous_last: Optional[str] = None
    for k in range(copies):
        rewriter = CopyRewriter(k, facts)
        entry_ids: dict[str, str] = {}

        def ids(old: Any, entry_ids: dict[str, str] = entry_ids) -> Any:
            return entry_ids.get(old, old) if isinstance(old, str) else old

        for entry in session.entries:
            counter += 1
            entry_ids[entry["id"]] = f"{counter:08x}"
        for entry in session.entries:
            new = rewriter.entry(entry, ids, previous_last)
            if legacy:
                new = {"type": new["type"], "id": new["id"], "parentId": new["parentId"], **new}
            yield jsjson.dumps(new)
        previous_last = entry_ids[session.entries[-1]["id"]] if session.entries else previous_last


def scaled_session(source: str, copies: int) -> Path:
    """Path of the cached scaled session (generated on first use)."""
    data = read_source(source)
    digest = hashlib.sha256(data).hexdigest()[:12]
    path = cache_dir() / f"{source}-x{copies}-{digest}-g{GENERATOR_VERSION}.jsonl"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with tmp.open("w", encoding="utf-8", errors="surrogatepass", newline="\n") as f:
            for line in scale_lines(data, copies):
                f.write(line)
                f.write("\n")
        os.replace(tmp, path)
    return path


@lru_cache(maxsize=1)
def expected_render(copies: int) -> list[Any]:
    """The render of the scaled ``large-default`` context, predicted from the reference's
    ``render.json``: each copy's rewrite of the reference's output, concatenated."""
    session = SessionFile.parse(read_source(REPLAY_VECTOR))
    facts = _facts(session)
    messages = vector_render()["messages"]
    out: list[Any] = []
    for k in range(copies):
        rewriter = CopyRewriter(k, facts)
        out += [rewriter.rendered(m) for m in messages]
    return out


# ---------------------------------------------------------------------------- workloads


@dataclass
class Workload:
    """A scaled session loaded for benchmarking: file lines, branch, context, state."""

    source: str
    copies: int
    path: Path

    @cached_property
    def data(self) -> bytes:
        return self.path.read_bytes()

    @cached_property
    def lines(self) -> list[bytes]:
        """The file's lines (what ``orjson.loads`` is measured on)."""
        return self.data.splitlines()

    @cached_property
    def session(self) -> SessionFile:
        return SessionFile.parse(self.data)

    @cached_property
    def branch(self) -> list[dict[str, Any]]:
        return self.session.branch()

    @cached_property
    def messages(self) -> list[Any]:
        return self.session.build_context().messages

    @cached_property
    def state(self) -> PrunerState:
        return PrunerState.from_branch(self.branch)


def load_workload(source: str, copies: int) -> Workload:
    """The scaled session ``source`` x ``copies`` (generated and cached on first use)."""
    return Workload(source, copies, scaled_session(source, copies))


# ------------------------------------------------------------------------------- checks


@dataclass(frozen=True)
class SourceCounts:
    """Sizes of a source session's state and context, to compare a scaled one against."""

    records: int
    aliases: int
    summaries: int
    chains: int
    branch: int
    messages: int
    short_refs: int
    """Highest ``tN`` the source allocated."""
    blocks: int
    """Highest ``bN`` the source issued."""


@cache
def source_counts(source: str) -> SourceCounts:
    session = SessionFile.parse(read_source(source))
    state = PrunerState.from_session(session)
    index = state.index
    return SourceCounts(
        records=index.record_count,
        aliases=index.alias_count,
        summaries=index.summary_count,
        chains=index.chain_count,
        branch=len(session.branch()),
        messages=len(session.build_context().messages),
        short_refs=int(state.next_short_ref_number) - 1,
        blocks=int(state.next_block_number) - 1,
    )


def verify(workload: Workload) -> list[str]:
    """Sanity problems of a scaled session (empty when sane).

    The state must hold ``copies`` times the source's records, aliases, summary bodies and
    chains, with refs and block ids continuing across copies; the branch must be ``copies``
    times as long; for a session without compactions, so must the context. For the pruned
    source, rendering the scaled context must give :func:`expected_render`.
    """
    from pi_condense.render import render

    problems: list[str] = []
    base = source_counts(workload.source)
    n = workload.copies
    index = workload.state.index
    for name, got, want in (
        ("records", index.record_count, base.records * n),
        ("aliases", index.alias_count, base.aliases * n),
        ("summary bodies", index.summary_count, base.summaries * n),
        ("chains", index.chain_count, base.chains * n),
        ("branch entries", len(workload.branch), base.branch * n),
        ("next short ref", index.next_short_ref_number, base.short_refs * n + 1),
        ("next block id", index.next_block_number, base.blocks * n + 1),
    ):
        if got != want:
            problems.append(f"{name}: {got}, expected {want}")
    compacted = any(e.get("type") == "compaction" for e in workload.branch)
    if not compacted and len(workload.messages) != base.messages * n:
        problems.append(f"context messages: {len(workload.messages)}, expected {base.messages * n}")
    if workload.source == REPLAY_VECTOR:
        result = render(workload.messages, workload.state, vector_config())
        if not result.pruned:
            problems.append("render of the scaled context did not prune")
        elif result.messages != expected_render(n):
            problems.append("render of the scaled context differs from the expected render")
        if result.after_chars >= result.before_chars:
            problems.append(
                f"render grew the context: {result.before_chars} -> {result.after_chars}"
            )
    return problems


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Generate (and verify) a scaled Pi session.")
    parser.add_argument("--source", default=REPLAY_VECTOR, help="large-default | fixture name")
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--verify", action="store_true", help="check the scaled session")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    workload = load_workload(args.source, args.copies)
    size = workload.path.stat().st_size
    print(f"{workload.path} ({size / 1e6:.1f} MB, {time.perf_counter() - started:.1f} s)")
    if args.verify:
        print(f"{len(workload.branch)} entries, {len(workload.messages)} context messages")
        problems = verify(workload)
        for problem in problems:
            print(f"problem: {problem}", file=sys.stderr)
        print("sane" if not problems else f"{len(problems)} problem(s)")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
