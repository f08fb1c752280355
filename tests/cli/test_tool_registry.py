"""The tool registry: provider definitions, dispatch, and a live session file."""

from __future__ import annotations

import gzip
import json
import re
import tarfile
import warnings
from pathlib import Path
from typing import Any

import pytest

from pi_condense.errors import SessionError
from pi_condense.session import SessionFile
from pi_condense.state import PrunerState
from pi_condense.tools import condense_tools

NAMES = [
    "context_tree_query",
    "session_overview",
    "session_read_section",
    "session_search",
    "session_recovery_context",
]


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def small_session(path: Path) -> Path:
    header = {"type": "session", "version": 3, "id": "s-1", "timestamp": "t", "cwd": "/"}
    user = {
        "type": "message",
        "id": "u1",
        "parentId": None,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": "please list the files"},
    }
    assistant = {
        "type": "message",
        "id": "a1",
        "parentId": "u1",
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": "c-run", "name": "bash", "arguments": {"cmd": "ls"}},
                {"type": "toolCall", "id": "c-me", "name": "session_recovery_context"},
            ],
        },
    }
    return write(path, [header, user, assistant])


# ------------------------------------------------------------------ schema validation

_KEYWORDS = {
    "object": {"type", "description", "properties", "required", "additionalProperties"},
    "array": {"type", "description", "items"},
    "string": {"type", "description", "enum", "minLength", "maxLength"},
    "number": {"type", "description", "minimum", "maximum"},
    "boolean": {"type", "description"},
}
_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def check_schema(schema: Any, path: str = "$") -> None:
    """JSON Schema structure as both providers accept it (the subset our tools use)."""
    assert isinstance(schema, dict), path
    kind = schema.get("type")
    assert kind in _KEYWORDS, f"{path}: type {kind!r}"
    assert set(schema) <= _KEYWORDS[kind], f"{path}: {set(schema) - _KEYWORDS[kind]}"
    if "description" in schema:
        assert isinstance(schema["description"], str)
        assert schema["description"].strip()
    if kind == "object":
        properties = schema.get("properties", {})
        assert isinstance(properties, dict)
        for name, sub in properties.items():
            assert _NAME.fullmatch(name), f"{path}: property name {name!r}"
            check_schema(sub, f"{path}.{name}")
        required = schema.get("required", [])
        assert isinstance(required, list)
        assert set(required) <= set(properties), path
        assert schema.get("additionalProperties", False) in (True, False)
    elif kind == "array":
        check_schema(schema["items"], f"{path}[]")
    elif kind == "string":
        assert all(isinstance(v, str) for v in schema.get("enum", []))
        for key in ("minLength", "maxLength"):
            assert isinstance(schema.get(key, 0), int)
        assert schema.get("minLength", 0) <= schema.get("maxLength", 10**9)
    elif kind == "number":
        assert schema.get("minimum", -(10**9)) <= schema.get("maximum", 10**9)


def test_definitions_validate_as_openai_and_anthropic_tools(tmp_path: Path) -> None:
    tools = condense_tools(small_session(tmp_path / "s.jsonl"))
    assert tools.names == NAMES
    openai_defs, anthropic_defs = tools.openai(), tools.anthropic()
    responses_defs = tools.openai_responses()
    for defn in openai_defs:
        assert set(defn) == {"type", "function"}
        assert defn["type"] == "function"
        assert set(defn["function"]) == {"name", "description", "parameters"}
        assert _NAME.fullmatch(defn["function"]["name"])
        assert defn["function"]["parameters"]["type"] == "object"
        check_schema(defn["function"]["parameters"])
    for defn in anthropic_defs:
        assert set(defn) == {"name", "description", "input_schema"}
        assert _NAME.fullmatch(defn["name"])
        assert defn["input_schema"]["type"] == "object"
        check_schema(defn["input_schema"])
    for defn in responses_defs:
        assert set(defn) == {"type", "name", "description", "parameters", "strict"}
    # The same definitions through JSON (what a request body carries).
    assert json.loads(json.dumps(openai_defs)) == openai_defs

    # The official SDKs' own types, when they are installed (the test extra has them).
    try:
        from openai.types.chat import ChatCompletionFunctionTool, ChatCompletionToolParam
        from openai.types.responses import FunctionToolParam
        from pydantic import TypeAdapter
    except ImportError:
        pass
    else:
        for defn in openai_defs:
            TypeAdapter(ChatCompletionToolParam).validate_python(defn)
            model = ChatCompletionFunctionTool.model_validate(defn)
            assert model.function.parameters == defn["function"]["parameters"]
        for defn in responses_defs:
            TypeAdapter(FunctionToolParam).validate_python(defn)
    try:
        from anthropic.types import ToolParam
        from anthropic.types.tool_param import InputSchemaTyped
        from pydantic import TypeAdapter
    except ImportError:
        pass
    else:
        for defn in anthropic_defs:
            assert TypeAdapter(ToolParam).validate_python(defn)["name"] == defn["name"]
            TypeAdapter(InputSchemaTyped).validate_python(defn["input_schema"])


