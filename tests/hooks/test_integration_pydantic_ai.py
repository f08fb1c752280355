"""pi_condense.integrations.pydantic_ai over real pydantic-ai agent runs.

Every run is pydantic-ai's own agent loop (``Agent.run_sync``) with a ``FunctionModel``: the
function sees exactly the messages a provider model would be sent, and its tool calls are run
by pydantic-ai itself (the ``read`` tool below and the hook's recovery tools).
"""

from __future__ import annotations

import json
import re
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import openai
import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tools import RunContext

from pi_condense import CondenseWarning
from pi_condense.adapters.pydantic_ai import PydanticAICodec, RequestPart, assemble, expand
from pi_condense.integrations.pydantic_ai import CondenseHistory, has_history_processors
from support import hook_runs as runs
from support.chat_wire import ChatCompletionsModel
from support.llm_servers import LoopbackLLMServer

REF = re.compile(r"ref `(t\d+)`")
STAMP = 1_800_000_000_000


def clock() -> int:
    """A constant clock: the driver then numbers messages last+1, the same in every run."""
    return STAMP


def output(path: str) -> str:
    return f"contents of {path}\n" + "".join(f"{path} line {n}: some text\n" for n in range(150))


def dump(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def check_request(messages: list[ModelMessage]) -> None:
    """What a provider checks: requests and responses alternate from a request, every tool
    return answers a call of the response just before it, every call is answered once."""
    assert messages
    assert isinstance(messages[0], ModelRequest)
    assert isinstance(messages[-1], ModelRequest)
    open_calls: list[str] = []
    previous: Optional[type] = None
    for message in messages:
        if isinstance(message, ModelResponse):
            assert not open_calls, f"calls without results: {open_calls}"
            open_calls = [p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart)]
        else:
            assert isinstance(message, ModelRequest)
            for part in message.parts:
                if isinstance(part, (ToolReturnPart, RetryPromptPart)) and (
                    not isinstance(part, RetryPromptPart) or part.tool_name
                ):
                    assert part.tool_call_id in open_calls, part.tool_call_id
                    open_calls.remove(part.tool_call_id)
                    assert not (part.metadata or {}).get("pydantic_ai_synthesized_tool_return")
            assert not open_calls, f"calls without results: {open_calls}"
        previous = type(message)
        del previous


@dataclass
class Script:
    """The model: per prompt ``turns`` reads, then a reply; a ``recover`` prompt asks
    ``context_tree_query`` for every ref it sees and checks the answer."""

    turns: int = 3
    reuse_ids: bool = True
    seen: list[bytes] = field(default_factory=list)
    firsts: list[bool] = field(default_factory=list)
    n: int = 0
    recovered: dict[str, str] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def call_id(self) -> str:
        self.n += 1
        return "call_0" if self.reuse_ids else f"call_{self.n}"

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        check_request(messages)
        self.seen.append(dump(messages))
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        prompts = [p for p in last.parts if isinstance(p, UserPromptPart)]
        self.firsts.append(bool(prompts))
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        prompt = self.prompt(messages)
        if prompt.startswith("recover"):
            for part in returns:
                if part.tool_name == "context_tree_query":
                    self.recovered[self.asked[-1]] = str(part.content)
            refs = [r for r in REF.findall(dump(messages).decode()) if r not in self.asked]
            if refs and len(self.asked) < 3:
                self.asked.append(refs[0])
                args = {"toolCallIds": [refs[0]]}
                return ModelResponse(
                    parts=[ToolCallPart("context_tree_query", args, tool_call_id=self.call_id())]
                )
            return ModelResponse(parts=[TextPart("recovered")])
        done = sum(1 for _ in self.reads_since_prompt(messages))
        if done < self.turns:
            path = f"{prompt.split()[-1]}_{done}.txt"
            return ModelResponse(
                parts=[ToolCallPart("read", {"path": path}, tool_call_id=self.call_id())]
            )
        return ModelResponse(parts=[TextPart(f"done with {prompt}")])

    @staticmethod
    def prompt(messages: list[ModelMessage]) -> str:
        for message in reversed(messages):
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if (
                        isinstance(part, UserPromptPart)
                        and isinstance(part.content, str)
                        and not part.content.startswith("<compressed-chain")
                    ):
                        return part.content
        raise AssertionError("no prompt")

    @staticmethod
    def reads_since_prompt(messages: list[ModelMessage]) -> list[Any]:
        found = []
        for message in reversed(messages):
            if isinstance(message, ModelRequest) and any(
                isinstance(p, UserPromptPart)
                and isinstance(p.content, str)
                and not p.content.startswith("<compressed-chain")
                for p in message.parts
            ):
                break
            if isinstance(message, ModelResponse):
                found.extend(p for p in message.parts if isinstance(p, ToolCallPart))
        return found


