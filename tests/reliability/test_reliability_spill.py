"""Issue 14, findings 1, 6 (spill part), 7 and the Windows id rule of 9: spill reads stay in
the blob dir, are bounded, and never return another call's output."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pi_condense.capture import capture_batch
from pi_condense.keys import hash_tool_result
from pi_condense.spill import SpillSettings, js_utf8, safe_session_id, spill_batch
from pi_condense.state import PrunerState
from pi_condense.tools import ContextTreeQuery
from pi_condense.tools.spill_access import read_spill
from support.agent import assistant, result

SECRET = "OUTSIDE-SECRET-9a8b7c"
SID = "sess-1"


def spilled_state(path: str, **extra: Any) -> PrunerState:
    record: dict[str, Any] = {
        "toolCallId": "s",
        "toolName": "bash",
        "args": {},
        "resultText": "",
        "isError": False,
        "turnIndex": 0,
        "timestamp": 1,
        "resultTimestamp": 7,
        "spillPath": path,
        "spillBytes": 10,
        "resultPreview": "PREVIEW",
    }
    record.update(extra)
    state = PrunerState()
    state.add_batch([record])
    return state


def query(state: PrunerState, session_dir: Path, session_id: str = SID) -> str:
    return (
        ContextTreeQuery(state, str(session_dir), session_id).execute({"toolCallIds": ["s"]}).text
    )


def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SECRET)
    return path


# ----------------------------------------------------------------- finding 1: confinement


@pytest.mark.parametrize("kind", ["dotdot", "absolute"])
def test_a_header_id_that_climbs_out_cannot_name_the_blob_dir(tmp_path: Path, kind: str) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    victim_blobs = tmp_path / "victim-blobs"
    victim_blobs.mkdir()
    (victim_blobs / "x.txt").write_text(SECRET)
    session_id = "../victim" if kind == "dotdot" else str(tmp_path / "victim")
    text = query(spilled_state(str(victim_blobs / "x.txt")), sessions, session_id)
    assert SECRET not in text
    assert "[Spill file not read: the session id is not a plain file name" in text


def test_a_blob_dir_that_is_a_symlink_is_not_trusted(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    secret = secret_file(tmp_path)
    (sessions / f"{SID}-blobs").symlink_to(secret.parent, target_is_directory=True)
    text = query(spilled_state(str(sessions / f"{SID}-blobs" / "secret.txt")), sessions)
    assert SECRET not in text
    assert "[Spill file not read: the blob directory is a symlink]" in text


def test_a_hard_link_inside_the_blob_dir_is_not_read(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    (sessions / f"{SID}-blobs").mkdir(parents=True)
    secret = secret_file(tmp_path)
    link = sessions / f"{SID}-blobs" / "s_7.txt"
    os.link(secret, link)
    text = query(spilled_state(str(link)), sessions)
    assert SECRET not in text
    assert "[Spill file not read: the file has other hard links" in text


def test_a_plain_blob_is_still_read(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    (sessions / f"{SID}-blobs").mkdir(parents=True)
    blob = sessions / f"{SID}-blobs" / "s_7.txt"
    blob.write_text("THE OUTPUT")
    assert query(spilled_state(str(blob)), sessions).endswith("\nTHE OUTPUT")


def test_a_drive_relative_session_id_is_not_used_for_spills() -> None:
    # On Windows "C:x-blobs" joined to a directory is relative to drive C's cwd.
    assert not safe_session_id("C:x")
    assert not safe_session_id("a\\b")
    assert safe_session_id("0193f4c2-7d1e-7a51-9c3b-1f2e3d4c5b6a")


# ------------------------------------------------------------- finding 6: bounded reads


def test_a_multi_gigabyte_sparse_spill_is_read_in_bounded_memory(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    (sessions / f"{SID}-blobs").mkdir(parents=True)
    blob = sessions / f"{SID}-blobs" / "s_7.txt"
    with open(blob, "wb") as handle:
        handle.write("".join(f"line {i}\n" for i in range(3000)).encode())
    os.truncate(blob, 3 * 1024**3)  # sparse: 3 GiB, no disk used
    script = textwrap.dedent(
        f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (1536 * 1024 * 1024,) * 2)
        from pi_condense.state import PrunerState
        from pi_condense.tools import ContextTreeQuery
        state = PrunerState()
        state.add_batch([{{"toolCallId": "s", "toolName": "bash", "args": {{}},
            "resultText": "", "isError": False, "turnIndex": 0, "timestamp": 1,
            "resultTimestamp": 7, "spillPath": {str(blob)!r}, "spillBytes": 10}}])
        out = ContextTreeQuery(state, {str(sessions)!r}, {SID!r}).execute(
            {{"toolCallIds": ["s"]}}).text
        sys.stdout.write(out[-200:])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # The whole file has 3000 newlines, so 3001 lines; 2000 fit the line budget.
    assert done.stdout.endswith("line 1999\n[Output truncated: 2000/3001 lines shown]")


def test_a_head_read_matches_a_whole_read(tmp_path: Path) -> None:
    blobs = tmp_path / f"{SID}-blobs"
    blobs.mkdir()
    from pi_condense.tools.truncate import truncate_head

    for text in ["\u00e9" * 40000, "x" * 60000, "a\n" * 30000, "short\nfile"]:
        blob = blobs / "b.txt"
        blob.write_bytes(text.encode())
        head = read_spill(str(blob), str(tmp_path), SID, max_bytes=50 * 1024)
        assert head.text is not None
        cut = truncate_head(head.text)
        whole = truncate_head(text)
        assert cut.content == whole.content
        assert (head.total_lines if not head.complete else cut.total_lines) == whole.total_lines


# ---------------------------------------------------------- finding 7: name collisions


def _settings(tmp_path: Path) -> SpillSettings:
    return SpillSettings(
        threshold=10, preview_bytes=8, dedup=False, session_dir=str(tmp_path), session_id=SID
    )


def test_ids_that_sanitize_alike_do_not_share_a_blob(tmp_path: Path) -> None:
    first_text, second_text = "FIRST OUTPUT " * 5, "SECOND OUTPUT " * 5
    message = assistant(1, ("call.a", "bash", {}), ("call_a", "bash", {}))
    batch = capture_batch(
        message,
        [result("call.a", "bash", first_text, 50), result("call_a", "bash", second_text, 50)],
        1,
        9,
    )
    state = PrunerState()
    errors: list[str] = []
    handled = spill_batch(
        batch, state, _settings(tmp_path), lambda kind, data: None,
        on_error=lambda path, exc: errors.append(str(exc)),
    )  # fmt: skip
    assert handled == {"call.a"}  # the second stays inline (raw, for the normal flush)
    assert batch.tool_calls[1]["resultText"] == second_text
    assert len(errors) == 1
    assert "holds another call's output" in errors[0]
    blob = tmp_path / f"{SID}-blobs" / "call_a_50.txt"
    assert blob.read_bytes() == js_utf8(first_text)
    text = ContextTreeQuery(state, str(tmp_path), SID).execute({"toolCallIds": ["call.a"]}).text
    assert "FIRST OUTPUT" in text
    assert "SECOND" not in text


def test_a_sidecar_with_another_content_hash_is_refused(tmp_path: Path) -> None:
    blobs = tmp_path / f"{SID}-blobs"
    blobs.mkdir()
    blob = blobs / "s_7.txt"
    blob.write_text("ANOTHER CALL'S OUTPUT")
    size = blob.stat().st_size
    good = hash_tool_result("bash", "ANOTHER CALL'S OUTPUT")
    ok = query(spilled_state(str(blob), contentHash=good, spillBytes=size), tmp_path)
    assert ok.endswith("\nANOTHER CALL'S OUTPUT")
    wrong = hash_tool_result("bash", "MY OWN OUTPUT........")
    text = query(spilled_state(str(blob), contentHash=wrong, spillBytes=size), tmp_path)
    assert "ANOTHER" not in text
    assert text.endswith(
        "[Spill file not read: the file holds another output (content hash mismatch)]"
    )
    text = query(spilled_state(str(blob), contentHash=good, spillBytes=size + 1), tmp_path)
    assert "ANOTHER" not in text
    assert "the record says" in text


# ------------------------------------------------------- temp files of killed blob writers

_PAUSED_WRITER = textwrap.dedent(
    """
    import os, sys, time
    from pi_condense import spill

    real_fsync = os.fsync

    def paused_fsync(fd):
        # The blob's bytes are in its temporary file, not yet fsynced nor renamed.
        print("writing", flush=True)
        time.sleep(600)
        real_fsync(fd)

    os.fsync = paused_fsync
    spill.write_blob(sys.argv[1], "x" * 100000)
    """
)


def _temps(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_a_killed_blob_writer_leaves_a_temp_file_the_next_write_removes(tmp_path: Path) -> None:
    from pi_condense._fs import blob as blob_write
    from pi_condense.spill import write_blob

    blobs = tmp_path / f"{SID}-blobs"
    target = blobs / "call_1_7.txt"
    child = subprocess.Popen(
        [sys.executable, "-c", _PAUSED_WRITER, str(target)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "writing\n"
        [temp] = _temps(blobs)
        assert temp.startswith(".call_1_7.txt.")
        old = os.stat(blobs / temp).st_mtime - 3600
        os.utime(blobs / temp, (old, old))
        # Old but locked by a live writer: kept.
        assert blob_write.clean_stale_temps(str(blobs)) == []
        assert _temps(blobs) == [temp]
    finally:
        child.kill()
        child.wait()
    assert not target.exists()
    assert _temps(blobs) == [temp]  # SIGKILL left it behind
    write_blob(str(blobs / "call_2_8.txt"), "next")
    assert _temps(blobs) == []
    assert sorted(p.name for p in blobs.iterdir()) == ["call_2_8.txt"]


def test_only_old_unlocked_temp_files_of_our_naming_are_removed(tmp_path: Path) -> None:
    from pi_condense._fs import blob as blob_write

    blobs = tmp_path / "blobs"
    blobs.mkdir()
    stale = blobs / ".a_1.txt.0123456789ab.tmp"
    fresh = blobs / ".b_2.txt.ba9876543210.tmp"
    others = [
        blobs / ".notes.tmp",  # not our naming
        blobs / "a_1.txt",  # a blob
        blobs / ".c_3.txt.0123456789ab.tmp.keep",
        blobs / ".d_4.txt.XYZ.tmp",
    ]
    for path in [stale, fresh, *others]:
        path.write_text("partial")
    outside = tmp_path / "victim"
    outside.write_text("keep me")
    link = blobs / ".e_5.txt.aaaaaaaaaaaa.tmp"
    link.symlink_to(outside)
    now = os.stat(fresh).st_mtime
    for path in [stale, *others]:
        os.utime(path, (now - 3600, now - 3600))
    os.utime(link, (now - 3600, now - 3600), follow_symlinks=False)
    assert blob_write.clean_stale_temps(str(blobs), now=now + 1) == [str(stale)]
    assert not stale.exists()
    assert fresh.exists()
    assert link.is_symlink()
    assert outside.read_text() == "keep me"
    assert all(p.exists() for p in others)
    # Once old enough, the fresh one goes too.
    assert blob_write.clean_stale_temps(str(blobs), now=now + blob_write.STALE_AFTER) == [
        str(fresh)
    ]
