"""Render conformance against the TypeScript reference's replay vectors.

For every vector in ``conformance/replay/``:

- the cold render of the final session equals ``render.json`` byte for byte (messages,
  ``pruned``, ``beforeChars``, ``afterChars``, diagnostics of a fresh sink);
- every recorded LLM call: the state rebuilt from the session prefix that existed at the call,
  rendering the call's ``in`` array with the vector's effective config (compat "reference"),
  serializes to exactly the recorded ``out`` bytes.

State is rebuilt once per distinct prefix length; pool messages are parsed once per vector.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import shared_root
from pi_condense.config import Config
from pi_condense.js import json as jsjson
from pi_condense.render import RenderResult, render
from pi_condense.session import SessionFile
from pi_condense.state import PrunerState

REPLAY = shared_root() / "conformance" / "replay"
VECTORS = sorted(p.name for p in REPLAY.iterdir() if (p / "contexts.jsonl.gz").is_file())


def _gunzip_text(path: Path) -> str:
    with gzip.open(path, "rb") as f:
        return f.read().decode("utf-8", errors="surrogatepass")


@dataclass
class Vector:
    name: str
    config: Config
    session: SessionFile
    pool: dict[int, str]
    calls: list[dict[str, Any]]


_CACHE: dict[str, Vector] = {}


def load_vector(conformance_dir: Path, name: str) -> Vector:
    if name not in _CACHE:
        root = conformance_dir / "replay" / name
        meta = json.loads((root / "meta.json").read_text(encoding="utf-8"))
        config = Config.from_settings_dict(meta["effectiveConfig"], compat="reference")
        session = SessionFile.parse(_gunzip_text(root / "session.jsonl.gz"))
        pool: dict[int, str] = {}
        calls: list[dict[str, Any]] = []
        for line in _gunzip_text(root / "contexts.jsonl.gz").splitlines():
            record = json.loads(line)
            if "p" in record:
                pool[record["p"]] = record["json"]
            else:
                calls.append(record)
        _CACHE[name] = Vector(name, config, session, pool, calls)
    return _CACHE[name]


def render_json(result: RenderResult) -> str:
    """The harness's ``renderJson`` line."""
    diagnostics = [d.entry_data() for d in result.diagnostics]
    return (
        f'{{"messages":{jsjson.dumps(result.messages)},'
        f'"pruned":{"true" if result.pruned else "false"},'
        f'"beforeChars":{result.before_size},"afterChars":{result.after_size},'
        f'"diagnostics":{jsjson.dumps(diagnostics)}}}'
    )


@pytest.mark.parametrize("name", VECTORS)
def test_cold_render_matches_render_json(conformance_dir: Path, name: str) -> None:
    vector = load_vector(conformance_dir, name)
    expected = _gunzip_text(conformance_dir / "replay" / name / "render.json.gz").rstrip("\n")
    state = PrunerState.from_session(vector.session)
    messages = vector.session.build_context().messages
    result = render(list(messages), state, vector.config)
    got = render_json(result)
    if got != expected:
        parsed_got, parsed_expected = json.loads(got), json.loads(expected)
        for key in ("pruned", "beforeChars", "afterChars", "diagnostics"):
            assert parsed_got[key] == parsed_expected[key], key
        for i, (a, b) in enumerate(
            zip(parsed_got["messages"], parsed_expected["messages"], strict=False)
        ):
            assert a == b, f"message {i}"
        assert len(parsed_got["messages"]) == len(parsed_expected["messages"])
    assert got == expected


@pytest.mark.parametrize("name", VECTORS)
def test_every_llm_call_matches(conformance_dir: Path, name: str) -> None:
    vector = load_vector(conformance_dir, name)
    entries = vector.session.entries
    parsed: dict[int, Any] = {}
    states: dict[int, PrunerState] = {}
    failures: list[str] = []
    for call in vector.calls:
        count = call["entries"]
        if count not in states:
            leaf = entries[count - 1]["id"] if count else None
            branch = vector.session.branch(leaf) if leaf is not None else []
            states[count] = PrunerState.from_branch(branch)
        messages = []
        for k in call["in"]:
            if k not in parsed:
                parsed[k] = jsjson.loads(vector.pool[k])
            messages.append(parsed[k])
        result = render(messages, states[count], vector.config)
        expected = "[" + ",".join(vector.pool[k] for k in call["out"]) + "]"
        got = jsjson.dumps(result.messages)
        ok = got == expected and result.pruned == call["changed"]
        if result.pruned:
            ok = ok and result.after_chars == call["outChars"]
        else:
            ok = ok and result.messages is messages
        if not ok:
            failures.append(f"call {call['call']} (entries={count}, changed={call['changed']})")
    assert not failures, f"{len(failures)}/{len(vector.calls)} calls differ: {failures[:10]}"