class Recording(CondenseHistory):
    """The hook, also keeping what it handed pydantic-ai (before pydantic-ai's own repair)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.outputs: list[list[ModelMessage]] = []

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        result = await super().before_model_request(ctx, request_context)
        self.outputs.append(list(result.messages))
        return result


def make_agent(script: Script, hook: Optional[CondenseHistory], *, process: bool = False) -> Agent:
    capabilities: list[Any] = []
    tools: list[Any] = []
    if hook is not None:
        capabilities = [ProcessHistory(hook.acondense) if process else hook]
        tools = hook.tools
    agent: Agent = Agent(
        FunctionModel(script),
        system_prompt="You read files.",
        capabilities=capabilities,
        tools=tools,
    )

    @agent.tool_plain
    def read(path: str) -> str:
        """Read a file."""
        return output(path)

    return agent


def converse(
    agent: Agent, prompts: list[str], history: Optional[list[ModelMessage]] = None
) -> list[ModelMessage]:
    for prompt in prompts:
        result = agent.run_sync(prompt, message_history=history)
        history = result.all_messages()
    assert history is not None
    return history


PROMPTS = [f"task p{i}" for i in range(5)]


def stub_paths(messages: list[ModelMessage]) -> list[tuple[str, str]]:
    """(ref, path of the call it answers) for every stub in a request."""
    found = []
    for i, message in enumerate(messages):
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart) and isinstance(part.content, str):
                refs = REF.findall(part.content)
                if refs:
                    response = messages[i - 1]
                    assert isinstance(response, ModelResponse)
                    (call,) = [
                        p
                        for p in response.parts
                        if isinstance(p, ToolCallPart) and p.tool_call_id == part.tool_call_id
                    ]
                    assert isinstance(call.args, dict)
                    found.append((refs[0], str(call.args["path"])))
    return found


def run_all(tmp_path: Path, *, reuse_ids: bool, process: bool = False) -> dict[str, Any]:
    plain_script = Script(reuse_ids=reuse_ids)
    converse(make_agent(plain_script, None), PROMPTS)
    hook = Recording(session=tmp_path / "s.jsonl", clock=clock)
    script = Script(reuse_ids=reuse_ids)
    history = converse(make_agent(script, hook, process=process), [*PROMPTS, "recover"])
    return {"plain": plain_script, "script": script, "hook": hook, "history": history}


@pytest.mark.parametrize("reuse_ids", [True, False], ids=["reused-ids", "unique-ids"])
def test_agent_run_condenses_and_every_ref_returns_its_own_output(
    tmp_path: Path, reuse_ids: bool
) -> None:
    run = run_all(tmp_path, reuse_ids=reuse_ids)
    hook, script, plain = run["hook"], run["script"], run["plain"]
    # the model saw the same conversation, condensed by more than half
    calls = len(plain.seen)
    assert calls == len(PROMPTS) * 4
    assert len(script.seen) > calls
    sent = sum(map(len, script.seen[:calls]))
    raw = sum(map(len, plain.seen))
    assert sent < 0.5 * raw, (sent, raw)
    # our own output is already a valid request (pydantic-ai's repair had nothing to do)
    for request in hook.outputs:
        check_request(request)
    # the run's history is raw: no stubs, every read's full output
    history = run["history"]
    assert not REF.findall(dump(history).decode())
    # (plus the three outputs context_tree_query returned)
    assert dump(history).decode().count("line 149: some text") == 3 * len(PROMPTS) + 3
    # the model called context_tree_query through pydantic-ai and got the exact original back
    assert len(script.recovered) == 3
    last = hook.outputs[-1]
    paths = dict(stub_paths(hook.outputs[-2]))
    for ref, answer in script.recovered.items():
        assert output(paths[ref]) in answer, ref
    # and every stub of the last request recovers the output of the very call it replaced
    checked = stub_paths(last)
    assert len(checked) >= 6
    for ref, path in checked:
        answer = hook.execute("context_tree_query", {"toolCallIds": [ref]})
        assert output(path) in answer, (ref, path)
    assert len({ref for ref, _ in checked}) == len(checked)


def test_untouched_prefix_is_byte_identical_between_calls(tmp_path: Path) -> None:
    script = Script()
    hook = CondenseHistory(session=tmp_path / "s.jsonl", clock=clock)
    converse(make_agent(script, hook), PROMPTS)
    changed = []
    for i in range(1, len(script.seen)):
        before = json.loads(script.seen[i - 1])
        after = json.loads(script.seen[i])
        kept = before
        if after[: len(kept)] != kept:
            changed.append(i)
            assert script.firsts[i], f"prefix changed inside a run at call {i}"
    # the prefix changed only at a prompt's first call, and did change (the flush)
    assert changed
    assert len(changed) <= len(PROMPTS)


def test_written_back_history_is_recognised(tmp_path: Path) -> None:
    capability = run_all(tmp_path / "a", reuse_ids=True)
    back = run_all(tmp_path / "b", reuse_ids=True, process=True)
    hook = back["hook"]
    assert hook.stats.written_back > 0
    assert hook.stats.rebuilds == 0
    # the model sees the very same requests either way
    assert [json.loads(s) for s in strip_runs(back["script"].seen)] == [
        json.loads(s) for s in strip_runs(capability["script"].seen)
    ]
    # the written-back history holds the condensed view; its refs still recover their output
    history = back["history"]
    checked = stub_paths(history)
    assert checked
    for ref, path in checked:
        assert output(path) in hook.execute("context_tree_query", {"toolCallIds": [ref]})


# Fields that differ between two runs of the same script: ids and wall-clock readings
# (pydantic-ai 2.78 added request_timestamp and duration to each response).
RUN_FIELDS = frozenset({"run_id", "conversation_id", "timestamp", "request_timestamp", "duration"})


def strip_runs(seen: list[bytes]) -> list[bytes]:
    """Requests with the fields that differ between two runs blanked."""
    return [json.dumps(blank_runs(json.loads(s)), separators=(",", ":")).encode() for s in seen]


def blank_runs(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "" if k in RUN_FIELDS else blank_runs(v) for k, v in value.items()}
    if isinstance(value, list):
        return [blank_runs(v) for v in value]
    return value


def test_restart_continues_with_the_same_refs_and_prefix(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first = CondenseHistory(session=path, clock=clock)
    history = converse(make_agent(Script(), first), PROMPTS[:3])
    saved = dump(history)
    # the process dies here: the session file as it is now is what a new process finds
    shutil.copy(path, tmp_path / "copy.jsonl")
    going = Script()
    seen_before = first.stats.messages_seen
    converse(make_agent(going, first), PROMPTS[3:4], history)
    # a new process: a new hook on the same file, the history loaded with pydantic's serializer
    second = Recording(session=tmp_path / "copy.jsonl", clock=clock)
    again = Script()
    loaded = ModelMessagesTypeAdapter.validate_json(saved)
    converse(make_agent(again, second), PROMPTS[3:4], loaded)
    assert second.stats.rebuilds == 0
    # it took in only what was new, as the first process did (the last reply onwards)
    assert second.stats.messages_seen == first.stats.messages_seen - seen_before
    assert strip_runs(again.seen) == strip_runs(going.seen)
    old = json.loads(again.seen[0])[: len(history)]
    assert old == json.loads(going.seen[0])[: len(history)]
    refs = REF.findall(again.seen[0].decode())
    assert refs
    assert refs == REF.findall(going.seen[0].decode())
    for ref, read_path in stub_paths(second.outputs[0]):
        assert output(read_path) in second.execute("context_tree_query", {"toolCallIds": [ref]})


def test_restart_from_a_written_back_history(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first = CondenseHistory(session=path, clock=clock)
    history = converse(make_agent(Script(), first, process=True), PROMPTS[:3])
    assert REF.findall(dump(history).decode())  # the saved history holds stubs
    saved = dump(history)
    shutil.copy(path, tmp_path / "copy.jsonl")
    going = Script()
    converse(make_agent(going, first, process=True), PROMPTS[3:4], history)
    second = CondenseHistory(session=tmp_path / "copy.jsonl", clock=clock)
    again = Script()
    loaded = ModelMessagesTypeAdapter.validate_json(saved)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CondenseWarning)  # it is recognised: nothing to warn of
        converse(make_agent(again, second, process=True), PROMPTS[3:4], loaded)
    assert second.driver.stats.rebuilds == 0
    # what the model sees is the same; bookkeeping the session does not keep (token usage of
    # old responses, run ids) comes back empty
    assert [visible(s) for s in again.seen] == [visible(s) for s in going.seen]
    refs = REF.findall(again.seen[0].decode())
    assert refs
    for ref, read_path in stub_paths(json_messages(again.seen[-1])):
        assert output(read_path) in second.execute("context_tree_query", {"toolCallIds": [ref]})


def visible(raw: bytes) -> list[Any]:
    """A request as the model sees it: each message's kind and its parts' content."""
    keep = ("part_kind", "content", "tool_name", "args", "tool_call_id")
    return [(m["kind"], [{k: p.get(k) for k in keep} for p in m["parts"]]) for m in json.loads(raw)]


def json_messages(raw: bytes) -> list[ModelMessage]:
    return ModelMessagesTypeAdapter.validate_json(raw)


def test_plain_history_processor_and_history_processors_detection(tmp_path: Path) -> None:
    hook = CondenseHistory(session=tmp_path / "s.jsonl", clock=clock)
    script = Script()
    agent: Agent = Agent(
        FunctionModel(script), capabilities=[ProcessHistory(hook)], tools=hook.tools
    )

    @agent.tool_plain
    def read(path: str) -> str:
        """Read a file."""
        return output(path)

    converse(agent, PROMPTS[:4])
    assert hook.stats.calls == len(script.seen)
    assert REF.findall(script.seen[-1].decode())
    assert hook.stats.written_back > 0
    assert hook.stats.rebuilds == 0
    # pydantic-ai 2.x dropped Agent(history_processors=...): the detection says so
    try:
        Agent(FunctionModel(script), history_processors=[hook])  # type: ignore[call-arg]
        accepted = True
    except TypeError:
        accepted = False
    assert has_history_processors() == accepted


# ---------------------------------------------------------------------------- the codec


def test_codec_keeps_untouched_requests_and_rebuilds_changed_ones() -> None:
    system = SystemPromptPart("sys")
    first = ModelRequest(parts=[system, UserPromptPart("hello")], instructions="be brief")
    call = ModelResponse(
        parts=[
            ToolCallPart("read", '{"path": "a"}', tool_call_id="c1"),
            ToolCallPart("read", {"path": "b"}, tool_call_id="c2"),
        ]
    )
    returns = ModelRequest(
        parts=[
            ToolReturnPart("read", "A" * 50, tool_call_id="c1"),
            ToolReturnPart("read", "B" * 50, tool_call_id="c2"),
        ],
        run_id="r1",
    )
    history: list[ModelMessage] = [first, call, returns]
    items = expand(history)
    codec = PydanticAICodec()
    units = codec.decode(items)
    assert [u.message is None for u in units] == [True, False, False, False, False]
    assert units[2].message is not None
    assert units[2].message["content"][0]["arguments"] == {"path": "a"}
    assert units[3].message == {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "read",
        "content": [{"type": "text", "text": "A" * 50}],
        "isError": False,
    }
    # untouched: the very same objects come back
    assert all(a is b for a, b in zip(assemble(items), history, strict=False))
    # the second return stubbed: the request is rebuilt with its metadata, the first part kept
    from pi_condense.adapters.base import Out

    stub = {
        "role": "toolResult",
        "toolCallId": "c2",
        "toolName": "read",
        "content": [{"type": "text", "text": "[stub]"}],
        "isError": False,
        "timestamp": 1_800_000_000_000,
    }
    outs = [Out(None, (items[0],))] + [
        Out(u.message, (items[i],)) for i, u in enumerate(units[1:4], start=1)
    ]
    outs.append(Out(stub, ()))
    sent = assemble(codec.encode(outs))
    assert sent[0] is first
    assert sent[1] is call
    rebuilt = sent[2]
    assert isinstance(rebuilt, ModelRequest)
    assert rebuilt is not returns
    assert rebuilt.run_id == "r1"
    assert rebuilt.parts[0] is returns.parts[0]
    new = rebuilt.parts[1]
    assert isinstance(new, ToolReturnPart)
    assert (new.tool_name, new.tool_call_id, new.content) == ("read", "c2", "[stub]")
    assert new.timestamp.timestamp() == 1_800_000_000
    # the codec's own output, expanded again, compares equal item by item
    assert expand(sent) == codec.encode(outs)
    assert isinstance(items[0], RequestPart)
    assert items[0] == RequestPart(system, None)


def test_pydantic_ai_rejects_a_reused_id_within_one_response() -> None:
    """What the reused-id runs above can do: pydantic-ai allows the same id on every turn, but
    not twice in one response (so those runs reuse it across turns only)."""
    from pydantic_ai.exceptions import UnexpectedModelBehavior

    def twice(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls = [ToolCallPart("read", {"path": p}, tool_call_id="call_0") for p in "ab"]
        return ModelResponse(parts=list(calls))

    agent: Agent = Agent(FunctionModel(twice))

    @agent.tool_plain
    def read(path: str) -> str:
        """Read a file."""
        return output(path)

    with pytest.raises(UnexpectedModelBehavior, match="unique `tool_call_id`"):
        agent.run_sync("go")


def test_importing_pi_condense_does_not_import_pydantic_ai() -> None:
    import subprocess
    import sys

    code = (
        "import sys, pi_condense, pi_condense.integrations, pi_condense.adapters\n"
        "import pi_condense.live\n"
        "assert 'pydantic_ai' not in sys.modules, 'pydantic_ai imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_reloaded_history_gets_its_own_objects_back(tmp_path: Path) -> None:
    hook = CondenseHistory(session=tmp_path / "s.jsonl", clock=clock)
    history = converse(make_agent(Script(), hook), PROMPTS[:3])
    first = hook.condense(history)
    reloaded = ModelMessagesTypeAdapter.validate_json(dump(history))
    again = hook.condense(reloaded)
    assert dump(again) == dump(first)
    mine = {id(m) for m in reloaded}
    kept = [m for m in again if id(m) in mine]
    # every message the render left alone is the caller's (a request with a stub is a copy)
    assert len(kept) == sum(1 for m in again if not REF.search(dump([m]).decode()))
    assert len(kept) > len(again) // 2


def test_an_unknown_condensed_history_warns_once(tmp_path: Path) -> None:
    first = CondenseHistory(session=tmp_path / "s.jsonl", clock=clock)
    history = converse(make_agent(Script(), first, process=True), PROMPTS[:3])
    saved = dump(history)
    assert b'"pi_condense":"rendered"' in saved  # the stubs it wrote back are marked
    # the same process carries on without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", CondenseWarning)
        converse(make_agent(Script(), first, process=True), PROMPTS[3:4], history)
    # a hook on ANOTHER session cannot map these stubs back: it says so, once
    other = CondenseHistory(session=tmp_path / "other.jsonl", clock=clock)
    assert other.driver.stats.rebuilds == 0
    loaded = ModelMessagesTypeAdapter.validate_json(saved)
    with pytest.warns(CondenseWarning, match="capability") as caught:
        converse(make_agent(Script(), other, process=True), PROMPTS[3:5], loaded)
    assert len([w for w in caught if issubclass(w.category, CondenseWarning)]) == 1
    # and a raw history (the capability's) never warns
    third = CondenseHistory(session=tmp_path / "raw.jsonl", clock=clock)
    raw = converse(make_agent(Script(), third), PROMPTS[:2])
    fourth = CondenseHistory(session=tmp_path / "raw.jsonl", clock=clock)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CondenseWarning)
        converse(make_agent(Script(), fourth), PROMPTS[2:3], dump_load(raw))


def dump_load(messages: list[ModelMessage]) -> list[ModelMessage]:
    return ModelMessagesTypeAdapter.validate_json(dump(messages))


def wire_loop(
    hook: CondenseHistory,
    script: runs.Script,
    prompts: range,
    stored: Optional[list[ModelMessage]],
    *,
    process: bool,
) -> tuple[list[ModelMessage], ChatCompletionsModel]:
    """pydantic-ai runs of its own OpenAI chat model over the real client and the wire."""
    wire = ChatCompletionsModel(script)
    with LoopbackLLMServer(wire) as server:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="test", max_retries=0)
        model = OpenAIChatModel("scripted", provider=OpenAIProvider(openai_client=client))
        agent: Agent = Agent(
            model,
            system_prompt="You read files.",
            capabilities=[ProcessHistory(hook.acondense) if process else hook],
            tools=hook.tools,
        )

        @agent.tool_plain
        def read(path: str) -> str:
            """Read a file."""
            return runs.output(path)

        history = stored
        for p in prompts:
            history = agent.run_sync(f"task {p}: read the files", message_history=history)
            history = history.all_messages()
    assert history is not None
    return history, wire


@pytest.mark.usefixtures("loopback_only")
@pytest.mark.parametrize("process", [False, True], ids=["capability", "process-history"])
def test_nothing_is_lost_across_spills_chains_and_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, process: bool
) -> None:
    """Issue 38 items 1-5 in pydantic-ai runs over the wire, in both modes (see
    spill_chain_restart): with ProcessHistory the saved history holds the condensed output,
    which the restarted process recognises in the conversation's own session."""
    monkeypatch.setenv("PI_CONDENSE_SESSION_DIR", str(tmp_path / "sessions"))
    runs.spill_chain_restart(
        lambda: CondenseHistory(config=runs.SPILLING),
        lambda hook, script, prompts, stored: wire_loop(
            hook, script, prompts, stored, process=process
        ),
        dump_load,
        lambda hook, history: seen_parts(hook.condense(history)),
    )


