"""Deterministic workloads: multi-prompt coding sessions in Anthropic Messages form, with
facts planted in tool outputs and probes asking for them.

Everything is built from a seed (``random.Random``) and, for the real-session workload, from
``tests/data/fixtures/pi-sessions/large-session.jsonl.gz`` (a real Pi session): no network, no
model weights, the same bytes on every run.
"""

from __future__ import annotations

import base64
import gzip
import json
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[2]
REAL_SESSION = REPO / "tests" / "data" / "fixtures" / "pi-sessions" / "large-session.jsonl.gz"

SIZES = (100, 400, 1500, 3000, 5000, 8000, 20000, 60000, 120000, 300000)
SPILL_BYTES = 65536  # pi-condense's default spillThreshold
HEAD_CHARS = 2000

# a 1x1 PNG; screenshots differ by a trailing comment chunk so each image is distinct
_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def _tool(name: str, description: str, *args: str) -> dict[str, Any]:
    properties = {a: {"type": "string"} for a in args}
    return {
        "name": name,
        "description": description,
        "input_schema": {"type": "object", "properties": properties},
    }


TOOLS = [
    _tool("read", "Read a file", "path"),
    _tool("grep", "Search files", "pattern"),
    _tool("bash", "Run a command", "command"),
    _tool("edit", "Edit a file", "path", "old", "new"),
    _tool("screenshot", "Screenshot a page", "url"),
]
SYSTEM = "You are a coding agent. Use the tools to inspect and change the repository."


def _png_source(png: bytes) -> dict[str, str]:
    data = base64.b64encode(png).decode()
    return {"type": "base64", "media_type": "image/png", "data": data}


@dataclass
class Fact:
    """A fact planted in one tool output, and the probe question that asks for it."""

    key: str
    answer: str
    question: str
    subject: str
    tool_use_id: str
    output_chars: int
    position: str  # head | middle | tail | caption | task
    prompt: int  # the prompt whose run produced the output
    head: str  # the output's first 2,000 chars: every cut of a summarizer's input keeps them
    tags: tuple[str, ...] = ()
    kind: str = "output"  # output, or what a task probe asks: asked | file | error | decision


@dataclass
class Probe:
    """A question asked with the request sent before ``prompts[after].messages[step]`` (an
    assistant message; step 0: when the prompt starts)."""

    fact: Fact
    after: int
    tags: tuple[str, ...]
    step: int = 0


@dataclass
class Prompt:
    """One user prompt and the run it starts: assistant messages and tool-result messages."""

    user: str
    messages: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Workload:
    name: str
    prompts: list[Prompt]
    facts: list[Fact]
    probes: list[Probe] = field(default_factory=list)


def _token(rng: random.Random) -> str:
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    a, b, c = rng.choice(letters), rng.choice(letters), rng.choice(letters)
    return f"{a}{b}{rng.randrange(10000, 99999)}{c}"


_SUBJECTS = (
    "the build id of service {w}",
    "the deploy token for {w}",
    "the checksum reported for {w}",
    "the port assigned to {w}",
    "the migration id of table {w}",
    "the commit that introduced {w}",
)
_WORDS = (
    "alpha", "beta", "gamma", "delta", "orbit", "nimbus", "quartz", "harbor", "lumen",
    "falcon", "cobalt", "meadow", "ember", "tundra", "vertex", "willow", "zephyr", "onyx",
)  # fmt: skip


def _filler(rng: random.Random, kind: str, locator: str, chars: int) -> list[str]:
    lines: list[str] = []
    total = 0
    n = 0
    while total < chars:
        n += 1
        w = rng.choice(_WORDS)
        if kind == "read":
            line = f"{n:5d}  def {w}_{n}(x):  return x * {rng.randrange(2, 99)}  # {locator}"
        elif kind == "grep":
            line = f"src/{w}/mod_{n % 40}.py:{rng.randrange(1, 900)}:    {w}_handler({n})"
        else:
            stamp = f"{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}"
            line = f"[{stamp}] INFO {w} step {n} ok ({rng.randrange(1, 999)} ms)"
        lines.append(line)
        total += len(line) + 1
    return lines


