"""`pi-condense render` against the TypeScript reference's replay vectors.

Expected bytes come from the vectors: ``render.json`` (the reference's cold render of the
final session: its ``messages`` text, and the remaining fields for ``--report``) and
``contexts.jsonl`` (every LLM call's input and output arrays, for ``--leaf`` and
``--messages``). The vectors were produced with ``compat: "reference"`` semantics, so the
command runs with ``--compat reference`` as the conformance tests do.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import shared_root
from pi_condense.cli import app
from pi_condense.cli.render_cmd import compact_count, stats_line

REPLAY = shared_root() / "conformance" / "replay"
VECTORS = sorted(p.name for p in REPLAY.iterdir() if (p / "render.json.gz").is_file())
STUB_PREFIX = "[Summarized in pruner summary, ref `"
SPILL_PREFIX = "[Oversized output spilled to file"
CHAIN_PREFIX = '<compressed-chain id="'


def _gunzip(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes())


@dataclass
class RenderJson:
    """``render.json`` split into the messages text and the report text (both exact)."""

    messages: bytes
    report: bytes
    data: dict[str, Any]


def render_json(name: str) -> RenderJson:
    text = _gunzip(REPLAY / name / "render.json.gz").rstrip(b"\n")
    head = b'{"messages":'
    assert text.startswith(head)
    cut = text.rindex(b',"pruned":')
    return RenderJson(text[len(head) : cut], b"{" + text[cut + 1 :] + b"\n", json.loads(text))


@pytest.fixture(autouse=True)
def no_user_settings(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keep the user's own Pi settings out of the default config."""
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path_factory.mktemp("agent")))


@dataclass
class Result:
    exit_code: int
    stdout: bytes
    stderr: str


def invoke(*args: str, columns: int = 200) -> Result:
    runner = CliRunner()
    result = runner.invoke(app, ["render", *args], env={"COLUMNS": str(columns)})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Result(result.exit_code, result.stdout_bytes, result.stderr)


def vector_args(name: str, *extra: str) -> list[str]:
    session = REPLAY / name / "session.jsonl.gz"
    config = REPLAY / name / "config.json"
    return [str(session), "--config", str(config), "--compat", "reference", *extra]


# ------------------------------------------------------------------------ render.json


@pytest.mark.parametrize("name", VECTORS)
def test_json_and_report_match_render_json(name: str, tmp_path: Path) -> None:
    expected = render_json(name)
    report = tmp_path / "report.json"
    result = invoke(*vector_args(name, "--json", "--report", str(report)))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected.messages
    assert report.read_bytes() == expected.report