def seen_parts(messages: list[ModelMessage]) -> list[Any]:
    """What a provider is sent of a history: its parts in order, without the bookkeeping
    (timestamps, run ids) and the request boundaries, which a restarted process rebuilds
    (consecutive request parts are consecutive provider messages either way)."""
    keep = ("part_kind", "content", "tool_name", "args", "tool_call_id")
    raw = json.loads(dump(messages))
    return [{k: p.get(k) for k in keep} for m in raw for p in m["parts"]]


SKILL = "skills/demo/SKILL.md"  # a default protected path (``**/skills/**/*.md``)


class PathScript(Script):
    """The model: reads the paths its prompt lists (``read a b ...``), one a call, then replies."""

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        check_request(messages)
        self.seen.append(dump(messages))
        paths = self.prompt(messages).split()[1:]
        done = len(self.reads_since_prompt(messages))
        if done < len(paths):
            call = ToolCallPart("read", {"path": paths[done]}, tool_call_id=self.call_id())
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart("done")])


def read_returns(raw: bytes) -> list[tuple[str, str]]:
    """(path read, what the model sees of it) for every ``read`` result of a request."""
    messages = json.loads(raw)
    paths = {
        p["tool_call_id"]: p["args"]["path"]
        for m in messages
        for p in m["parts"]
        if p["part_kind"] == "tool-call" and p["tool_name"] == "read"
    }
    return [
        (paths[p["tool_call_id"]], p["content"])
        for m in messages
        for p in m["parts"]
        if p["part_kind"] == "tool-return" and p["tool_name"] == "read"
    ]