class _Builder:
    """Builds one workload's prompts, ids and planted facts."""

    def __init__(self, name: str, seed: int, reuse_ids: bool = False) -> None:
        self.rng = random.Random(seed)
        self.name = name
        self.prompts: list[Prompt] = []
        self.facts: list[Fact] = []
        self.reuse_ids = reuse_ids
        self.probes: list[Probe] = []  # the task probes and mid-run probes, as they are asked
        self._ids = 0
        self._files: dict[str, str] = {}
        self._task_facts: dict[str, Fact] = {}  # kind -> the latest fact of the prompt's run
        self._asked = 0  # facts planted before the run's previous probe point
        self._say: Optional[str] = None

    def prompt(self, text: str, ticket: bool = True) -> None:
        """A new user prompt; with ``ticket``, its text names a ticket (a task probe asks
        for it while its run goes on)."""
        self.prompts.append(Prompt(text))
        self._task_facts = {}
        self._asked = len(self.facts)
        if ticket:
            tok = _token(self.rng)
            self.prompts[-1].user = f"{text} (ticket {tok})"
            q = "Which ticket did the user give in the current prompt?"
            self._task("asked", "", tok, q, "ticket")
        if self.reuse_ids:
            self._ids = 0  # some providers' models number their calls per turn: ids repeat

    def _task(self, kind: str, call_id: str, answer: str, question: str, subject: str) -> Fact:
        """The latest fact of ``kind`` about the task in progress (probed by :meth:`ask`)."""
        fact = Fact(
            key=f"{self.name}:task:{len(self.prompts) - 1}:{kind}:{answer}",
            answer=answer,
            question=question,
            subject=subject,
            tool_use_id=call_id,
            output_chars=0,
            position="task",
            prompt=len(self.prompts) - 1,
            head="",
            tags=(f"task:{kind}",),
            kind=kind,
        )
        self._task_facts[kind] = fact
        return fact

    def decide(self, topic: str) -> None:
        """The next assistant message states a decision (a task probe asks for it)."""
        tok = _token(self.rng)
        self._say = f"Decision: set the {topic} limit to {tok}, then go on."
        self._task("decision", "", tok, f"What limit did we decide on for {topic}?", topic)

    def ask(self, step: Optional[int] = None) -> None:
        """A probe point before the next assistant message of the run in progress (or before
        its message ``step``): the task probes (the prompt's ticket, the file being edited, the
        last error, the last decision) and the facts planted in this run since its previous
        probe point (``mid-run``)."""
        after = len(self.prompts) - 1
        step = len(self.prompts[-1].messages) if step is None else step
        if self.probes and (self.probes[-1].after, self.probes[-1].step) == (after, step):
            return
        for fact in self._task_facts.values():
            if fact not in self.facts:
                self.facts.append(fact)
            self.probes.append(Probe(fact, after, fact.tags, step))
        for fact in self.facts[self._asked :]:
            if fact.kind == "output" and fact.prompt == after:
                self.probes.append(Probe(fact, after, ("mid-run", *fact.tags), step))
        self._asked = len(self.facts)

    def _id(self) -> str:
        self._ids += 1
        return (
            f"call_{self._ids}"
            if self.reuse_ids
            else f"toolu_{self.name}_{len(self.prompts)}_{self._ids}"
        )

    def _fact(self, call_id: str, locator: str, position: str, chars: int, head: str) -> Fact:
        subject = self.rng.choice(_SUBJECTS).format(
            w=f"{self.rng.choice(_WORDS)}-{len(self.facts)}"
        )
        answer = _token(self.rng)
        fact = Fact(
            key=f"{self.name}:{len(self.facts)}",
            answer=answer,
            question=f"In {locator}, what is {subject}?",
            subject=subject,
            tool_use_id=call_id,
            output_chars=chars,
            position=position,
            prompt=len(self.prompts) - 1,
            head=head,
        )
        self.facts.append(fact)
        return fact

    def call(
        self,
        kind: str,
        chars: int,
        *,
        fact: Optional[str] = None,
        error: bool = False,
        path: Optional[str] = None,
        calls: int = 1,
    ) -> None:
        """One assistant message with ``calls`` tool calls of ``kind`` and their results."""
        uses, results = [], []
        for _ in range(calls):
            call_id = self._id()
            w = self.rng.choice(_WORDS)
            if kind == "read":
                args: dict[str, Any] = {
                    "path": path or f"src/{w}/{w}_{self.rng.randrange(1000)}.py"
                }
            elif kind == "grep":
                args = {"pattern": f"{w}_handler\\({self.rng.randrange(100)}"}
            elif kind == "edit":
                edited = path or f"src/{w}/core_{_token(self.rng).lower()}.py"
                args = {"path": edited, "old": f"{w} = 1", "new": f"{w} = 2"}
                q = "Which file is being edited right now?"
                self._task("file", call_id, edited, q, "edit")
            elif kind == "screenshot":
                args = {"url": f"http://localhost:{self.rng.randrange(3000, 9000)}/{w}"}
            else:
                args = {"command": f"make test-{w} TARGET={self.rng.randrange(100)}"}
            locator = next(iter(args.values()))
            content: Any
            if kind == "screenshot":
                caption = f"Screenshot of {locator}: the {w} dashboard renders its settings panel."
                if fact is not None:
                    f = self._fact(call_id, str(locator), "caption", len(caption), "")
                    caption += f" The banner shows {f.subject} is {f.answer}."
                    f.tags = ("image",)
                    f.head = caption
                png = _PNG + f"{call_id}".encode()
                content = [
                    {"type": "text", "text": caption},
                    {"type": "image", "source": _png_source(png)},
                ]  # fmt: skip
            elif kind == "edit":
                content = f"Successfully replaced text in {locator}."
            elif kind == "read" and path is not None and path in self._files:
                content = self._files[path]  # a re-read of the same file: the same bytes
            else:
                lines = _filler(self.rng, kind, str(locator), chars)
                if error:
                    code = _token(self.rng)
                    lines[-1] = (
                        "Traceback (most recent call last):\n"
                        f'  File "{locator}"\nValueError: bad {w} (error code {code})'
                    )
                    q = "What error code did the last failing command report?"
                    self._task("error", call_id, code, q, "error code")
                if fact is not None:
                    at = {"head": 1, "middle": len(lines) // 2, "tail": max(len(lines) - 2, 0)}[
                        fact
                    ]
                    head = lines[0][:60]
                    f = self._fact(call_id, str(locator), fact, 0, head)
                    lines.insert(at, f"NOTE: {f.subject} is {f.answer}")
                    f.output_chars = len("\n".join(lines))
                    f.head = "\n".join(lines)[:HEAD_CHARS]
                    if len("\n".join(lines).encode()) > SPILL_BYTES:
                        f.tags = ("spilled",)
                content = "\n".join(lines)
                if kind == "read" and path is not None:
                    self._files[path] = content
            uses.append({"type": "tool_use", "id": call_id, "name": kind, "input": args})
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": content,
            }
            if error:
                result["is_error"] = True
            results.append(result)
        text = {"type": "text", "text": self._say or f"Next I will use {kind}."}
        self._say = None
        self.prompts[-1].messages.append({"role": "assistant", "content": [text, *uses]})
        self.prompts[-1].messages.append({"role": "user", "content": results})

    def reply(self, text: str) -> None:
        self.prompts[-1].messages.append(
            {"role": "assistant", "content": [{"type": "text", "text": text}]}
        )

    def done(self) -> Workload:
        # a last prompt without tools: the probes of the previous prompt are asked at its start
        self.prompt("Summarize what you found and stop.", ticket=False)
        self.reply("Done: everything above is summarized.")
        workload = Workload(self.name, self.prompts, self.facts)
        workload.probes = sorted(
            plan_probes(workload) + self.probes, key=lambda p: (p.after, p.step)
        )
        return workload