def test_json_bytes_from_a_real_process(tmp_path: Path) -> None:
    """Through a real subprocess and an uncompressed session file: stdout holds exactly the
    bytes of JSON.stringify(messages), nothing else."""
    name = "large-default"
    session = tmp_path / "session.jsonl"
    session.write_bytes(_gunzip(REPLAY / name / "session.jsonl.gz"))
    config = REPLAY / name / "config.json"
    proc = subprocess.run(
        [
            *(sys.executable, "-c", "from pi_condense.cli import main; main()", "render"),
            *(str(session), "--config", str(config), "--compat", "reference", "--json", "--stats"),
        ],
        capture_output=True,
        timeout=120,
        check=False,
        env={**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == render_json(name).messages
    # --stats goes to stderr next to --json.
    assert proc.stderr.decode("utf-8").startswith("927.6k -> 189.8k chars (-80%)\n")


# ------------------------------------------------------------------ --leaf, --messages


@dataclass
class Calls:
    pool: dict[int, bytes]
    calls: list[dict[str, Any]]

    def array(self, keys: list[int]) -> bytes:
        return b"[" + b",".join(self.pool[k] for k in keys) + b"]"


def load_calls(name: str) -> Calls:
    pool: dict[int, bytes] = {}
    calls: list[dict[str, Any]] = []
    for line in _gunzip(REPLAY / name / "contexts.jsonl.gz").splitlines():
        record = json.loads(line)
        if "p" in record:
            pool[record["p"]] = record["json"].encode("utf-8", "surrogatepass")
        else:
            calls.append(record)
    return Calls(pool, calls)


def entry_ids(name: str) -> list[str]:
    lines = _gunzip(REPLAY / name / "session.jsonl.gz").splitlines()
    return [json.loads(line)["id"] for line in lines[1:]]


def test_leaf_renders_the_context_of_that_point() -> None:
    # large-default-restart restarts the extension before every prompt, so each call's input
    # is the session context rebuilt at the leaf it had then; its output is the render.
    name = "large-default-restart"
    vector = load_calls(name)
    ids = entry_ids(name)
    picked = [vector.calls[0], vector.calls[200], vector.calls[-1]]
    assert [c["changed"] for c in picked] == [False, True, True]
    for call in picked:
        leaf = ids[call["entries"] - 1]
        result = invoke(*vector_args(name, "--leaf", leaf, "--json"))
        assert result.exit_code == 0, result.stderr
        assert result.stdout == vector.array(call["out"]), call["call"]


@pytest.mark.parametrize(("name", "number"), [("large-default", 40), ("large-recovery-grace3", 0)])
def test_messages_render_against_the_leaf_state(name: str, number: int, tmp_path: Path) -> None:
    vector = load_calls(name)
    ids = entry_ids(name)
    changed = [c for c in vector.calls if c["changed"]]
    unchanged = [c for c in vector.calls if not c["changed"] and c["entries"] > 0]
    last = vector.calls[-1]
    for call in (changed[number], changed[-1], unchanged[-1], last):
        messages = tmp_path / f"call-{call['call']}.json"
        messages.write_bytes(vector.array(call["in"]))
        leaf = ids[call["entries"] - 1]
        result = invoke(*vector_args(name, "--leaf", leaf, "--messages", str(messages), "--json"))
        assert result.exit_code == 0, result.stderr
        assert result.stdout == vector.array(call["out"]), call["call"]


# ----------------------------------------------------------------------------- --stats


def _cc(n: int) -> str:
    """cc() of spec 08 section 8 for the sizes used here (below a million)."""
    text = str(Decimal(n) / 1000)
    return str(Decimal(text).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)) + "k"


@pytest.mark.parametrize("name", ["large-default", "large-protect-spill"])
def test_stats_is_the_default_output(name: str) -> None:
    expected = render_json(name).data
    meta = json.loads((REPLAY / name / "meta.json").read_text("utf-8"))
    by_type = meta["counts"]["byType"]
    context = by_type["message"] + by_type["custom_message:context-prune-summary"]
    rendered = expected["messages"]

    def first_text(m: dict[str, Any]) -> str:
        content = m.get("content")
        return content[0].get("text", "") if isinstance(content, list) and content else ""

    stubs = sum(
        1
        for m in rendered
        if m["role"] == "toolResult" and first_text(m).startswith((STUB_PREFIX, SPILL_PREFIX))
    )
    chains = sum(
        1 for m in rendered if m["role"] == "user" and first_text(m).startswith(CHAIN_PREFIX)
    )
    assert expected["diagnostics"] == []
    before, after = expected["beforeChars"], expected["afterChars"]
    percent = int(Decimal((1 - after / before) * 100).quantize(Decimal(1), ROUND_HALF_UP))
    result = invoke(*vector_args(name))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.decode("utf-8").splitlines() == [
        f"{_cc(before)} -> {_cc(after)} chars (-{percent}%)",
        f"stubbed {stubs} · purged 0 · chain-dropped {context - len(rendered) + chains} "
        f"in {chains} chains · swept 0",
    ]
    assert invoke(*vector_args(name, "--stats")).stdout == result.stdout


def test_stats_line_of_large_default() -> None:
    assert stats_line(928563, 190156) == "928.6k -> 190.2k chars (-80%)"


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (1250, "1.3k"),  # spec 11 section 4: toFixed rounds an exact tie away from zero
        (1005, "1.0k"),  # 1.005 is below the tie as a double
        (92000, "92.0k"),  # spec 08 section 7 examples
        (14000, "14.0k"),
        (195000, "195.0k"),
        (999, "999"),
        (0, "0"),
        (2_500_000, "2.5M"),
        (1_250_000, "1.3M"),
    ],
)
def test_compact_count(n: int, text: str) -> None:
    assert compact_count(n) == text


def test_stats_never_show_growth_as_a_reduction() -> None:
    assert stats_line(1000, 1500) == "1.0k -> 1.5k chars (-0%)"


# -------------------------------------------------------------------- no-op and config


