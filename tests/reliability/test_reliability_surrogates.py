"""Issue 14, findings 5 and 9 (Python side): lone surrogates in ids and non-UTF-8 arguments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pi_condense.state import PrunerState
from pi_condense.tools import ContextTreeQuery
from support.sessions import session_lines

CLI = [sys.executable, "-c", "from pi_condense.cli import main; main()"]
LONE = "call\ud800x"


def record(tool_call_id: str) -> dict[str, Any]:
    return {
        "toolCallId": tool_call_id,
        "toolName": "bash",
        "args": {},
        "resultText": "THE OUTPUT",
        "isError": False,
        "turnIndex": 0,
        "timestamp": 1,
        "resultTimestamp": 5,
    }


def test_lookups_with_a_lone_surrogate_find_the_record() -> None:
    state = PrunerState()
    state.add_batch([record(LONE)])
    assert state.is_summarized(f"{LONE}@5")
    assert [r["toolCallId"] for r in state.records_for_id(LONE)] == [LONE]
    got = state.get_record(f"{LONE}@5")
    assert got is not None
    assert got["toolCallId"] == LONE
    assert state.short_ref(f"{LONE}@5") is None  # indexed without a summary ref
    text = ContextTreeQuery(state, "", "sid").execute({"toolCallIds": [LONE]}).text
    assert text.endswith("\nTHE OUTPUT")


def run(args: list[Any], tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    return subprocess.run([*CLI, *args], capture_output=True, env=env, timeout=120, check=False)


def test_printing_a_lone_surrogate_does_not_crash_the_cli(tmp_path: Path) -> None:
    lines = session_lines(2, 300)
    lines[2]["message"]["content"][0]["id"] = LONE  # the assistant's tool call
    lines[3]["message"]["toolCallId"] = LONE
    lines[1]["message"]["content"][0]["text"] = "cut \ud83d"
    path = tmp_path / "s.jsonl"
    # json.dumps escapes the lone surrogate as \ud800, valid JSON that JSON.parse accepts.
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="ascii")
    for command in (["session", "info", str(path)], ["render", str(path), "--pretty"]):
        proc = run(command, tmp_path)
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        assert b"Traceback" not in proc.stderr
    pretty = run(["render", str(path), "--pretty"], tmp_path).stdout
    assert b"cut \\ud83d" in pretty


def test_a_non_utf8_argument_is_a_clear_error(tmp_path: Path) -> None:
    missing = os.fsencode(tmp_path) + b"/caf\xe9.jsonl"
    proc = run(["session", "info", missing], tmp_path)
    assert proc.returncode == 2
    assert b"Traceback" not in proc.stderr
    assert b"caf\\udce9.jsonl" in proc.stderr


def test_an_odd_header_version_warns(tmp_path: Path) -> None:
    from pi_condense.session import SessionFile

    for version, shown in ((99, "99"), ("4-beta", '"4-beta"'), (-1, "-1")):
        lines = session_lines(1, 120)
        lines[0]["version"] = version
        text = "".join(json.dumps(x) + "\n" for x in lines)
        warnings = SessionFile.parse(text).warnings
        assert [w.kind for w in warnings] == ["odd-version"]
        assert warnings[0].line == 1
        assert f"header version {shown} is not one Pi writes" in warnings[0].reason
    lines = session_lines(1, 120)
    assert SessionFile.parse("".join(json.dumps(x) + "\n" for x in lines)).warnings == []


def test_condense_keeps_an_id_and_its_lossy_twin_apart(tmp_path: Path) -> None:
    from pi_condense.config import Config
    from pi_condense.render import render
    from pi_condense.session import SessionFile

    twin = LONE.replace("\ud800", "\ufffd")
    lines = session_lines(3, 3000)
    # Outputs that differ beyond the id: the content hash reads a lone surrogate as U+FFFD
    # (as Node's UTF-8 encoder does), so equal-looking outputs would be dedup aliases.
    for n, (assistant, result, call_id) in enumerate(((2, 3, LONE), (6, 7, twin))):
        lines[assistant]["message"]["content"][0]["id"] = call_id
        lines[result]["message"]["toolCallId"] = call_id
        lines[result]["message"]["content"][0]["text"] = f"output {n} of {call_id} " * 200
    source = tmp_path / "s.jsonl"
    source.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="ascii")
    out = tmp_path / "out.jsonl"
    proc = run(["condense", str(source), "-o", str(out), "-q"], tmp_path)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    session = SessionFile.load(out)
    state = PrunerState.from_session(session)
    keys = [
        f"{LONE}@{lines[3]['message']['timestamp']}",
        f"{twin}@{lines[7]['message']['timestamp']}",
    ]
    refs = [state.short_ref(key) for key in keys]
    assert None not in refs
    assert refs[0] != refs[1]
    assert [state.resolve(r) for r in refs if r is not None] == keys
    tool = ContextTreeQuery(state, str(tmp_path), session.header["id"])
    for n, (call_id, ref) in enumerate(zip((LONE, twin), refs, strict=False)):
        text = tool.execute({"toolCallIds": [ref]}).text
        assert f"output {n} of {call_id} " in text
        assert f"output {1 - n} of" not in text
    messages = session.build_context().messages
    config = Config.from_settings_dict({"enabled": True, "chainCompression": {"enabled": False}})
    rendered = render(messages, state, config).messages
    stubs = {
        m["toolCallId"]: m["content"][0]["text"] for m in rendered if m["role"] == "toolResult"
    }
    assert f"`{refs[0]}`" in stubs[LONE]
    assert f"`{refs[1]}`" in stubs[twin]


def _condensed_entries(lines: list[dict[str, Any]], tmp_path: Path) -> list[Any]:
    """``condense`` of ``lines`` as entries, without what legitimately depends on the text
    of a lone surrogate (entry ids, content hashes, JSON-size metrics)."""

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in ("contentHash", "metrics")}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    tmp_path.mkdir()
    source, out = tmp_path / "s.jsonl", tmp_path / "o.jsonl"
    source.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="ascii")
    proc = run(["condense", str(source), "-o", str(out), "-q"], tmp_path)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    entries = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return [{k: v for k, v in clean(e).items() if k not in ("id", "parentId")} for e in entries]


def test_condense_with_chains_treats_lone_surrogate_ids_as_distinct_strings(
    tmp_path: Path,
) -> None:
    # Metamorphic, as tests/js/test_lone_surrogates.py: each lone surrogate swapped for its
    # private-use stand-in gives the same session, with the swap undone.
    from support.builders import swapped, unswapped

    def build(ids: list[str]) -> list[dict[str, Any]]:
        lines = session_lines(6, 3000)
        calls = iter(ids)
        n = 0
        for i, line in enumerate(lines):
            message = line.get("message", {})
            if message.get("role") != "assistant":
                continue
            for block in message["content"]:
                if block.get("type") == "toolCall":
                    call_id = next(calls)
                    block["id"] = call_id
                    result = lines[i + 1]["message"]
                    result["toolCallId"] = call_id
                    # Distinct beyond the id (else the U+FFFD twin is a dedup alias, as
                    # the content hash reads a lone surrogate as U+FFFD).
                    result["content"][0]["text"] = f"out {n} {call_id} " * 150
                    n += 1
        return lines

    ids = ["c\ud800", "c\ufffd", "c\udfff\ud801", "\udc00", "x\ud83d", "y"]
    ours = _condensed_entries(build(ids), tmp_path / "a")
    theirs = unswapped(_condensed_entries(build(swapped(ids)), tmp_path / "b"))
    assert ours == theirs
    chains = [e["data"] for e in ours if e.get("customType") == "context-prune-chain"]
    assert chains  # the session's closed chains were compressed
    dropped = [i for chain in chains for i in chain["droppedToolCallIds"]]
    assert set(dropped) <= set(ids)
