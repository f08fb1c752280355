"""What a replay (``condense`` / ``replay``) holds: the source's messages once, the new session
written piece by piece, nothing of the condenser once the caller lets it go (issue 41)."""

from __future__ import annotations

import asyncio
import errno
import gc
import io
import json
import os
import tempfile
import tracemalloc
import weakref
from collections import Counter
from pathlib import Path
from typing import IO, Any

import pytest

from pi_condense.config import Config
from pi_condense.corpus.run import config_settings
from pi_condense.corpus.tasks import Task, run_task
from pi_condense.errors import SessionError
from pi_condense.inplace import fingerprint, replace_in_place, write_new
from pi_condense.js import json as jsjson
from pi_condense.render import render
from pi_condense.replay import ReplayOptions, ReplayResult, replay, replay_async
from pi_condense.replay_log import batch_notice, counter_ids
from pi_condense.report.condense import cold_chars, condense_report
from pi_condense.session import SessionFile, jsonl
from pi_condense.session.jsonl import share_equal_strings
from pi_condense.state import PrunerState
from pi_condense.summarize.factory import make_summarizer
from support.sessions import write_session


def _condense(source: SessionFile, tmp_path: Path) -> ReplayResult:
    config = Config.from_settings_dict({"enabled": True})
    options = ReplayOptions(session_dir=str(tmp_path), record_contexts=False, deterministic=True)
    return replay(source, config, make_summarizer("default", config=config), options)


def _source(tmp_path: Path) -> SessionFile:
    return SessionFile.load(write_session(tmp_path / "s.jsonl", prompts=6))


def test_the_new_session_holds_the_source_messages_themselves(tmp_path: Path) -> None:
    source = _source(tmp_path)
    result = _condense(source, tmp_path)
    originals = [e["message"] for e in source.entries if e["type"] == "message"]
    copied = [e["message"] for e in result.session.entries if e["type"] == "message"]
    assert len(copied) == len(originals) == 24
    assert all(new is old for new, old in zip(copied, originals, strict=True))
    # and the written session reads back as it did when each line was parsed again
    again = SessionFile.parse(result.session_text())
    assert [e["message"] for e in again.entries if e["type"] == "message"] == originals


def _with_and_without_log(source: SessionFile, tmp_path: Path) -> tuple[ReplayResult, ReplayResult]:
    config = Config.from_settings_dict({"enabled": True})
    logged = replay(
        source,
        config,
        make_summarizer("default", config=config),
        ReplayOptions(session_dir=str(tmp_path / "a"), deterministic=True),
    )
    result = _condense(source, tmp_path / "b")
    assert result.session_text() == logged.session_text()
    return logged, result