CHAIN_WINDOW = 3  # pi-condense's default chainCompression.rollingWindow


def plan_probes(workload: Workload) -> list[Probe]:
    """Each fact planted in a tool output is probed when the next prompt starts (``recent``),
    at the second request of the prompt :data:`CHAIN_WINDOW` + 1 prompts later (``later``:
    about when pi-condense's chain compression takes its run), and, when three or more prompts
    follow, again at the last prompt (``old``). Whether a probe's fact is inside a compressed
    chain (the ``chain`` class) is measured on the requests pi-condense defaults send."""
    last = len(workload.prompts) - 1
    probes = []
    for fact in workload.facts:
        if fact.kind != "output":
            continue
        probes.append(Probe(fact, fact.prompt + 1, ("recent", *fact.tags)))
        at = fact.prompt + CHAIN_WINDOW + 1
        if at < last and len(workload.prompts[at].messages) > 2:
            probes.append(Probe(fact, at, ("later", *fact.tags), 2))
        if last - fact.prompt >= 3:
            probes.append(Probe(fact, last, ("old", *fact.tags)))
    return probes


def coding(seed: int, prompts: int = 8) -> Workload:
    """A multi-prompt coding session: every tool kind, every size, re-reads, errors, images,
    reused ids in its second half."""
    b = _Builder("coding", seed)
    positions = ("head", "middle", "tail")
    for p in range(prompts):
        b.reuse_ids = p >= prompts // 2
        b.prompt(f"Task {p + 1}: investigate and fix the {_WORDS[p % len(_WORDS)]} module.")
        shared = f"src/shared/config_{p % 3}.py"
        for i in range(6):
            size = SIZES[(p * 6 + i) % len(SIZES)]
            kind = ("read", "grep", "bash", "read", "bash", "grep")[i]
            if i == 2:
                b.decide(f"the {_WORDS[p % len(_WORDS)]} cache")
            b.call(kind, size, fact=positions[(p + i) % 3] if i % 2 == 0 or size <= 8000 else None)
        b.call("read", 3000, path=shared, fact="middle" if p < 3 else None)  # re-read later
        b.call("bash", 2500, error=True, fact="tail" if p % 2 else None)
        b.call("edit", 0)
        b.ask()  # mid-prompt: the ticket, the file being edited, the last error, the decision
        b.call("screenshot", 0, fact="caption")
        b.call("edit", 0, calls=2)
        b.ask()  # the run's last request: the same questions, the answers moved on
        b.reply(f"Task {p + 1} is done: fixed and tested.")
    return b.done()


