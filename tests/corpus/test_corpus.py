"""`pi_condense.corpus` and `pi-condense corpus`: scan, what-if, batch condense, the result
cache, resuming a killed run, and bad sessions, on a generated corpus with re-queries
planted at known gaps (tests/support/corpus.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pi_condense import corpus
from pi_condense.cli._common import EXAMPLE_SESSION
from pi_condense.config import Config
from pi_condense.corpus.facts import LENGTH_BUCKETS
from pi_condense.corpus.grid import expand_grid, parse_set, percentile
from pi_condense.errors import ConfigError
from pi_condense.js import json as jsjson
from pi_condense.session import SessionFile
from support import corpus as _corpus

CLI = [sys.executable, "-c", "from pi_condense.cli import main; main()"]


def run_cli(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, check=False, timeout=240, **kwargs
    )


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, _corpus.Plant]:
    root = tmp_path_factory.mktemp("corpus") / "sessions"
    return root, _corpus.make_corpus(root, 300)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, _corpus.Plant]:
    """30 sessions, 10 of them with planted re-queries (every PLANS entry once)."""
    root = tmp_path_factory.mktemp("small") / "sessions"
    return root, _corpus.make_corpus(root, 30)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------------------------ scan


def test_scan_gap_table_equals_the_plant(planted: tuple[Path, _corpus.Plant]) -> None:
    root, plant = planted
    result = corpus.scan([str(root)], engine="local", workers=2)
    assert not result.failures
    assert len(result.rows) == len(plant.paths) == 300
    gaps = result.aggregate.gaps
    planted_gaps = sorted(plant.gaps.elements())
    assert gaps.events == len(planted_gaps) == 130
    assert gaps.counts == {str(g): n for g, n in sorted(plant.gaps.items())}
    assert gaps.median == statistics.median(planted_gaps)
    for n in (0, 1, 2, 3, 5):
        assert gaps.within[str(n)] == sum(1 for g in planted_gaps if g <= n) / len(planted_gaps)
    assert gaps.query_calls == plant.query_calls
    assert gaps.query_sessions == gaps.requery_sessions == 100
    assert {r.path: r.requery_gaps for r in result.rows} == plant.gaps_by_session
    lengths = result.aggregate.lengths
    lengths_by_path = {str(p): n for p, n in zip(plant.paths, plant.lengths, strict=False)}
    assert {r.path: r.user_turn_groups for r in result.rows} == lengths_by_path
    assert lengths.median == statistics.median(plant.lengths)
    for bucket, (low, high) in zip(lengths.buckets, LENGTH_BUCKETS, strict=False):
        inside = [n for n in plant.lengths if n >= low and (high is None or n <= high)]
        assert bucket.sessions == len(inside)
    assert lengths.at_most_3 == sum(1 for n in plant.lengths if n <= 3) / 300


def test_scan_row_of_the_example_session() -> None:
    row = corpus.scan([str(EXAMPLE_SESSION)], engine="serial").rows[0]
    lines = [json.loads(line) for line in EXAMPLE_SESSION.read_text("utf-8").splitlines()]
    messages = [e["message"] for e in lines[1:] if e["type"] == "message"]
    roles: dict[str, int] = {}
    tools: dict[str, int] = {}
    for message in messages:
        roles[message["role"]] = roles.get(message["role"], 0) + 1
        for block in message["content"] if message["role"] == "assistant" else []:
            if block["type"] == "toolCall":
                tools[block["name"]] = tools.get(block["name"], 0) + 1
    assert row.entries == row.branch_length == len(lines) - 1
    assert row.bytes == EXAMPLE_SESSION.stat().st_size
    assert row.content_hash == sha(EXAMPLE_SESSION)
    assert row.messages_by_role == roles
    assert row.tool_calls_by_tool == tools
    assert row.user_turn_groups == roles["user"]
    # JSON.stringify length of the context: ASCII-only output of compact json.dumps here
    context = SessionFile.load(EXAMPLE_SESSION).build_context().messages
    assert row.context_chars == jsjson.length(context)
    assert row.pruner_entries == 0
    assert row.rendered_chars is None
    assert row.query_calls == 0
    assert row.requery_gaps == []


def test_requery_definition_per_ref_and_call() -> None:
    def call(*refs: str) -> dict[str, Any]:
        block = {"type": "toolCall", "name": "context_tree_query"}
        return {**block, "arguments": {"toolCallIds": list(refs)}}

    def entry(role: str, *blocks: dict[str, Any]) -> dict[str, Any]:
        return {"type": "message", "message": {"role": role, "content": list(blocks)}}

    branch = [
        entry("user"),
        entry("assistant", call("t1", "t1", "t2")),  # t1 named twice in one call: once
        entry("user"),
        entry("assistant", call("t1")),  # gap 1 (t1)
        entry("assistant", call()),  # no ref: not an event
        entry("user"),
        entry("user"),
        entry("assistant", call("t2", "t1")),  # gap 3 (t2), gap 1 (t1, since the last)
        entry("assistant", call("t1")),  # gap 0
    ]
    from pi_condense.corpus.facts import requery_gaps

    assert requery_gaps(branch) == [1, 3, 2, 0]


def test_scan_renders_sessions_holding_pruner_entries(
    small: tuple[Path, _corpus.Plant], tmp_path: Path
) -> None:
    plant = small[1]
    one = plant.paths[0]
    condensed = corpus.condense([str(one)], tmp_path / "out", engine="serial")
    report = condensed.rows[0].report
    row = corpus.scan([condensed.rows[0].output], engine="serial").rows[0]
    assert row.pruner_entries > 0
    context = SessionFile.load(condensed.rows[0].output).build_context().messages
    assert row.context_chars == jsjson.length(context)  # the summaries are in it
    assert row.rendered_chars == report["context"]["condensedChars"]
    assert row.rendered_chars is not None
    assert row.rendered_chars < row.context_chars


def test_discovery_files_directories_globs_and_default(
    small: tuple[Path, _corpus.Plant], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root, plant = small
    every = [str(p) for p in plant.paths]
    assert sorted(s.path for s in corpus.discover([str(root)])) == sorted(every)
    gz = corpus.discover([f"{root}/**/*.jsonl.gz"])
    assert {s.path for s in gz} == {p for p in every if p.endswith(".gz")}
    assert {s.relative for s in gz} == {
        str(Path(p).relative_to(root)) for p in every if p.endswith(".gz")
    }
    assert [s.path for s in corpus.discover([every[1], every[1]])] == [every[1]]
    agent = tmp_path / "agent"
    shutil.copytree(root, agent / "sessions")
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    assert len(corpus.discover()) == len(every)
    with pytest.raises(corpus.CorpusError, match="no such file"):
        corpus.discover([str(tmp_path / "missing")])


def test_fsspec_urls_are_read_by_the_workers(small: tuple[Path, _corpus.Plant]) -> None:
    import fsspec  # noqa: F401  (the [test] extra has it; file:// URLs need it)

    root = small[0]
    local = corpus.scan([str(root)], engine="serial")
    remote = corpus.scan([f"file://{root}"], engine="local", workers=2)
    assert [r.path for r in remote.rows] == [f"file://{r.path}" for r in local.rows]
    assert [r.model_copy(update={"path": ""}) for r in remote.rows] == [
        r.model_copy(update={"path": ""}) for r in local.rows
    ]
    gz = corpus.discover([f"file://{root}/**/*.jsonl.gz"])
    assert sorted(s.path for s in gz) == sorted(
        f"file://{p}" for p in small[1].paths if p.name.endswith(".gz")
    )


# ------------------------------------------------------------------------------ bad input


def test_malformed_sessions_are_reported_and_the_rest_complete(
    small: tuple[Path, _corpus.Plant], tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    shutil.copytree(small[0], root)
    torn = root / "torn.jsonl"
    lines = small[1].paths[0].read_text("utf-8").splitlines(keepends=True)
    torn.write_text("".join([*lines[:3], "{not json\n", *lines[3:]]), "utf-8")
    headless = root / "headless.jsonl"
    headless.write_text("\n" + "".join(lines[1:]), "utf-8")
    (root / "broken.jsonl.gz").write_bytes(b"not gzip at all")
    cache = tmp_path / "cache"
    done = run_cli("corpus", "scan", str(root), "--json", "--cache-dir", str(cache))
    assert done.returncode == 3, done.stderr
    result = json.loads(done.stdout)
    assert len(result["rows"]) == 31  # 30 + the torn one
    assert f"{torn}:4: warning: " in done.stderr
    assert f"{headless}:2: not a Pi session file" in done.stderr
    assert f"{root / 'broken.jsonl.gz'}: cannot decompress" in done.stderr
    failures = {f["path"]: f for f in result["failures"]}
    assert failures[str(headless)]["line"] == 2
    assert set(failures) == {str(headless), str(root / "broken.jsonl.gz")}
    torn_row = next(r for r in result["rows"] if r["path"] == str(torn))
    assert torn_row["problems"][0]["line"] == 4
    assert torn_row["branch_length"] == len(lines) - 1


# ---------------------------------------------------------------------------------- cache


def test_cache_second_run_only_does_new_work(
    small: tuple[Path, _corpus.Plant], tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    shutil.copytree(small[0], root)
    cache = str(tmp_path / "cache")
    first = corpus.scan([str(root)], cache_dir=cache, engine="serial")
    assert (first.computed, first.cached) == (30, 0)
    again = corpus.scan([str(root)], cache_dir=cache, engine="local", workers=2)
    assert (again.computed, again.cached) == (0, 30)
    assert again.rows == first.rows
    _corpus.write_session(root / "new.jsonl", 999, 4, [2, 3])
    (root / "--project-0--" / sorted(os.listdir(root / "--project-0--"))[0]).write_bytes(
        small[1].paths[5].read_bytes()  # changed content: a copy of another session
    )
    third = corpus.scan([str(root)], cache_dir=cache, engine="serial")
    assert (third.computed, third.cached) == (1, 30)  # the copy's content is cached already
    assert third.aggregate.gaps.events == first.aggregate.gaps.events + 1 - len(
        small[1].gaps_by_session[str(small[1].paths[0])]
    ) + len(small[1].gaps_by_session[str(small[1].paths[5])])


def test_a_killed_run_resumes_without_redoing_finished_sessions(
    planted: tuple[Path, _corpus.Plant], tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    for path in planted[1].paths[:120]:
        target = root / path.relative_to(planted[0])
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    planted_gaps = [g for p in planted[1].paths[:120] for g in planted[1].gaps_by_session[str(p)]]
    cache = tmp_path / "cache"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    args = ["corpus", "whatif", str(root), "--set", "recoveryGraceTurns=3"]
    args += ["--cache-dir", str(cache), "--json"]
    child = subprocess.Popen(
        [*CLI, *args, "--workers", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "TMPDIR": str(scratch)},  # the killed replays' scratch dirs
    )
    deadline = time.monotonic() + 120
    store = corpus_cache(cache)
    while store.count() < 15 and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    finished = store.count()
    assert 15 <= finished < 120, "the run was not killed part-way"
    done = run_cli(*args, "--workers", "2")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["cached"] == finished
    assert result["computed"] == 120 - finished
    assert store.count() == 120
    assert result["rows"][0]["sessions"] == 120
    assert result["rows"][0]["served_verbatim"] == sum(1 for g in planted_gaps if g <= 3)


def corpus_cache(path: Path) -> Any:
    from pi_condense.corpus.cache import ResultCache

    return ResultCache(path)


# --------------------------------------------------------------------------------- whatif


def test_whatif_grace_0_and_3_differ_as_planted(small: tuple[Path, _corpus.Plant]) -> None:
    root, plant = small
    result = corpus.whatif([str(root)], [("recoveryGraceTurns", [0, 3])], engine="local")
    assert not result.failures
    rows = {row.settings["recoveryGraceTurns"]: row for row in result.rows}
    gaps = sorted(plant.gaps.elements())
    assert rows[0].requeries == rows[3].requeries == len(gaps) == 13
    assert rows[0].served_verbatim == 0
    assert rows[3].served_verbatim == sum(1 for g in gaps if g <= 3) == 10
    # The grace window keeps recovered output verbatim: less is reclaimed.
    assert rows[3].after_mean > rows[0].after_mean
    assert rows[3].before_mean == rows[0].before_mean
    assert [r.settings["recoveryGraceTurns"] for r in result.rows] == [0, 3]  # most saved first
    assert rows[0].model_calls == sum(len(s.call_before) for s in result.sessions[0])
    assert rows[0].flushes > 0
    assert rows[0].summarizer_calls > 0
    calls = [n for s in result.sessions[0] for n in s.call_after]
    assert rows[0].after_p95 == percentile(calls, 0.95)
    total_before = sum(n for s in result.sessions[0] for n in s.call_before)
    assert rows[0].reclaimed_share == pytest.approx(1 - sum(calls) / total_before)


def test_served_verbatim_is_what_render_keeps(tmp_path: Path) -> None:
    """At the model call of a re-query at gap g, the earlier recovered output is in the
    rendered context verbatim exactly when g <= recoveryGraceTurns."""
    from pi_condense.config import Config
    from pi_condense.replay import ReplayOptions, replay
    from pi_condense.summarize.deterministic import DeterministicSummarizer

    path = tmp_path / "s.jsonl"
    _corpus.write_session(path, 7, 10, [2, 4, 8])  # gaps 2 and 4
    source = SessionFile.load(path)
    original = next(
        e["message"]["content"][0]["text"]
        for e in source.entries
        if e.get("message", {}).get("toolName") == "context_tree_query"
    )
    for grace, served in ((0, 0), (2, 1), (3, 1), (4, 2)):
        config = Config().with_value("enabled", True).with_value("recoveryGraceTurns", grace)
        options = ReplayOptions(session_dir=str(tmp_path), record_contexts=True)
        result = replay(source, config, DeterministicSummarizer(), options)
        verbatim_at_requery = 0
        requeries = _requery_contexts(source, result.contexts.jsonl())
        assert len(requeries) == 2
        for context in requeries:
            texts = [
                b.get("text")
                for m in context
                if m.get("role") == "toolResult" and m.get("toolName") == "context_tree_query"
                for b in m["content"]
            ]
            verbatim_at_requery += original in texts
        assert verbatim_at_requery == served
        row = corpus.whatif([str(path)], [("recoveryGraceTurns", [grace])], engine="serial")
        assert row.rows[0].served_verbatim == served


def _requery_contexts(source: SessionFile, log: str) -> list[list[dict[str, Any]]]:
    """The rendered messages of the model calls whose reply re-queried a ref: the k-th
    ``context`` call is the one before the k-th assistant message of the branch."""
    pool: dict[int, str] = {}
    calls: list[list[dict[str, Any]]] = []
    for line in log.splitlines():
        record = json.loads(line)
        if "p" in record:
            pool[record["p"]] = record["json"]
        else:
            calls.append([json.loads(pool[key]) for key in record["out"]])
    replies = [
        e["message"]
        for e in source.branch()
        if e.get("type") == "message" and e["message"]["role"] == "assistant"
    ]
    assert len(replies) == len(calls)
    found, queried = [], 0
    for messages, reply in zip(calls, replies, strict=False):
        if any(b.get("name") == "context_tree_query" for b in reply["content"]):
            if queried:
                found.append(messages)
            queried += 1
    return found


def test_parse_set_values() -> None:
    assert parse_set("recoveryGraceTurns=0,3") == ("recoveryGraceTurns", [0, 3])
    assert parse_set('protectedTools=["bash","read"],[]') == (
        "protectedTools",
        [["bash", "read"], []],
    )
    assert parse_set("batchingMode=turn,agent-message") == (
        "batchingMode",
        ["turn", "agent-message"],
    )
    with pytest.raises(ConfigError, match="expected KEY=V1,V2"):
        parse_set("recoveryGraceTurns")
    base = Config().with_value("enabled", True)
    with pytest.raises(ConfigError, match="recoveryGraceTurns=-1"):
        expand_grid(base, [("recoveryGraceTurns", [3, -1])])
    grid = expand_grid(base, [("recoveryGraceTurns", [0, 3]), ("minBatchChars", [10, 20])])
    assert [settings for settings, _ in grid] == [
        {"recoveryGraceTurns": 0, "minBatchChars": 10},
        {"recoveryGraceTurns": 0, "minBatchChars": 20},
        {"recoveryGraceTurns": 3, "minBatchChars": 10},
        {"recoveryGraceTurns": 3, "minBatchChars": 20},
    ]
    assert grid[3][1].recovery_grace_turns == 3
    assert grid[3][1].min_batch_chars == 20


def test_whatif_cli_outputs_and_errors(small: tuple[Path, _corpus.Plant], tmp_path: Path) -> None:
    root, plant = small
    out_csv = tmp_path / "grid.csv"
    args = ["corpus", "whatif", str(plant.paths[0]), str(plant.paths[3])]
    args += ["--set", "recoveryGraceTurns=0,3", "--set", "minBatchChars=1000,5000"]
    done = run_cli(*args, "--no-cache", "--json", "--csv", str(out_csv))
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert len(rows) == 4
    assert [r["reclaimed_share"] for r in rows] == sorted(
        (r["reclaimed_share"] for r in rows), reverse=True
    )
    csv_lines = out_csv.read_text("utf-8").splitlines()
    assert len(csv_lines) == 5
    assert csv_lines[0].startswith("settings,sessions,failed")
    big = {json.dumps(r["settings"]): r for r in rows}
    # no batch reaches 5000 chars: nothing is summarized
    assert big['{"recoveryGraceTurns": 0, "minBatchChars": 5000}']["summarizer_calls"] == 0
    bad = run_cli("corpus", "whatif", str(root), "--set", "noSuchKey=1")
    assert bad.returncode == 2
    assert "noSuchKey" in bad.stderr
    parquet = run_cli("corpus", "whatif", str(plant.paths[0]), "--parquet", str(tmp_path / "x"))
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        assert parquet.returncode == 2
        assert "--parquet needs pyarrow" in parquet.stderr
    else:
        assert parquet.returncode == 0


# ------------------------------------------------------------------------------- condense


def test_batch_condense_mirrors_the_tree_like_condense(
    small: tuple[Path, _corpus.Plant], tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    shutil.copytree(small[0], root)
    before = {p: sha(p) for p in root.rglob("*") if p.is_file()}
    out = tmp_path / "out"
    cache = str(tmp_path / "cache")
    result = corpus.condense([str(root)], out, engine="local", workers=2, cache_dir=cache)
    assert not result.failures
    assert {p: sha(p) for p in root.rglob("*") if p.is_file()} == before  # inputs untouched
    expected = {str(p.relative_to(root)).removesuffix(".gz") for p in before}
    assert {str(p.relative_to(out)) for p in out.rglob("*.jsonl")} == expected
    one = next(r for r in result.rows if r.path.endswith(".gz"))
    single = run_cli("condense", one.path, "--out", str(tmp_path / "single.jsonl"), "--json")
    assert single.returncode == 0, single.stderr
    report = json.loads(single.stdout)
    del report["output"]
    assert one.report == report
    assert SessionFile.load(one.output).warnings == []
    again = corpus.condense([str(root)], out, engine="serial", cache_dir=cache)
    assert (again.computed, again.cached) == (0, 30)
    refused = corpus.condense([str(root)], out, engine="serial")  # no cache: outputs exist
    assert len(refused.failures) == 30
    assert "exists (use --force" in refused.failures[0].error


def test_batch_condense_in_place_keeps_backups(
    small: tuple[Path, _corpus.Plant], tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    shutil.copytree(small[0], root)
    originals = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    done = run_cli("corpus", "condense", str(root), "--in-place", "--no-cache", "--json")
    assert done.returncode == 3  # the .gz sessions cannot be rewritten in place
    result = json.loads(done.stdout)
    gz = {str(p) for p in originals if p.name.endswith(".gz")}
    assert {f["path"] for f in result["failures"]} == gz
    assert all("--in-place needs a plain .jsonl" in f["error"] for f in result["failures"])
    for path, data in originals.items():
        if str(path) in gz:
            assert path.read_bytes() == data
            continue
        assert Path(f"{path}.bak").read_bytes() == data
        rewritten = SessionFile.load(path)
        assert any(e.get("customType") == "context-prune-frontier" for e in rewritten.entries), path
    again = run_cli("corpus", "condense", str(root), "--in-place", "--no-cache", "--json")
    assert again.returncode == 3  # the .gz ones again
    skipped = {s["path"] for s in json.loads(again.stdout)["skipped"]}
    assert skipped == {str(p) for p in originals if str(p) not in gz}
    assert again.stderr.count("already condensed in place") == len(skipped)


def test_scan_cli_tables(small: tuple[Path, _corpus.Plant]) -> None:
    root = small[0]
    done = run_cli("corpus", "scan", str(root), "--no-cache")
    assert done.returncode == 0, done.stderr
    assert "Re-query gaps (user-turn groups)" in done.stdout
    assert "re-query events" in done.stdout
    assert " 13 " in done.stdout
    assert "Session length (user-turn groups)" in done.stdout
    missing = run_cli("corpus", "scan", str(root / "nope"))
    assert missing.returncode == 2
    assert "no such file or directory" in missing.stderr
    with pytest.raises(corpus.EngineError, match="unknown engine 'spark'"):
        corpus.scan([str(root)], engine="spark")