def test_a_replay_without_its_call_log_holds_no_summarizer_prompts(tmp_path: Path) -> None:
    # `condense` writes no call log: each batch's prompt (the batch's tool outputs), held to
    # the end of the replay, grew with the session (2.4 MB of the x10 bench session).
    logged, result = _with_and_without_log(_source(tmp_path), tmp_path)
    assert len(result.summarizer.calls) == len(logged.summarizer.calls) > 0
    assert [c.kind for c in result.summarizer.calls] == [c.kind for c in logged.summarizer.calls]
    assert all(c.prompt and c.output for c in logged.summarizer.calls)
    assert all(c.prompt == "" and c.output is None for c in result.summarizer.calls)
    result.write(tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["meta.json", "session.jsonl"]


def test_a_replay_without_its_call_log_holds_no_info_notifications(tmp_path: Path) -> None:
    # Nor the condenser's info notifications (about one a source entry: 2.5 MB at x10); the
    # batch outcomes the report counts from them are counted as they come.
    source = SessionFile.load(write_session(tmp_path / "s.jsonl", prompts=6, result_chars=40))
    logged, result = _with_and_without_log(source, tmp_path)
    levels = Counter(level for _, level in logged.notifications)
    assert levels["info"] >= 6
    assert result.notifications == [n for n in logged.notifications if n[1] != "info"]
    told = Counter(batch_notice(message) for message, _ in logged.notifications)
    assert told["trivial"] == 6
    expected = {kind: n for kind, n in told.items() if kind is not None}
    assert result.batch_notices == logged.batch_notices == expected


def test_append_message_copies_unless_shared(tmp_path: Path) -> None:
    session = SessionFile.in_memory("/w")
    message = {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1}
    session.append_message(message)
    session.append_message(message, shared=True)
    first, second = (e["message"] for e in session.entries)
    assert first == message
    assert first is not message
    assert second is message


def test_session_chunks_are_the_session_text_in_pieces(tmp_path: Path) -> None:
    result = _condense(_source(tmp_path), tmp_path)
    text = result.session_text()
    pieces = list(result.session_chunks(size=2000))
    assert len(pieces) > 3
    assert b"".join(pieces) == text.encode("utf-8")
    assert json.loads(pieces[0].split(b"\n", 1)[0])["type"] == "session"
    assert all(piece.endswith(b"\n") for piece in pieces)
    assert list(result.session_chunks()) == [text.encode("utf-8")]


def test_files_are_written_from_pieces(tmp_path: Path) -> None:
    target = tmp_path / "new.jsonl"
    write_new(target, iter([b'{"type":"session","id":"a"}\n', b"{}\n", b"[]\n"]))
    assert target.read_bytes() == b'{"type":"session","id":"a"}\n{}\n[]\n'
    # in place: the header (in the first piece) is marked with what it replaced
    session = write_session(tmp_path / "s.jsonl", prompts=1)
    before = fingerprint(session)
    pieces = [b'{"type":"session","id":"b"}\n{"a":1}\n', b'{"b":2}\n']
    replace_in_place(session, iter(pieces), tmp_path / "s.jsonl.bak", before)
    lines = session.read_bytes().splitlines()
    header = json.loads(lines[0])
    assert header["condensedFrom"] == {"size": before.size, "sha256": before.sha256}
    assert lines[1:] == [b'{"a":1}', b'{"b":2}']


def test_the_condenser_state_is_freed_with_the_condenser(tmp_path: Path) -> None:
    # The new session outlives the replay (it is written and reported on); its branch facts
    # must not keep the condenser's state (whose size memo holds every message it measured).
    result = _condense(_source(tmp_path), tmp_path)
    assert result.condenser is not None
    state = weakref.ref(result.condenser.state)
    result.condenser = None
    gc.collect()
    assert state() is None
    assert len(result.session.entries) > 24


def test_a_corpus_task_leaves_no_garbage_behind(tmp_path: Path) -> None:
    # A worker runs session after session: what one left in reference cycles would wait for
    # a rare full collection, several sessions' worth at a time.
    path = write_session(tmp_path / "s.jsonl", prompts=6)
    settings = config_settings(Config.from_settings_dict({"enabled": True}))
    options = {"output": str(tmp_path / "out.jsonl"), "force": True}
    task = Task("condense", str(path), path.stat().st_size, settings, "key", None, options)
    gc.collect()
    outcome = run_task(task)
    assert outcome.failure is None
    assert outcome.result is not None
    assert outcome.result["row"]["model_calls"] == 12
    assert gc.collect() < 20  # before: every object of the condenser and its replay


def _both_ways(spool: IO[bytes]) -> tuple[SessionFile, SessionFile]:
    """The same appends to a plain in-memory session and to one written through to ``spool``."""
    sessions = [
        SessionFile.in_memory(
            "/w", session_id="s", clock=lambda: 1_000, id_source=counter_ids(), **extra
        )
        for extra in ({}, {"write_through": spool})
    ]
    message = {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1}
    for session in sessions:
        session.append_message(message, shared=True)
        session.append_custom("context-prune-index", {"toolCalls": [{"toolCallId": "c1"}]})
        session.append_custom_message("context-prune-summary", "text", False, {"k": [1]})
        session.append_custom("context-prune-stats", {"totalCost": 0.5})
        session.append_label("00000001", "first")
    return sessions[0], sessions[1]


def test_a_session_written_through_keeps_its_custom_entries_in_the_file(tmp_path: Path) -> None:
    with tempfile.TemporaryFile(dir=tmp_path) as spool:
        plain, through = _both_ways(spool)
        _check_written_through(plain, through, spool)


def _check_written_through(plain: SessionFile, through: SessionFile, spool: IO[bytes]) -> None:
    assert through.writes_through
    assert not plain.writes_through
    lines = [plain.header, *plain.entries]
    text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    spool.seek(0)
    assert spool.read() == text.encode("utf-8")  # every line written as it was appended
    # what it holds: the custom entries without their data, everything else whole
    _, path = through.branch_path()
    assert [e["type"] for e in path] == ["message", "custom", "custom_message", "custom", "label"]
    assert not any("data" in e for e in path)
    assert path[0]["message"] is plain.branch()[0]["message"]
    # every reader gets the whole entries back, equal to the plain session's
    assert through.entries == plain.entries
    assert list(through.iter_entries()) == plain.entries
    assert through.branch() == plain.branch() == through.branch("00000005")
    assert through.custom_entries() == plain.custom_entries()
    assert list(through.iter_custom_entries()) == plain.custom_entries()
    assert through.get_entry("00000002") == plain.get_entry("00000002")
    assert through.get_entry("00000002")["data"] == {"toolCalls": [{"toolCallId": "c1"}]}
    assert b"".join(through.written_chunks(size=10)) == text.encode("utf-8")
    assert all(piece.endswith(b"\n") for piece in through.written_chunks(size=10))
    # and appends after a read-back go on at the file's end
    through.append_custom("context-prune-stats", {"totalCost": 1})
    assert through.entries[-1]["data"] == {"totalCost": 1}
    assert b"".join(through.written_chunks()).count(b"\n") == 7


def test_a_plain_session_has_no_written_text(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="not written through"):
        list(SessionFile.in_memory("/w").written_chunks())


def test_the_reload_figure_is_the_render_of_the_whole_state(tmp_path: Path) -> None:
    # `cold_chars` rebuilds the state without the records' result texts (a render never
    # reads them): the figure is the one a reload's full state renders to.
    result = _condense(_source(tmp_path), tmp_path)
    session = result.session
    config = Config.from_settings_dict({"enabled": True})
    state = PrunerState.from_session(session)
    records = state.index.records()
    assert records
    assert all(r["resultText"] for r in records)
    messages = session.build_context().messages
    full = render(messages, state, config)
    assert full.pruned
    assert cold_chars(session, config) == (jsjson.length(messages), full.after_chars)


def test_a_replay_written_through_writes_the_same_session(tmp_path: Path) -> None:
    source = _source(tmp_path)
    plain = _condense(source, tmp_path / "a")
    config = Config.from_settings_dict({"enabled": True})
    with tempfile.TemporaryFile(dir=tmp_path) as spool:
        options = ReplayOptions(
            session_dir=str(tmp_path / "a"),
            record_contexts=False,
            deterministic=True,
            write_through=spool,
        )
        through = replay(source, config, make_summarizer("default", config=config), options)
        assert through.session_text() == plain.session_text()
        assert b"".join(through.session_chunks(size=2000)) == plain.session_text().encode()
        assert through.entry_counts() == plain.entry_counts()
        # the pruner's entries are in the file, not in memory
        _, path = through.session.branch_path()
        customs = [e for e in path if e["type"] == "custom"]
        assert len(customs) > 5
        assert not any("data" in e for e in customs)
        config = Config.from_settings_dict({"enabled": True})
        assert cold_chars(through.session, config) == cold_chars(plain.session, config)
        assert condense_report(through, 1, 1) == condense_report(plain, 1, 1)


def test_entries_appended_in_one_millisecond_share_their_timestamp() -> None:
    # A replay freezes its clock per source entry: the entries one event appends (the message,
    # the pruner's entries) held a string each for the same time (1.3 MB at x10).
    session = SessionFile.in_memory("/w", clock=lambda: 5_000)
    message = {"role": "user", "content": "hi", "timestamp": 1}
    session.append_message(message, shared=True)
    session.append_message(message, shared=True)
    first, second = session.entries
    assert first["timestamp"] == "1970-01-01T00:00:05.000Z"
    assert first["timestamp"] is second["timestamp"]


def test_the_kept_branch_holds_no_set_of_its_entries() -> None:
    # The branch kept as entries are appended held the id() of every entry in a set besides
    # the path itself (2.7 MB for the 20k entries of condense x10).
    session = SessionFile.in_memory("/w", id_source=counter_ids())
    message = {"role": "user", "content": "hi", "timestamp": 1}
    session.append_message(message, shared=True)
    session.branch_path()
    tracemalloc.start()
    try:
        for _ in range(4000):
            session.append_message(message, shared=True)
            session.branch_path()
        snapshot = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    context = snapshot.filter_traces([tracemalloc.Filter(True, "*session/context.py")])
    held = sum(stat.size for stat in context.statistics("filename"))
    assert held < 100_000  # the path's list: 8 bytes an entry
    epoch, path = session.branch_path()
    assert len(path) == 4001
    # a leaf moved back along the branch is still found, and the branch walked again
    session.set_leaf("00000010")
    again, path = session.branch_path()
    assert again != epoch
    assert [e["id"] for e in path] == [f"{n:08x}" for n in range(1, 17)]


class _Probe:
    """An object held by one source entry alone: gone when the entry is."""


def test_a_source_the_caller_lets_go_is_freed_entry_by_entry(tmp_path: Path) -> None:
    # `condense` hands its source over: each source entry is freed once the replay is past it
    # (its message stays, held by the new session), not when the replay ends.
    sources = [_source(tmp_path)]
    branch = sources[0].branch()
    probes = [_Probe() for _ in branch]  # dicts take no weak references: their probes do
    for entry, probe in zip(branch, probes, strict=True):
        entry["probe"] = probe
    entries = [weakref.ref(probe) for probe in probes]
    del probes
    messages = [entry["message"] for entry in branch if entry["type"] == "message"]
    del branch
    freed: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        if done in (total // 2, total):
            gc.collect()
            freed.append((done, sum(ref() is None for ref in entries)))

    config = Config.from_settings_dict({"enabled": True})
    options = ReplayOptions(session_dir=str(tmp_path), record_contexts=False)
    summarizer = make_summarizer("default", config=config)
    result = asyncio.run(
        replay_async(sources.pop(), config, summarizer, options, on_progress=progress)
    )
    half = len(entries) // 2
    # at the half, every entry before the one just replayed is gone (the source with them)
    assert freed[0][0] == half
    assert freed[0][1] >= half - 1
    assert freed[1][1] >= len(entries) - 1
    kept = [e["message"] for e in result.session.entries if e["type"] == "message"]
    assert all(new is old for new, old in zip(kept, messages, strict=True))


class _SmallDisk(io.BytesIO):
    """A write-through file with room for ``room`` bytes (then ENOSPC, as a full disk)."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def write(self, data: Any) -> int:
        if self.tell() + len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(data)


def test_a_failed_write_through_fails_every_later_use() -> None:
    disk = _SmallDisk(room=400)
    session = SessionFile.in_memory("/w", write_through=disk)
    session.append_custom("context-prune-stats", {"n": 1})
    with pytest.raises(SessionError, match="cannot write the session through to its file: No"):
        session.append_custom("context-prune-stats", {"text": "x" * 500})
    # the file no longer holds the session's text: nothing more is written or read from it
    disk.room = 10_000
    with pytest.raises(SessionError, match="No space left on device"):
        session.append_custom("context-prune-stats", {"n": 3})
    with pytest.raises(SessionError, match="No space left on device"):
        list(session.written_chunks())
    with pytest.raises(SessionError, match="No space left on device"):
        session.custom_entries()


def test_a_write_through_file_changed_behind_the_session_is_refused(tmp_path: Path) -> None:
    with tempfile.TemporaryFile(dir=tmp_path) as spool:
        session = SessionFile.in_memory("/w", write_through=spool)
        session.append_custom("context-prune-stats", {"n": 1})
        spool.write(b"more\n")  # not the session's
        with pytest.raises(SessionError, match=r"holds \d+ bytes, not the \d+ written"):
            list(session.written_chunks())


def test_equal_strings_of_a_parsed_session_are_made_one_object() -> None:
    lines = [
        '{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"same"}]}}',
        '{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"same"},'
        '["same",1,-0.0,null,true,{"k":"same"}]],"n":1.5}}',
    ]
    values = [json.loads(line) for line in lines]
    before = [json.dumps(v) for v in values]
    share_equal_strings(values)
    assert [json.dumps(v) for v in values] == before  # the same content, keys in order
    first, second = values[0]["message"], values[1]["message"]
    assert first["role"] is second["role"]
    assert values[0]["type"] is values[1]["type"]
    text = first["content"][0]["text"]
    assert second["content"][0]["text"] is text
    assert second["content"][1][0] is text
    assert second["content"][1][5]["k"] is text
    assert type(second["content"][1][2]) is float  # numbers are left as they are


def test_a_session_parsed_with_shared_strings_reads_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Chunks of about 200 bytes: the strings are shared across chunks, and with the line
    # orjson refuses (a lone surrogate, read by the line-by-line path) and the header.
    monkeypatch.setattr(jsonl, "_CHUNK", 200)
    header = '{"type":"session","version":3,"id":"s","timestamp":"same","cwd":"/w"}'
    lines = [header]
    for n in range(40):
        text = "same" if n % 2 else "x" * (n + 1)
        odd = ',"z":"\\ud800"' if n == 17 else ""
        lines.append(
            f'{{"type":"message","id":"m{n}","parentId":null,"timestamp":"same","message":'
            f'{{"role":"user","content":[{{"type":"text","text":"{text}"}}],"n":{n}{odd}}}}}'
        )
    data = ("\n".join(lines) + "\n").encode()
    plain = SessionFile.parse(data)
    shared = SessionFile.parse(data, share_strings=True)
    assert [json.dumps(e) for e in shared.entries] == [json.dumps(e) for e in plain.entries]
    assert shared.warnings == plain.warnings
    texts = [
        e["message"]["content"][0]["text"]
        for e in shared.entries
        if e.get("type") == "message" and e["message"]["content"][0]["text"] == "same"
    ]
    assert len(texts) == 20
    assert all(t is texts[0] for t in texts)
    assert shared.entries[17]["message"]["z"] == "\ud800"
    stamps = [shared.header["timestamp"], *(e["timestamp"] for e in shared.entries)]
    assert all(t is stamps[0] for t in stamps)  # the header's too
    roles = {id(e["message"]["role"]) for e in shared.entries if e.get("type") == "message"}
    assert len(roles) == 1
