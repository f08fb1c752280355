"""`pi-condense mcp`: the recovery tools over MCP, driven by the MCP SDK's own client.

The server is always a real process (``python -m pi_condense mcp``): started by the client
over stdio, or listening on 127.0.0.1 (streamable HTTP). The sessions are real condensed
sessions: Pi's real session condensed by the real CLI, and a session a hook writes while the
server runs. Expected outputs are the originals: the raw session's tool results (as Pi
wrote them) and the outputs the hook's conversation carried.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.types import ImageContent, TextContent

from conftest import run_dir
from pi_condense.integrations.anthropic_messages import MessagesCondenser
from pi_condense.integrations.openai_chat import ChatCondenser
from pi_condense.mcp.sessions import SessionChoice
from pi_condense.proxy.sessions import find_session
from pi_condense.tools import condense_tools
from support.cli import run
from support.hook_runs import LISTED, LOG, REF, SPILLING, check_recoverable, fetch, output
from support.mcp import MCP, child_env, connect, http_server, stdio, text

QUERY = "context_tree_query"
NOT_FOUND = "(not found in index \u2014 may not have been summarized yet)"

pytestmark = pytest.mark.usefixtures("loopback_only")  # the HTTP client reaches 127.0.0.1


# ---------------------------------------------------------------------------- sessions


@pytest.fixture(scope="module")
def condensed(fixtures_dir: Path) -> tuple[Path, dict[str, str], dict[str, str]]:
    """Pi's real session condensed by ``pi-condense condense``, its refs (ref ->
    toolCallId) and the original outputs (toolCallId -> text, from Pi's own file)."""
    work = run_dir() / "mcp-condensed"
    work.mkdir(exist_ok=True)
    raw = work / "raw.jsonl"
    shutil.copyfile(fixtures_dir / "large-session.jsonl", raw)
    out = work / "condensed.jsonl"
    done = run(["condense", str(raw), "-o", str(out), "-q", "--force"], work / "agent")
    assert done.returncode == 0, done.stderr
    return out, short_refs(out), originals(raw)


def originals(raw: Path) -> dict[str, str]:
    """toolCallId -> the text of its result, read from Pi's own session file."""
    found = {}
    for line in raw.read_text("utf-8").splitlines():
        message = json.loads(line).get("message") or {}
        if message.get("role") == "toolResult":
            (block,) = message["content"]  # every result of this session is one text block
            found[message["toolCallId"]] = block["text"]
    return found


def short_refs(session: Path) -> dict[str, str]:
    """ref -> toolCallId, as the condensed session's summaries list them."""
    refs = {}
    for line in session.read_text("utf-8").splitlines():
        entry = json.loads(line)
        if entry.get("customType") == "context-prune-summary":
            for ref in entry["details"]["toolCallRefs"]:
                refs[ref["shortId"]] = ref["toolCallId"]
    return refs


def body(answer: str) -> str:
    """The output a one-block answer holds (after its Tool/Args/Status/Turn header)."""
    return answer.split("\nTurn: ", 1)[1].split("\n", 2)[2]


def in_process(session: Path) -> Any:
    """The tools as a hook or Pi runs them in process (paging on, as the hooks have it)."""
    return condense_tools(session, paging=True)


# ------------------------------------------------------------------------------- stdio


def test_stdio_lists_the_tools_and_answers_every_ref_with_its_original(
    condensed: tuple[Path, dict[str, str], dict[str, str]], tmp_path: Path
) -> None:
    session, refs, expected = condensed
    assert len(refs) > 50
    local = in_process(session)
    with connect(stdio([str(session)], tmp_path)) as mcp:
        tools = mcp.tools()
        # the registrations the condensed context tells the model about, unchanged
        assert [t.name for t in tools] == local.names
        for tool, spec in zip(tools, local, strict=True):
            assert tool.description == spec.description
            assert tool.input_schema == spec.parameters
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint
        assert "context_tree_query with the short refs" in (mcp.client.instructions or "")

        for ref, call_id in refs.items():
            result = mcp.call(QUERY, {"toolCallIds": [ref]})
            assert not result.is_error, ref
            answer = text(result)
            assert answer.startswith(f"## toolRef: {ref}\n")
            assert body(answer) == expected[call_id], ref
            assert answer == local.execute(QUERY, {"toolCallIds": [ref]})

        # several refs in one call: one block each, in order, as the tool joins them
        both = mcp.execute(QUERY, {"toolCallIds": ["t2", "t1"]})
        first, second = both.split("\n\n---\n\n")
        assert body(first) == expected[refs["t2"]]
        assert body(second) == expected[refs["t1"]]

        # an unknown ref is an error result naming it, with the tool's own text; not a crash
        unknown = mcp.call(QUERY, {"toolCallIds": ["t99999"]})
        assert unknown.is_error
        assert text(unknown) == f"## toolRef: t99999\n{NOT_FOUND}"
        mixed = mcp.call(QUERY, {"toolCallIds": ["t1", "t99999"]})
        assert mixed.is_error
        assert body(text(mixed).split("\n\n---\n\n")[0]) == expected[refs["t1"]]
        bad = mcp.call(QUERY, {"toolCallIds": "t1"})
        assert bad.is_error
        assert "toolCallIds must be an array of strings" in text(bad)
        nameless = mcp.call("no_such_tool", {})
        assert nameless.is_error
        assert "unknown tool 'no_such_tool'" in text(nameless)

        # the recovery tools: the same answers as in process, over the raw history
        phrase = "Pi Coding Agent Themes"
        args = {"query": phrase, "limit": 5}
        found = mcp.execute("session_search", args)
        assert phrase in found
        assert found == local.execute("session_search", args)
        overview = mcp.execute("session_overview", {"max_sections": 3})
        assert overview == local.execute("session_overview", {"max_sections": 3})
        assert json.loads(overview)["counts"]["sections"] > 3
        # still serving after the errors
        assert body(mcp.execute(QUERY, {"toolCallIds": ["t3"]})) == expected[refs["t3"]]


# ------------------------------------------------------------------ HTTP, a live session


class Conversation:
    """A Chat Completions history condensed by the hook before each model call, as a loop
    does (the hook appends to its session file as the conversation goes)."""

    def __init__(self, hook: ChatCondenser) -> None:
        self.hook = hook
        self.history: list[Any] = [{"role": "system", "content": "You are careful."}]

    def prompt(self, p: int, paths: list[str]) -> None:
        self.history.append({"role": "user", "content": f"task {p}: read the files"})
        for t, path in enumerate(paths):
            self.hook.condense(self.history)
            call_id = f"call_{p}_{t}"
            arguments = json.dumps({"path": path})
            call = {"id": call_id, "type": "function"}
            call["function"] = {"name": "read", "arguments": arguments}
            self.history.append({"role": "assistant", "content": None, "tool_calls": [call]})
            self.history.append({"role": "tool", "tool_call_id": call_id, "content": output(path)})
        self.hook.condense(self.history)
        self.history.append({"role": "assistant", "content": f"done {p}"})

    def request(self) -> list[Any]:
        """The next request, as the model would get it."""
        sent = self.hook.condense([*self.history, {"role": "user", "content": "go on"}])
        return json.loads(json.dumps([m if isinstance(m, dict) else m.to_dict() for m in sent]))


def _refs(request: Any) -> set[str]:
    dumped = json.dumps(request)
    return set(REF.findall(dumped)) | {ref for ref, _ in LISTED.findall(dumped)}


@pytest.fixture
def hook_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The hooks' sessions directory (sessions named as Pi names them)."""
    directory = tmp_path / "sessions"
    monkeypatch.setenv("PI_CONDENSE_SESSION_DIR", str(directory))
    return directory


def test_http_follows_a_session_appended_while_it_runs_and_pages_a_long_output(
    hook_sessions: Path, tmp_path: Path
) -> None:
    hook = ChatCondenser(config=SPILLING)
    talk = Conversation(hook)
    paths: list[str] = []
    for p in range(4):
        prompt = [LOG if (p, t) == (1, 0) else f"f{p}_{t}.txt" for t in range(3)]
        paths += prompt
        talk.prompt(p, prompt)
    before = talk.request()
    session_id = hook.session.session_id
    assert hook.session.path is not None
    assert hook.session.path.parent == hook_sessions
    assert list(hook_sessions.glob("*-blobs/*")), "the log was not spilled"

    args = ["--sessions", str(hook_sessions), "--session-id", session_id]
    with http_server(args, tmp_path) as url, connect(url) as mcp:
        assert url.startswith("http://127.0.0.1:")
        assert url.endswith("/mcp")
        known = _refs(before)
        # every ref of the request gives back exactly its output; the log (90 KB, spilled)
        # in parts, each answer naming the ref of the next (<ref>#<line>)
        found = check_recoverable(mcp.execute, before, paths)
        log_ref = found[LOG]
        first = mcp.execute(QUERY, {"toolCallIds": [log_ref]})
        assert f"`{log_ref}#" in first
        assert fetch(mcp.execute, log_ref) == output(LOG)

        # the conversation goes on while the server runs: its new refs are answered at once
        later: list[str] = []
        for p in range(4, 7):
            prompt = [f"f{p}_{t}.txt" for t in range(3)]
            later += prompt
            talk.prompt(p, prompt)
        after = talk.request()
        new = _refs(after) - known
        assert len(new) >= 6, new
        found = check_recoverable(mcp.execute, after, paths + later)
        assert set(later) <= set(found)
        assert {found[p] for p in later} <= new
    hook.close()


def test_newest_session_of_a_directory_is_chosen_at_every_call(
    condensed: tuple[Path, dict[str, str], dict[str, str]], tmp_path: Path
) -> None:
    session, refs, expected = condensed
    directory = tmp_path / "sessions"
    directory.mkdir()
    with connect(stdio(["--sessions", str(directory)], tmp_path)) as mcp:
        # no session yet: a clear error result, and the server keeps serving
        empty = mcp.call(QUERY, {"toolCallIds": ["t1"]})
        assert empty.is_error
        assert text(empty) == f"pi-condense: {directory}: no session file (*.jsonl) yet"

        # a conversation of its own in the directory
        other = directory / "2026-01-01T00-00-00-000Z_other.jsonl"
        hook = ChatCondenser(session=other, config=SPILLING)
        talk = Conversation(hook)
        for p in range(3):
            talk.prompt(p, [f"g{p}_{t}.txt" for t in range(3)])
        hook.close()
        ref = sorted(_refs(talk.request()), key=lambda r: int(r[1:]))[0]
        answer = mcp.execute(QUERY, {"toolCallIds": [ref]})
        assert body(answer) in {output(f"g{p}_{t}.txt") for p in range(3) for t in range(3)}

        # the condensed Pi session written after it: now the newest, chosen at the next call
        newest = directory / "2026-01-02T00-00-00-000Z_pi.jsonl"
        shutil.copyfile(session, newest)
        os.utime(other, ns=(1_000_000_000, 1_000_000_000))
        assert body(mcp.execute(QUERY, {"toolCallIds": ["t1"]})) == expected[refs["t1"]]

        # written to again, the conversation is the newest once more
        os.utime(other)
        assert mcp.execute(QUERY, {"toolCallIds": [ref]}) == answer

        # the sessions gone: an error result again, and the server still serves
        other.unlink()
        newest.unlink()
        gone = mcp.call(QUERY, {"toolCallIds": [ref]})
        assert gone.is_error
        assert text(gone) == f"pi-condense: {directory}: no session file (*.jsonl) yet"
        assert mcp.tools()[0].name == QUERY


def test_an_output_that_carried_an_image_comes_back_with_it(tmp_path: Path) -> None:
    # An Anthropic Messages loop whose first tool result holds a PNG besides its text
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(200))).decode()
    path = tmp_path / "messages.jsonl"
    hook = MessagesCondenser(session=path)
    history: list[Any] = []
    for p in range(4):
        history.append({"role": "user", "content": f"task {p}"})
        for t in range(3):
            hook.condense(history)
            call_id, name = f"toolu_{p}_{t}", f"f{p}_{t}.txt"
            use = {"type": "tool_use", "id": call_id, "name": "read", "input": {"path": name}}
            history.append({"role": "assistant", "content": [use]})
            content: list[Any] = [{"type": "text", "text": output(name)}]
            if (p, t) == (0, 0):
                source = {"type": "base64", "media_type": "image/png", "data": png}
                content.append({"type": "image", "source": source})
            result = {"type": "tool_result", "tool_use_id": call_id, "content": content}
            history.append({"role": "user", "content": [result]})
        hook.condense(history)
        history.append({"role": "assistant", "content": [{"type": "text", "text": f"done {p}"}]})
    request = hook.condense([*history, {"role": "user", "content": "go on"}])
    hook.close()
    assert "t1" in _refs(request)

    with connect(stdio([str(path)], tmp_path)) as mcp:
        with_image = mcp.call(QUERY, {"toolCallIds": ["t1"]})
        plain = mcp.call(QUERY, {"toolCallIds": ["t2"]})
        path.unlink()  # the session named at start is gone: an error result, not a crash
        gone = mcp.call(QUERY, {"toolCallIds": ["t1"]})
    assert not with_image.is_error
    first, image = with_image.content
    assert isinstance(first, TextContent)
    assert isinstance(image, ImageContent)
    assert output("f0_0.txt") in first.text
    assert (image.mime_type, image.data) == ("image/png", png)
    (only,) = plain.content
    assert isinstance(only, TextContent)
    assert body(only.text) == output("f0_1.txt")
    assert gone.is_error
    assert text(gone) == f"pi-condense: {path}: no such file"