def test_definitions_are_copies(tmp_path: Path) -> None:
    tools = condense_tools(small_session(tmp_path / "s.jsonl"))
    first = tools.openai()
    first[0]["function"]["parameters"]["properties"].clear()
    assert tools.openai()[0]["function"]["parameters"]["properties"]


def test_query_tool_definition_carries_the_reference_strings(tmp_path: Path) -> None:
    query = condense_tools(small_session(tmp_path / "s.jsonl")).anthropic()[0]
    assert query["name"] == "context_tree_query"
    assert query["description"].startswith(
        "Retrieve original tool call results that have been pruned from active context."
    )
    assert query["input_schema"]["required"] == ["toolCallIds"]


# ------------------------------------------------------------------------ dispatch


def test_execute_accepts_dicts_and_json_text(tmp_path: Path) -> None:
    tools = condense_tools(small_session(tmp_path / "s.jsonl"))
    as_dict = tools.execute("session_search", {"query": "LIST"})
    as_text = tools.execute("session_search", '{"query": "LIST"}')
    assert as_dict == as_text
    assert json.loads(as_dict)["matches"][0]["entryId"] == "u1"
    bad = tools.call("session_search", "{not json")
    assert bad.is_error
    assert bad.text.startswith("session_search: the arguments are not valid JSON")
    assert tools.call("session_overview", "[1, 2]").is_error
    assert json.loads(tools.execute("session_overview", None))["counts"]["sections"] == 1
    with pytest.raises(KeyError, match="no tool named 'nope'"):
        tools.execute("nope", {})
    assert "session_search" in tools
    assert len(tools) == 5


def test_running_call_id_reaches_the_recovery_context(tmp_path: Path) -> None:
    tools = condense_tools(small_session(tmp_path / "s.jsonl"))
    pending = json.loads(tools.execute("session_recovery_context", {}, tool_call_id="c-me"))
    assert [p["id"] for p in pending["pendingToolCalls"]] == ["c-run"]


def test_guidelines_list_every_tools_guidance(tmp_path: Path) -> None:
    guidelines = condense_tools(small_session(tmp_path / "s.jsonl")).guidelines()
    assert len(guidelines) == 5
    assert guidelines[0].startswith("When you need the full output of a tool call")


def test_unknown_leaf_fails_early(tmp_path: Path) -> None:
    with pytest.raises(SessionError):
        condense_tools(small_session(tmp_path / "s.jsonl"), leaf="missing")


# ------------------------------------------------------------------ live session file


def summarize(writer: SessionFile, call_id: str, text: str) -> None:
    """Append what the pruner writes for one summarized output: its index record and a
    summary listing it as ``t1``."""
    record = {
        "toolCallId": call_id,
        "toolName": "bash",
        "args": {"cmd": "ls"},
        "resultText": text,
        "isError": False,
        "turnIndex": 0,
        "timestamp": 5,
        "resultTimestamp": 7,
    }
    writer.append_custom("context-prune-index", {"toolCalls": [record]})
    writer.append_custom_message(
        "context-prune-summary",
        "summary",
        False,
        {"toolCallRefs": [{"shortId": "t1", "toolCallId": call_id, "resultTimestamp": 7}]},
    )


