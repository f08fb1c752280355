"""`summarizerModel` resolution (spec 05 section 13.3 "model resolution", spec 08 section 3).

`"default"` is the session model; `"provider/model-id"` (split at the first `/`) names a model
of a provider we have a client for, else the reference's warning and the session model. A
configured model distinct from the session model gets the session model as its outage
fallback. The Condenser and the CLI resolve the setting when no summarizer is passed; the API
calls go to loopback servers on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

from pi_condense.condenser import Condenser
from pi_condense.config import Config
from pi_condense.session import SessionFile
from pi_condense.summarize.anthropic_client import AnthropicSummarizer
from pi_condense.summarize.deterministic import DeterministicSummarizer
from pi_condense.summarize.openai_client import OpenAISummarizer
from pi_condense.summarize.resolve import resolve_summarizers
from support.agent import (
    Agent,
    Clock,
    ScriptedSummarizer,
    config,
    custom_entries,
    label_bullets,
    new_session,
)
from support.cli import PROVIDER_ENV
from support.cli import run_offline as run_cli
from support.llm_servers import (
    LoopbackLLMServer,
    Recorded,
    Reply,
    clear_proxy_env,
    openai_error,
    openai_stream,
)
from support.sessions import small_session

MODEL = "loop-model"
CLI = [sys.executable, "-c", "from pi_condense.cli import main; main()"]
BIG = "A" * 1500

# The reference's texts (spec 05 section 13.3, spec 08 section 3).
INVALID = (
    'pruner: invalid summarizerModel "{}", expected "provider/model-id". '
    "Falling back to default model."
)
NOT_FOUND = 'pruner: model "{}" not found in registry. Falling back to default model.'
ENTER = "pi-condense: summarizer model {} failing, using session model {} until it recovers"


def resolve(
    value: str, session: Optional[Any], **kw: Any
) -> tuple[Any, Any, list[tuple[str, str]]]:
    notes: list[tuple[str, str]] = []
    primary, fallback = resolve_summarizers(
        config(summarizerModel=value, **kw.pop("settings", {})),
        session_model=session,
        notify=lambda level, text: notes.append((level, text)),
        **kw,
    )
    return primary, fallback, notes


# ================================================================================ rules


def test_default_is_the_session_model() -> None:
    session = ScriptedSummarizer()
    assert resolve("default", session) == (session, session, [])
    assert resolve("default", None) == (None, None, [])


def test_explicit_summarizer_wins_over_the_setting() -> None:
    session, explicit = ScriptedSummarizer(), DeterministicSummarizer()
    assert resolve("openai/gpt-4o-mini", session, explicit=explicit) == (explicit, session, [])
    assert resolve("nonsense", None, explicit=explicit) == (explicit, None, [])


@pytest.mark.parametrize("value", ["gpt-4o-mini", "", "Default", "openai:gpt-4o-mini"])
def test_value_without_a_slash_warns_and_uses_the_session_model(value: str) -> None:
    session = ScriptedSummarizer()
    assert resolve(value, session) == (session, session, [("warning", INVALID.format(value))])


@pytest.mark.parametrize(
    "value",
    [
        "google/gemini-2.0-flash",  # no client for the provider
        "OpenAI/gpt-4o-mini",  # providers are compared exactly, as Pi's registry does
        " openai/gpt-4o-mini",
        "openai/",  # no model id
        "/gpt-4o-mini",
        "default/x",
    ],
)
def test_unknown_model_warns_and_uses_the_session_model(value: str) -> None:
    session = ScriptedSummarizer()
    assert resolve(value, session) == (session, session, [("warning", NOT_FOUND.format(value))])


def test_missing_session_model_stays_missing() -> None:
    assert resolve("x", None) == (None, None, [("warning", INVALID.format("x"))])


@pytest.mark.parametrize(
    ("value", "cls", "provider", "model_id"),
    [
        ("openai/gpt-4o-mini", OpenAISummarizer, "openai", "gpt-4o-mini"),
        ("anthropic/claude-haiku-4-5", AnthropicSummarizer, "anthropic", "claude-haiku-4-5"),
        # split at the FIRST "/": the id keeps the rest
        (
            "openrouter/anthropic/claude-3.5-haiku",
            OpenAISummarizer,
            "openrouter",
            "anthropic/claude-3.5-haiku",
        ),
        ("ollama/qwen2.5:7b", OpenAISummarizer, "ollama", "qwen2.5:7b"),
        ("vllm/org/model/v2", OpenAISummarizer, "vllm", "org/model/v2"),
    ],
)
def test_provider_slash_model_makes_that_client_with_the_session_fallback(
    value: str, cls: type, provider: str, model_id: str
) -> None:
    session = DeterministicSummarizer()
    primary, fallback, notes = resolve(value, session)
    assert isinstance(primary, cls)
    assert (primary.model.provider, primary.model.id) == (provider, model_id)
    assert fallback is session
    assert notes == []


@pytest.mark.parametrize(("provider", "module"), [("openai", "openai"), ("anthropic", "anthropic")])
def test_missing_sdk_extra_is_a_registry_miss(
    monkeypatch: pytest.MonkeyPatch, provider: str, module: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    value = f"{provider}/some-model"
    session = ScriptedSummarizer()
    primary, fallback, notes = resolve(value, session)
    assert (primary, fallback) == (session, session)
    [(level, text)] = notes
    assert level == "warning"
    reference = NOT_FOUND.format(value)
    hint = f"the {module} summarizer needs the '{module}' package"
    assert text == f"{reference} ({hint}: pip install 'pi-condense[{module}]')"
    # reference mode: the reference's text alone
    _, _, notes = resolve(value, session, settings={"compat": "reference"})
    assert notes == [("warning", reference)]


def test_warning_without_notify_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    session = ScriptedSummarizer()
    with caplog.at_level(logging.WARNING, logger="pi_condense.summarize.resolve"):
        result = resolve_summarizers(config(summarizerModel="nope"), session_model=session)
    assert result == (session, session)
    assert [r.getMessage() for r in caplog.records] == [INVALID.format("nope")]


# ============================================================================ condenser


class Answers:
    """The loopback model: label bullets for a batch prompt, or a scripted error."""

    def __init__(self, error: Optional[Reply] = None) -> None:
        self.error = error
        self.models: list[Any] = []

    def __call__(self, request: Recorded) -> Reply:
        self.models.append(request.body.get("model"))
        if self.error is not None:
            return self.error
        prompt = request.body["messages"][0]["content"]
        text = label_bullets(prompt).replace(" done", " read by the loopback model")
        usage = {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
        return openai_stream([text], model=MODEL, usage=usage)


@pytest.fixture
def openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_proxy_env(monkeypatch)
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


class Host:
    def __init__(self, cfg: Optional[Config], session_model: Any) -> None:
        self.clock = Clock()
        self.notes: list[tuple[str, str]] = []
        self.session = new_session(clock=self.clock)
        self.condenser = Condenser(
            self.session,
            cfg,
            session_model=session_model,
            clock=self.clock,
            notify=lambda message, level: self.notes.append((message, level)),
        )
        self.condenser.session_start()
        self.agent = Agent(self.session, self.condenser, self.clock)
        self.prompts = 0

    async def prompt(self) -> Any:
        self.prompts += 1
        name = f"p{self.prompts}"
        await self.agent.prompt(name)
        output = f"{name} " + BIG  # distinct outputs: no deduplication
        await self.agent.tools([(f"{name}c", "read", {"path": f"{name}.txt"}, output)])
        return await self.agent.reply()

    def prompt_now(self) -> Any:
        return asyncio.run(self.prompt())

    def summaries(self) -> list[str]:
        """The first line (the model's bullet) of every summary."""
        texts = []
        for entry in custom_entries(self.session, "context-prune-summary"):
            content = entry["content"]
            text = content if isinstance(content, str) else content[0]["text"]
            texts.append(text.split("\n")[0])
        return texts


def test_condenser_summarizes_through_the_configured_model(
    openai_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = Answers()
    with LoopbackLLMServer(answers) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        session_model = ScriptedSummarizer()
        host = Host(config(summarizerModel=f"openai/{MODEL}"), session_model)
        assert host.prompt_now().ok
        assert [r.path for r in server.requests] == ["/v1/chat/completions"]
        assert answers.models == [MODEL]
        assert session_model.prompts == []  # the session model is only the fallback
        assert host.summaries() == ["- `t1` read by the loopback model"]
        # a config change re-resolves: "default" is the session model, the server is not asked
        host.condenser.config = config(summarizerModel="default")
        assert host.prompt_now().ok
        assert len(server.requests) == 1
        assert len(session_model.prompts) == 1
    assert host.summaries() == ["- `t1` read by the loopback model", "- `t2` done"]
    assert [n for n in host.notes if n[1] != "info"] == []


def test_outage_falls_back_to_the_session_model(
    openai_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = Answers(openai_error(500, "upstream overloaded", "server_error"))
    with LoopbackLLMServer(answers) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        session_model = ScriptedSummarizer()
        host = Host(config(summarizerModel=f"openai/{MODEL}", summarizerRetries=0), session_model)
        assert host.prompt_now().ok
        assert len(server.requests) == 1  # the primary failed once, the session model answered
        enter = (ENTER.format(f"openai/{MODEL}", "Scripted"), "warning")
        assert [n for n in host.notes if n[1] != "info"] == [enter]
        assert len(session_model.prompts) == 1
        # sticky: the next flush goes to the session model without asking the server
        assert host.prompt_now().ok
        assert len(server.requests) == 1
        assert len(session_model.prompts) == 2
        assert [n for n in host.notes if n[1] != "info"] == [enter]
    assert host.summaries() == ["- `t1` done", "- `t2` done"]


def test_session_start_resolves_the_reloaded_setting(
    openai_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = tmp_path / "settings.json"

    def write(model: str) -> None:
        block = {"enabled": True, "summarizerModel": model}
        settings.write_text(json.dumps({"contextPrune": block}), encoding="utf-8")

    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    write(f"openai/{MODEL}")
    with LoopbackLLMServer(Answers()) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        session_model = ScriptedSummarizer()
        host = Host(None, session_model)  # session_start loads settings.json
        assert host.prompt_now().ok
        assert (len(server.requests), len(session_model.prompts)) == (1, 0)
        write("nope")
        host.condenser.session_start()
        assert host.prompt_now().ok
        assert (len(server.requests), len(session_model.prompts)) == (1, 1)
    assert (INVALID.format("nope"), "warning") in host.notes


@pytest.mark.parametrize(("compat", "times"), [("default", 1), ("reference", 2)])
def test_warning_once_per_resolution_or_per_call_in_reference_mode(compat: str, times: int) -> None:
    session_model = ScriptedSummarizer()
    host = Host(config(summarizerModel="google/gemini", compat=compat), session_model)
    assert host.prompt_now().ok
    assert host.prompt_now().ok
    assert len(session_model.prompts) == 2
    warning = (NOT_FOUND.format("google/gemini"), "warning")
    assert [n for n in host.notes if n[1] != "info"] == [warning] * times


# ================================================================================== CLI


def block(tmp_path: Path, **settings: Any) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"contextPrune": settings}), encoding="utf-8")
    return path


def test_cli_condense_uses_the_configured_model(tmp_path: Path) -> None:
    answers = Answers()
    with LoopbackLLMServer(answers) as server:
        source = small_session(tmp_path / "s.jsonl", prompts=2)
        settings = block(tmp_path, summarizerModel=f"openai/{MODEL}")
        target = tmp_path / "out.jsonl"
        proc = run_cli(
            [
                "condense",
                str(source),
                "--out",
                str(target),
                "--config",
                str(settings),
                "--base-url",
                server.url + "/v1",
                "--json",
            ],
            tmp_path,
        )
        paths = [r.path for r in server.requests]
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert paths == ["/v1/chat/completions"] * 2
    assert answers.models == [MODEL, MODEL]
    assert report["summarizerCalls"] == 2
    assert report["summarizer"]["inputTokens"] == 22
    assert report["problems"] == []
    texts = [
        e["content"]
        for e in SessionFile.load(target).entries
        if e.get("customType") == "context-prune-summary"
    ]
    assert len(texts) == 2
    assert all("read by the loopback model" in json.dumps(t) for t in texts)


def test_cli_condense_falls_back_to_the_offline_summarizer(tmp_path: Path) -> None:
    answers = Answers(openai_error(503, "service unavailable", "server_error"))
    with LoopbackLLMServer(answers) as server:
        source = small_session(tmp_path / "s.jsonl", prompts=2)
        settings = block(tmp_path, summarizerModel=f"openai/{MODEL}", summarizerRetries=0)
        proc = run_cli(
            [
                "condense",
                str(source),
                "--config",
                str(settings),
                "--base-url",
                server.url + "/v1",
                "--json",
            ],
            tmp_path,
        )
        calls = len(server.requests)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert calls == 1  # then sticky fallback: the second flush does not ask the server
    assert report["batches"]["summarized"] == 2
    enter = ENTER.format(f"openai/{MODEL}", "pi-condense deterministic")
    assert report["problems"] == [{"level": "warning", "message": enter, "count": 1}]


def test_cli_warns_about_an_unknown_model_and_refuses_a_base_url_for_it(tmp_path: Path) -> None:
    source = small_session(tmp_path / "s.jsonl", prompts=1)
    settings = block(tmp_path, summarizerModel="google/gemini")
    args = ["condense", str(source), "--config", str(settings)]
    warning = f"pi-condense: warning: {NOT_FOUND.format('google/gemini')}\n"
    refused = run_cli([*args, "--base-url", "http://127.0.0.1:9/v1"], tmp_path)
    assert refused.returncode == 2
    assert refused.stderr == warning + (
        "pi-condense: --base-url needs an API summarizer: give --summarizer, or set "
        'summarizerModel to a usable "provider/model-id" (it is "google/gemini")\n'
    )
    assert not (tmp_path / "s.condensed.jsonl").exists()
    proc = run_cli([*args, "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == warning
    assert json.loads(proc.stdout)["batches"]["summarized"] == 1  # the offline summarizer
