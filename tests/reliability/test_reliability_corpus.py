"""Issue 37, findings 2, 4, 8 and 9: `corpus condense --in-place` goes through the one
locked, re-checked in-place path and keeps modes and owners; a rerun skips what is done and
nothing ever overwrites a backup; spill files are no more open than their session;
`--force` and links replace only what they may."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from pi_condense.session import SessionFile
from support import SUPPORT
from support.corpus_runs import cli
from support.inplace import APPEND_BEFORE_SWAP, leftovers
from support.sessions import write_session

APPENDER = SUPPORT / "appender.py"


def sessions(folder: Path, count: int, result_chars: int = 3000) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [
        write_session(folder / f"s{i}.jsonl", prompts=3, result_chars=result_chars)
        for i in range(count)
    ]


def test_corpus_in_place_keeps_a_line_appended_right_before_the_swap(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl")
    original = session.read_bytes()
    prelude = APPEND_BEFORE_SWAP.format(
        session=str(session), appender=str(APPENDER), ack=str(tmp_path / "ack")
    )
    args = ["corpus", "condense", str(session), "--in-place", "--no-cache", "--engine", "serial"]
    proc = cli([*args, "--json"], tmp_path, prelude)
    assert (tmp_path / "ack").read_text() == "0"  # the other writer's line was acknowledged
    data = session.read_bytes()
    assert data.startswith(original)
    assert b'"id":"pi000000"' in data[len(original) :]
    assert proc.returncode == 3, proc.stderr
    assert "a line was appended while the file was being replaced" in proc.stderr
    assert not (tmp_path / "s.jsonl.bak").exists()
    assert SessionFile.load(session).warnings == []
    # The next run (nobody writing) condenses it, with the line in its backup.
    again = cli(args, tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "s.jsonl.bak").read_bytes() == data
    assert leftovers(tmp_path) == []


def test_corpus_in_place_keeps_mode_and_owner(tmp_path: Path) -> None:
    paths = sessions(tmp_path / "c", 2, result_chars=120_000)  # results big enough to spill
    for path in paths:
        path.chmod(0o600)
        if os.geteuid() == 0:
            os.chown(path, 4321, 4322)
    args = ["corpus", "condense", str(tmp_path / "c"), "--in-place", "--no-cache", "-j", "2"]
    proc = cli(args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    for path in paths:
        info = path.stat()
        assert stat.S_IMODE(info.st_mode) == 0o600
        assert SessionFile.load(path).header["condensedFrom"]["size"] > 0
        if os.geteuid() == 0:
            assert (info.st_uid, info.st_gid) == (4321, 4322)
    # finding 8: the spill files of a private session are private too
    blobs = sorted((tmp_path / "c").glob("*-blobs"))
    assert blobs
    for folder in blobs:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        files = list(folder.iterdir())
        assert files
        assert {stat.S_IMODE(f.stat().st_mode) for f in files} == {0o600}


def test_single_condense_spills_no_more_open_than_the_session(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", prompts=2, result_chars=120_000)
    session.chmod(0o640)
    proc = cli(["condense", str(session), "-o", str(tmp_path / "out" / "o.jsonl")], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE((tmp_path / "out" / "o.jsonl").stat().st_mode) == 0o640
    folder = tmp_path / "out" / "rel-1-blobs"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o750
    modes = {stat.S_IMODE(f.stat().st_mode) for f in folder.iterdir()}
    assert modes == {0o640}


def test_a_live_condenser_spills_no_more_open_than_its_session(tmp_path: Path) -> None:
    from pi_condense import spill
    from pi_condense.condenser import Condenser

    session = write_session(tmp_path / "s.jsonl")
    session.chmod(0o600)
    (tmp_path / "rel-1-blobs").mkdir(mode=0o755)  # made before by a writer that did not know
    os.chmod(tmp_path / "rel-1-blobs", 0o755)
    # The writer the spill and the chain compression of a live Condenser use.
    write = Condenser.open(session)._runtime().write_blob or spill.write_blob
    write(str(tmp_path / "rel-1-blobs" / "k.txt"), "body")
    assert stat.S_IMODE((tmp_path / "rel-1-blobs").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "rel-1-blobs" / "k.txt").stat().st_mode) == 0o600


def _bak_state(paths: list[Path]) -> dict[Path, tuple[int, bytes]]:
    return {p: (os.stat(f"{p}.bak").st_ino, Path(f"{p}.bak").read_bytes()) for p in paths}


def test_a_rerun_skips_what_is_done_and_never_overwrites_a_backup(tmp_path: Path) -> None:
    paths = sessions(tmp_path / "c", 3)
    originals = {p: p.read_bytes() for p in paths}
    args = ["corpus", "condense", str(tmp_path / "c"), "--in-place", "--no-cache", "-j", "2"]
    first = cli(args, tmp_path)
    assert first.returncode == 0, first.stderr
    backups = _bak_state(paths)
    assert {p: data for p, (_, data) in backups.items()} == originals
    # Pi goes on writing one of them: it is still done (its original is its .bak).
    subprocess.run([sys.executable, str(APPENDER), str(paths[0]), str(tmp_path / "ack"), "2"],
                   check=True)  # fmt: skip
    for extra in ([], ["--force"]):
        again = cli([*args, *extra, "--json"], tmp_path)
        assert again.returncode == 0, again.stderr
        result = json.loads(again.stdout)
        assert result["rows"] == []
        assert sorted(s["path"] for s in result["skipped"]) == sorted(map(str, paths))
        assert again.stderr.count("already condensed in place") == 3
        assert _bak_state(paths) == backups
    table = cli(args, tmp_path)
    assert "3 already condensed in place (skipped)" in table.stdout
    # nor is a backup overwritten as an output
    onto = cli(["condense", str(paths[2]), "-o", f"{paths[1]}.bak", "--force"], tmp_path)
    assert onto.returncode == 2
    assert "condensed in place from; it is never overwritten" in onto.stderr
    assert _bak_state(paths) == backups
    # single-session condense --in-place, with --force too: skipped, the backup untouched
    for extra in ([], ["--force"]):
        single = cli(["condense", str(paths[1]), "--in-place", *extra], tmp_path)
        assert single.returncode == 0, single.stderr
        assert "already condensed in place" in single.stderr
        assert _bak_state(paths) == backups
    # A backup that is not the session's original is never overwritten: refused.
    other = write_session(tmp_path / "o.jsonl", prompts=2)
    Path(f"{other}.bak").write_bytes(b"the only copy\n")
    for command in (["condense", str(other)], ["corpus", "condense", str(other), "--no-cache"]):
        refused = cli([*command, "--in-place", "--force"], tmp_path)
        assert refused.returncode in (2, 3), refused.stderr
        assert "is never overwritten" in refused.stderr
        assert Path(f"{other}.bak").read_bytes() == b"the only copy\n"


def test_force_replaces_only_a_regular_file_and_never_the_input(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", prompts=2)
    original = session.read_bytes()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    targets = [fifo]
    if os.geteuid() == 0:
        device = tmp_path / "null"
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        targets.append(device)
    for target in targets:
        kind = stat.S_IFMT(target.lstat().st_mode)
        proc = cli(["condense", str(session), "-o", str(target), "--force"], tmp_path)
        assert proc.returncode == 2
        assert "not a regular file" in proc.stderr
        assert stat.S_IFMT(target.lstat().st_mode) == kind
    hard = tmp_path / "hard.jsonl"
    os.link(session, hard)
    (tmp_path / "soft.jsonl").symlink_to(session)
    for same in (session, tmp_path / "." / "s.jsonl", hard, tmp_path / "soft.jsonl"):
        proc = cli(["condense", str(session), "-o", str(same), "--force"], tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert "is the session itself; use --in-place" in proc.stderr
        assert session.read_bytes() == original
    assert not list(tmp_path.glob("*.bak"))


def test_in_place_on_a_symlink_replaces_the_real_file_and_keeps_the_link(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    real = write_session(tmp_path / "real" / "s.jsonl", prompts=2)
    original = real.read_bytes()
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    proc = cli(["condense", str(link), "--in-place"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink()
    assert link.resolve() == real
    assert (tmp_path / "real" / "s.jsonl.bak").read_bytes() == original
    assert real.read_bytes() != original
    assert not (tmp_path / "link.jsonl.bak").exists()
    # Pi appending through the link still reaches the condensed file.
    subprocess.run([sys.executable, str(APPENDER), str(link), str(tmp_path / "ack"), "1"],
                   check=True)  # fmt: skip
    assert b'"id":"pi000000"' in real.read_bytes()


def test_replay_refuses_an_out_dir_that_is_a_symlink(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", prompts=2)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "out").symlink_to(target)
    proc = cli(["replay", str(session), "--out", str(tmp_path / "out")], tmp_path)
    assert proc.returncode == 2
    assert "a symbolic link; give the directory itself" in proc.stderr
    assert list(target.iterdir()) == []


def test_compact_out_copy_is_no_more_open_than_the_session(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl")
    session.chmod(0o600)
    out = tmp_path / "o.jsonl"
    proc = cli(["compact", str(session), "--out", str(out), "--summarizer", "none"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    args = [
        "compact",
        str(session),
        "--out",
        str(tmp_path / "dangling.jsonl"),
        "--summarizer",
        "none",
    ]
    refused = cli(args, tmp_path)
    assert refused.returncode == 2
    assert "already exists" in refused.stderr
    assert not (tmp_path / "nowhere.jsonl").exists()