def test_entries_appended_to_the_file_are_seen(tmp_path: Path) -> None:
    path = small_session(tmp_path / "s.jsonl")
    tools = condense_tools(path)
    assert tools.execute("context_tree_query", {"toolCallIds": ["t1"]}).endswith(
        "(not found in index \u2014 may not have been summarized yet)"
    )
    writer = SessionFile.load(path)  # another process (Pi) appending to the same file
    writer.append_message({"role": "user", "content": "a brand new request"})
    summarize(writer, "c-run", "README.md")
    found = json.loads(tools.execute("session_search", {"query": "brand new"}))
    assert found["totalMatches"] == 1
    assert tools.execute("context_tree_query", {"toolCallIds": ["t1"]}).endswith("\n\nREADME.md")


def test_appended_entries_that_branch_off_are_followed_to_the_files_last_entry(
    tmp_path: Path,
) -> None:
    # A writer (a hook whose client dropped a message, Pi after /tree) appends a branch that
    # does not continue from the last entry. The tools read the session as Pi loads it: the
    # branch ending at the file's last entry, with the refs written on it.
    path = small_session(tmp_path / "s.jsonl")
    tools = condense_tools(path)
    assert "not found in index" in tools.execute("context_tree_query", {"toolCallIds": ["t1"]})
    writer = SessionFile.load(path)
    writer.set_leaf("u1")  # the assistant message a1 is left on its own branch
    summarize(writer, "c-new", "ON THE NEW BRANCH")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a reader appends nothing: no warning about its leaf
        answer = tools.execute("context_tree_query", {"toolCallIds": ["t1"]})
    assert answer.endswith("\n\nON THE NEW BRANCH")
    assert answer == condense_tools(path).execute("context_tree_query", {"toolCallIds": ["t1"]})


def test_a_rewritten_file_is_loaded_again(tmp_path: Path) -> None:
    path = small_session(tmp_path / "s.jsonl")
    tools = condense_tools(path)
    assert json.loads(tools.execute("session_overview", {}))["counts"]["selectedEntries"] == 2
    small_session(path)  # same bytes: nothing changes
    lines = path.read_text().splitlines()[:2]
    path.write_text("\n".join(lines) + "\n")  # truncated: the first user message only
    assert json.loads(tools.execute("session_overview", {}))["counts"]["selectedEntries"] == 1


def test_explicit_state_and_in_memory_session(tmp_path: Path) -> None:
    session = SessionFile.load(small_session(tmp_path / "s.jsonl"))
    state = PrunerState()
    state.add_batch(
        [
            {
                "toolCallId": "x",
                "toolName": "read",
                "args": {},
                "resultText": "FROM THE GIVEN STATE",
                "isError": False,
                "turnIndex": 2,
                "timestamp": 1,
                "resultTimestamp": 2,
            }
        ]
    )
    tools = condense_tools(session, state=state, refresh=False)
    assert tools.execute("context_tree_query", {"toolCallIds": ["x"]}).endswith(
        "Turn: 2\n\nFROM THE GIVEN STATE"
    )


def test_spill_vector_through_the_registry(conformance_dir: Path, tmp_path: Path) -> None:
    vector_dir = conformance_dir / "replay" / "large-protect-spill"
    path = tmp_path / "session.jsonl"
    path.write_bytes(gzip.decompress((vector_dir / "session.jsonl.gz").read_bytes()))
    with tarfile.open(vector_dir / "blobs.tar.gz") as tar:
        safe: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(tmp_path, **safe)
    recorded = json.loads((vector_dir / "meta.json").read_text())["options"]["sessionDir"]
    tools = condense_tools(path, recorded_session_dir=recorded)
    queries = json.loads(gzip.decompress((vector_dir / "query.json.gz").read_bytes()))["queries"]
    for query in queries:
        assert (
            tools.execute("context_tree_query", {"toolCallIds": query["toolCallIds"]})
            == (query["text"])
        )