def test_restart_after_a_protected_reread_that_the_live_render_kept(tmp_path: Path) -> None:
    """A protected path read twice: the live render keeps the earlier read as it is (no flush
    lowered the supersession floor to it; only d and e, read after it, were flushed), a cold
    render supersedes it. A restarted ProcessHistory hook still recognises its own output."""
    prompts = [f"read {SKILL} a", "read b c", f"read {SKILL} d e", "read g"]
    path = tmp_path / "s.jsonl"
    first = CondenseHistory(session=path, clock=clock)
    history = converse(make_agent(PathScript(reuse_ids=False), first, process=True), prompts)
    saved = dump(history)
    kept = [text for read, text in read_returns(saved) if read == SKILL]
    assert kept == [output(SKILL)] * 2  # the live output kept the earlier read
    assert len(REF.findall(saved.decode())) >= 3  # and stubbed reads after the later one
    shutil.copy(path, tmp_path / "copy.jsonl")
    going = PathScript(reuse_ids=False, n=100)
    converse(make_agent(going, first, process=True), ["read h"], history)
    # a new process: a new hook on the same session file, the saved history reloaded
    second = CondenseHistory(session=tmp_path / "copy.jsonl", clock=clock)
    again = PathScript(reuse_ids=False, n=100)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CondenseWarning)
        converse(make_agent(again, second, process=True), ["read h"], json_messages(saved))
    session = second.driver._session
    assert second.driver.stats.rebuilds == 0
    assert len(session.branch()) == len(session)  # one branch: nothing taken in twice
    # the model sees what the first process sent it
    assert [visible(s) for s in again.seen] == [visible(s) for s in going.seen]
    refs = [ref for ref, _ in stub_paths(json_messages(again.seen[-1]))]
    assert len(refs) >= 5
    for ref, read_path in stub_paths(json_messages(again.seen[-1])):
        assert output(read_path) in second.execute("context_tree_query", {"toolCallIds": [ref]})