# ---------------------------------------------------------------------- bad input


def _mcp(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCP, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **child_env(tmp_path / "agent")},
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing", "pi-condense: {tmp}/nope.jsonl: no such file"),
        ("directory", "pi-condense: {tmp}: not a file"),
        (
            "garbage",
            "pi-condense: {tmp}/garbage.jsonl: not a Pi session file: no valid JSON line (line 1",
        ),
        ("no-dir", "pi-condense: {tmp}/none: no such directory"),
        ("bad-id", "pi-condense: session id '../x': only letters, digits, '.', '_' and '-'"),
        ("both", "pi-condense: give SESSION or --sessions (with --session-id), not both"),
        ("transport", 'pi-condense: --transport must be "stdio" or "http", not \'sse\''),
    ],
)
def test_a_bad_session_or_option_is_one_line_and_exit_2(
    tmp_path: Path, case: str, expected: str
) -> None:
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("this is not a session\n")
    args = {
        "missing": [str(tmp_path / "nope.jsonl")],
        "directory": [str(tmp_path)],
        "garbage": [str(garbage)],
        "no-dir": ["--sessions", str(tmp_path / "none")],
        "bad-id": ["--sessions", str(tmp_path), "--session-id", "../x"],
        "both": [str(garbage), "--sessions", str(tmp_path)],
        "transport": [str(garbage), "--transport", "sse"],
    }[case]
    done = _mcp(args, tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(expected.format(tmp=tmp_path)), line
    assert "Traceback" not in done.stderr


def _bare_env(agent_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PI_CONDENSE_")}
    return {**env, **child_env(agent_dir)}


def _bare_run(agent_dir: Path) -> subprocess.CompletedProcess[str]:
    """``pi-condense mcp`` with no argument and no PI_CONDENSE_* variable; its stdin closed
    at once (a stdio server that starts stops again)."""
    return subprocess.run(
        [*MCP],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=_bare_env(agent_dir),
        timeout=120,
        check=False,
    )


def test_no_session_named_and_no_proxy_directory_says_how_to_name_one(tmp_path: Path) -> None:
    done = _bare_run(tmp_path)
    assert done.returncode == 2
    default = tmp_path / "sessions" / "--pi-condense-proxy--"
    assert done.stderr.strip() == (
        "pi-condense: no session: give SESSION (a session file) or --sessions DIR "
        "(or set PI_CONDENSE_PROXY_SESSIONS or PI_CONDENSE_SESSION_DIR; the proxy's default "
        f"directory {default} does not exist)"
    )


def test_no_session_named_reads_the_newest_in_the_proxys_default_directory(
    condensed: tuple[Path, dict[str, str], dict[str, str]], tmp_path: Path
) -> None:
    session, refs, expected = condensed
    default = tmp_path / "sessions" / "--pi-condense-proxy--"
    default.mkdir(parents=True)
    shutil.copyfile(session, default / "2026-01-02T00-00-00-000Z_pi.jsonl")
    # the server says which directory it reads
    done = _bare_run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        f"pi-condense mcp: reading the newest session in {default} (the proxy's sessions directory)"
    )
    params = stdio([], tmp_path)
    params.env = _bare_env(tmp_path)
    with connect(params) as mcp:
        assert body(mcp.execute(QUERY, {"toolCallIds": ["t1"]})) == expected[refs["t1"]]


def test_a_session_id_is_looked_up_as_the_proxy_looks_it_up(tmp_path: Path) -> None:
    header = {"type": "session", "version": 3, "id": "abc", "timestamp": "t", "cwd": "/"}
    bare = tmp_path / "abc.jsonl"
    bare.write_text(json.dumps(header) + "\n")
    choice = SessionChoice(directory=tmp_path, session_id="abc")
    assert choice.resolve() == find_session(tmp_path, "abc") == bare
    for day in ("02", "01"):  # Pi's names: the newest sorts last
        (tmp_path / f"2026-01-{day}T00-00-00-000Z_abc.jsonl").write_text(json.dumps(header))
    newest = tmp_path / "2026-01-02T00-00-00-000Z_abc.jsonl"
    assert choice.resolve() == find_session(tmp_path, "abc") == newest
    # an id is a name, not a pattern
    assert find_session(tmp_path, "*") is None
    assert find_session(tmp_path, "ab?") is None


def test_importing_the_package_and_its_mcp_module_loads_no_sdk(tmp_path: Path) -> None:
    code = (
        "import sys, pi_condense, pi_condense.mcp, pi_condense.mcp.runner, pi_condense.cli; "
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "[]"


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    header = {"type": "session", "version": 3, "id": "s-1", "timestamp": "t", "cwd": "/"}
    session.write_text(json.dumps(header) + "\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _mcp(["--transport", "http", "--port", str(port), str(session)], tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"pi-condense: cannot listen on 127.0.0.1:{port}: "), line