def test_noop_prints_the_input_and_the_sentinel_report(tmp_path: Path) -> None:
    # The raw fixture has no pruner entries; with error purge off nothing can change, so the
    # render is the reference's no-op: the input bytes and beforeChars = afterChars = 0.
    cases = [
        json.loads(line)
        for line in (shared_root() / "conformance" / "session" / "context-cases.jsonl")
        .read_text("utf-8")
        .splitlines()
    ]
    case = next(c for c in cases if c["session"] == "large-session.jsonl" and c["leaf"] is None)
    config = tmp_path / "config.json"
    config.write_text('{"enabled": true, "purgeErrors": {"enabled": false}}', "utf-8")
    report = tmp_path / "report.json"
    session = shared_root() / "fixtures" / "pi-sessions" / "large-session.jsonl"
    result = invoke(str(session), "--config", str(config), "--json", "--report", str(report))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == case["messagesJson"].encode("utf-8")
    assert report.read_text("utf-8") == (
        '{"pruned":false,"beforeChars":0,"afterChars":0,"diagnostics":[]}\n'
    )
    stats = invoke(str(session), "--config", str(config)).stdout.decode("utf-8")
    assert stats.splitlines()[0].endswith("chars (-0%), unchanged")


def test_config_may_be_a_settings_file_or_the_block(tmp_path: Path) -> None:
    block = {"enabled": True, "chainCompression": {"enabled": False}}
    as_block = tmp_path / "block.json"
    as_block.write_text(json.dumps(block), "utf-8")
    as_settings = tmp_path / "settings.json"
    as_settings.write_text(json.dumps({"theme": "dark", "contextPrune": block}), "utf-8")
    session = str(REPLAY / "large-default" / "session.jsonl.gz")
    one = invoke(session, "--config", str(as_block), "--json")
    two = invoke(session, "--config", str(as_settings), "--json")
    assert one.exit_code == two.exit_code == 0
    assert one.stdout == two.stdout
    assert CHAIN_PREFIX.encode() not in one.stdout
    assert STUB_PREFIX.encode() in one.stdout
    # Without --config: Pi's settings.json in the agent dir.
    agent = Path(os.environ["PI_CODING_AGENT_DIR"])
    (agent / "settings.json").write_text(json.dumps({"contextPrune": block}), "utf-8")
    assert invoke(session, "--json").stdout == one.stdout


def test_pretty_lists_every_rendered_message() -> None:
    expected = render_json("large-default").data["messages"]
    result = invoke(*vector_args("large-default", "--pretty"))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.decode("utf-8").splitlines()
    # One line per message, then the legend; --stats is not implied.
    assert len(lines) == len(expected) + 1
    assert lines[3].split()[:3] == ["3", "*", "user"]
    assert CHAIN_PREFIX + 'b1" tools="t1,' in lines[3]
    stub = next(
        i
        for i, m in enumerate(expected)
        if m["role"] == "toolResult" and m["content"][0]["text"].startswith(STUB_PREFIX)
    )
    assert lines[stub].split()[1:4] == ["*", "toolResult", expected[stub]["toolName"]]
    with_stats = invoke(*vector_args("large-default", "--pretty", "--stats"))
    assert with_stats.stdout.decode("utf-8").splitlines()[: len(lines)] == lines
    assert with_stats.stdout.decode("utf-8").splitlines()[-2].startswith("927.6k -> 189.8k")


# ------------------------------------------------------------------------------ errors


def test_errors_exit_2(tmp_path: Path) -> None:
    session = str(REPLAY / "large-default" / "session.jsonl.gz")
    not_array = tmp_path / "object.json"
    not_array.write_text("{}", "utf-8")
    cases = [
        [str(tmp_path / "missing.jsonl")],
        [session, "--leaf", "nope"],
        [session, "--messages", str(not_array)],
        [session, "--messages", str(tmp_path / "missing.json")],
        [session, "--json", "--pretty"],
        [session, "--compat", "strict"],
        [session, "--config", str(tmp_path / "missing.json")],
    ]
    for args in cases:
        result = invoke(*args)
        assert result.exit_code == 2, args
        assert result.stdout == b"", args
        assert result.stderr.startswith("pi-condense: "), args


def test_example_is_the_bundled_session() -> None:
    session = shared_root() / "fixtures" / "pi-sessions" / "large-session.jsonl"
    bundled = invoke("--example", "--json")
    assert bundled.exit_code == 0, bundled.stderr
    assert bundled.stdout == invoke(str(session), "--json").stdout
    assert invoke().exit_code == 2  # neither SESSION nor --example