def test_restarts_with_some_protected_reads_superseded_and_some_not(tmp_path: Path) -> None:
    """Three processes: the second starts cold and supersedes the first read of a protected
    path, then reads it a third time (the live render keeps the second read as it is); the
    third recognises a history where one earlier read is superseded and the other is not."""
    history: Optional[list[ModelMessage]] = None
    calls = 0
    given: list[bytes] = []
    for k, prompts in enumerate(
        [[f"read {SKILL} a", f"read {SKILL} b"], [f"read {SKILL} c d", "read e"], ["read f"]]
    ):
        path = tmp_path / f"s{k}.jsonl"  # each process finds the file as the previous left it
        if k:
            shutil.copy(tmp_path / f"s{k - 1}.jsonl", path)
            given.append(dump(history or []))
            history = json_messages(given[-1])
        hook = CondenseHistory(session=path, clock=clock)
        script = PathScript(reuse_ids=False, n=calls)
        with warnings.catch_warnings():
            warnings.simplefilter("error", CondenseWarning)
            history = converse(make_agent(script, hook, process=True), prompts, history)
        calls = script.n
        session = hook.driver._session
        assert hook.driver.stats.rebuilds == 0
        assert len(session.branch()) == len(session)
    reads = [text for read, text in read_returns(given[-1]) if read == SKILL]
    assert reads[0].startswith(f"[Superseded: {SKILL} was read again")
    assert reads[1:] == [output(SKILL)] * 2
    checked = stub_paths(json_messages(script.seen[-1]))
    assert len(checked) >= 4
    for ref, read_path in checked:
        assert output(read_path) in hook.execute("context_tree_query", {"toolCallIds": [ref]})