def autonomous(seed: int, calls: int = 200) -> Workload:
    """One prompt, ``calls`` tool calls in a row, then follow-up prompts (closed sub-tasks)."""
    b = _Builder("autonomous", seed)
    b.prompt("Run the whole migration on your own and report when done.")
    for i in range(calls):
        size = (400, 1500, 3000, 5000, 8000, 1200, 20000)[i % 7]
        kind = ("read", "bash", "grep", "edit")[i % 4]
        plant = ("head", "middle", "tail")[i // 9 % 3] if i % 9 == 0 and kind != "edit" else None
        if i % 40 == 10:
            b.decide(f"the {_WORDS[i // 40]} batch")
        b.call(kind, size, fact=plant, error=i % 20 == 13)
        if i % 25 == 24:
            b.ask()  # mid-run, every 25 calls
    b.ask()
    b.reply("Migration complete.")
    for p in range(3):
        b.prompt(f"Follow-up {p + 1}: double-check part {p + 1}.")
        for i in range(4):
            b.call(("read", "bash")[i % 2], 2000, fact="middle" if i == 0 else None)
        b.ask()
        b.reply(f"Part {p + 1} checked.")
    return b.done()


def _pi_to_anthropic(message: dict[str, Any]) -> Optional[dict[str, Any]]:
    role = message.get("role")
    content = message.get("content")
    if role == "user":
        if isinstance(content, str):
            return {"role": "user", "content": content or "(empty)"}
        blocks = [
            {"type": "text", "text": b.get("text", "")}
            for b in content or []
            if b.get("type") == "text"
        ]
        return {"role": "user", "content": blocks or "(empty)"}
    if role == "assistant":
        out = []
        for block in content or []:
            if block.get("type") == "text" and block.get("text", "").strip():
                out.append({"type": "text", "text": block["text"]})
            elif block.get("type") == "toolCall":
                out.append(
                    {
                        "type": "tool_use",
                        "id": block["id"],
                        "name": block["name"],
                        "input": block.get("arguments") or {},
                    }
                )
        return {"role": "assistant", "content": out or [{"type": "text", "text": "(no text)"}]}
    if role == "toolResult":
        text = "\n".join(b.get("text", "") for b in content or [] if b.get("type") == "text")
        result = {
            "type": "tool_result",
            "tool_use_id": message["toolCallId"],
            "content": text or "(no output)",
        }
        if message.get("isError"):
            result["is_error"] = True
        return {"role": "user", "content": [result]}
    return None


def real(seed: int, prompts: int = 12) -> Workload:
    """The first ``prompts`` prompts of a real Pi session, with facts planted in every fifth
    tool output (head, middle or tail)."""
    from pi_condense.session import SessionFile

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="pi-condense-quality-") as tmp:
        path = Path(tmp) / "real.jsonl"
        path.write_bytes(gzip.decompress(REAL_SESSION.read_bytes()))
        entries = SessionFile.load(path).branch()
    b = _Builder("real", seed)
    b.rng = rng
    results = 0
    for entry in entries:
        if entry.get("type") != "message":
            continue
        message = _pi_to_anthropic(entry["message"])
        if message is None:
            continue
        if entry["message"]["role"] == "user":
            _ask_at_reply(b)
            if len(b.prompts) == prompts:
                break
            b.prompt(
                message["content"]
                if isinstance(message["content"], str)
                else json.dumps(message["content"])
            )
            continue
        if not b.prompts:
            continue
        run = b.prompts[-1].messages
        if message["role"] == "user":
            block = message["content"][0]
            results += 1
            text = block["content"]
            if block.get("is_error"):
                code = _token(b.rng)
                text = block["content"] = f"{text} (error code {code})"
                q = "What error code did the last failing command report?"
                b._task("error", block["tool_use_id"], code, q, "error code")
            if results % 5 == 0 and len(text) > 200:
                lines = text.split("\n")
                position = ("head", "middle", "tail")[results % 3]
                at = {"head": 1, "middle": len(lines) // 2, "tail": max(len(lines) - 1, 0)}[
                    position
                ]
                locator = _locator(run, block["tool_use_id"])
                f = b._fact(block["tool_use_id"], locator, position, 0, lines[0][:60])
                lines.insert(at, f"NOTE: {f.subject} is {f.answer}")
                block["content"] = "\n".join(lines)
                f.output_chars = len(block["content"])
                f.head = block["content"][:HEAD_CHARS]
            if run and run[-1]["role"] == "user" and isinstance(run[-1]["content"], list):
                run[-1]["content"].append(block)  # parallel calls: results in one message
                continue
        else:
            for use in message["content"]:
                if use.get("type") == "tool_use" and use["name"] in ("edit", "write"):
                    path = str(use["input"].get("path", ""))
                    if path:
                        b._task("file", use["id"], path, "Which file is being edited right now?",
                                "edit")  # fmt: skip
            if run and run[-1]["role"] == "assistant":
                run[-1]["content"].extend(message["content"])
                continue
            if sum(m["role"] == "assistant" for m in run) % 10 == 9:
                b.ask()  # mid-run, every 10 model calls
        run.append(message)
    else:
        _ask_at_reply(b)
    for p in b.prompts:  # a run interrupted mid-call: close it with a reply
        if (
            not p.messages
            or p.messages[-1]["role"] != "assistant"
            or any(blk.get("type") == "tool_use" for blk in p.messages[-1]["content"])
        ):
            if p.messages and p.messages[-1]["role"] == "assistant":
                p.messages.pop()
            p.messages.append(
                {"role": "assistant", "content": [{"type": "text", "text": "(stopped)"}]}
            )
    return b.done()


def _ask_at_reply(b: _Builder) -> None:
    """A probe point before the run's final reply, when the run used tools."""
    run = b.prompts[-1].messages if b.prompts else []
    last = run[-1] if run else None
    if last is None or last["role"] != "assistant":
        return
    if any(blk.get("type") == "tool_use" for blk in last["content"]):
        return
    if any(blk.get("type") == "tool_use" for m in run for blk in m["content"]):
        b.ask(len(run) - 1)


def _locator(run: list[dict[str, Any]], call_id: str) -> str:
    for message in reversed(run):
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_use" and block.get("id") == call_id:
                args = block.get("input") or {}
                for key in ("path", "command", "pattern", "url"):
                    if key in args:
                        return str(args[key])[:120]
                return f"the {block.get('name')} call"
    return "that tool output"


def workloads(quick: bool, seed: int = 39) -> list[Workload]:
    """The benchmark's workloads (``quick``: smaller ones, for CI)."""
    if quick:
        return [coding(seed, prompts=6), autonomous(seed, calls=60), real(seed, prompts=5)]
    return [coding(seed), autonomous(seed), real(seed)]
