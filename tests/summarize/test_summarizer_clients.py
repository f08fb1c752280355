"""The OpenAI and Anthropic summarizers on the real SDKs against loopback wire-protocol servers,
plus the spec factory, the price table and our summarizer config keys.

Expected values come from the wire protocols (OpenAI chat completions streaming with
`stream_options.include_usage`; Anthropic messages streaming events), Pi's cost formula
(`price / 1e6 * tokens` per kind, summed) and Pi's thinking budgets (1024 / 2048 / 8192 /
16384 tokens, `xhigh` clamped to `high`).
"""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import Any, Optional

import pytest

from pi_condense.config import Config, normalize, parse_setting_value
from pi_condense.errors import ConfigError
from pi_condense.summarize.anthropic_client import AnthropicSummarizer
from pi_condense.summarize.base import Completion, CompletionRequest, Summarizer, SummarizerError
from pi_condense.summarize.factory import SummarizerSpecError, make_summarizer
from pi_condense.summarize.openai_client import OpenAISummarizer
from pi_condense.summarize.pricing import BUILTIN_PRICES, ModelPrice, cost_of, find_price
from pi_condense.summarize.runner import MissingExtraError, ProviderError
from support.llm_servers import (
    LoopbackLLMServer,
    Reply,
    anthropic_error,
    anthropic_message,
    anthropic_stream,
    anthropic_stream_error,
    openai_error,
    openai_response,
    openai_stream,
)

PRICE = ModelPrice(input=2.0, output=8.0, cache_read=0.5, cache_write=2.5)


def request(thinking: Optional[str] = None, prompt: str = "summarize this") -> CompletionRequest:
    return CompletionRequest(
        prompt=prompt, kind="batch", timestamp=1_700_000_000_000, thinking=thinking
    )


def complete(
    summarizer: Summarizer, req: Optional[CompletionRequest] = None
) -> tuple[Completion, int]:
    events: list[int] = []
    result = asyncio.run(summarizer.complete(req or request(), lambda: events.append(1)))
    return result, len(events)


def fail(summarizer: Summarizer, req: Optional[CompletionRequest] = None) -> BaseException:
    with pytest.raises(Exception) as info:  # noqa: PT011 - the type is asserted by each test
        asyncio.run(summarizer.complete(req or request(), lambda: None))
    return info.value


pytestmark = pytest.mark.usefixtures("loopback_only")


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENROUTER_API_KEY",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_AUTH_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)


def oai(server: LoopbackLLMServer, **kwargs: Any) -> OpenAISummarizer:
    kwargs.setdefault("api_key", "sk-test")
    kwargs.setdefault("prices", PRICE)
    return OpenAISummarizer("test-model", base_url=server.url + "/v1", **kwargs)


def ant(server: LoopbackLLMServer, **kwargs: Any) -> AnthropicSummarizer:
    kwargs.setdefault("api_key", "sk-ant-test")
    kwargs.setdefault("prices", PRICE)
    return AnthropicSummarizer("test-model", base_url=server.url, **kwargs)


def sent_key(headers: dict[str, str]) -> Optional[str]:
    if "x-api-key" in headers:
        return headers["x-api-key"]
    auth = headers.get("authorization", "")
    return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None


# ============================================================================ OpenAI


OPENAI_USAGE = {
    "prompt_tokens": 1200,
    "completion_tokens": 300,
    "total_tokens": 1500,
    "prompt_tokens_details": {"cached_tokens": 1000},
    "completion_tokens_details": {"reasoning_tokens": 100},
}


def test_openai_stream_success_wire_and_usage(server: LoopbackLLMServer) -> None:
    server.queue(openai_stream(["- [[1:read]] Read", " a.ts", "\nok"], usage=OPENAI_USAGE))
    result, events = complete(oai(server))
    assert result.text == "- [[1:read]] Read a.ts\nok"
    assert result.stop_reason == "stop"
    assert result.error_message is None
    assert result.model.provider == "openai"
    assert result.model.id == "test-model"
    # prompt_tokens includes the cached ones; completion_tokens includes reasoning.
    usage = result.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write) == (200, 300, 1000, 0)
    assert usage.total_tokens == 1500
    assert usage.cost.input == pytest.approx(2.0 * 200 / 1e6)
    assert usage.cost.output == pytest.approx(8.0 * 300 / 1e6)
    assert usage.cost.cache_read == pytest.approx(0.5 * 1000 / 1e6)
    assert usage.cost.total == pytest.approx((400 + 2400 + 500) / 1e6)
    assert events >= 4  # stream open + three text deltas

    [sent] = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent_key(sent.headers) == "sk-test"
    body = sent.body
    assert body["model"] == "test-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "user", "content": "summarize this"}]
    assert "reasoning_effort" not in body
    assert "tools" not in body


@pytest.mark.parametrize(
    ("thinking", "effort"),
    [(None, None), ("off", None), ("minimal", "minimal"), ("low", "low"), ("high", "high")],
)
def test_openai_thinking_level_is_reasoning_effort(
    server: LoopbackLLMServer, thinking: Optional[str], effort: Optional[str]
) -> None:
    server.queue(openai_stream(["ok"]))
    complete(oai(server), request(thinking))
    assert server.requests[0].body.get("reasoning_effort") == effort


def test_openai_reasoning_deltas_reset_idle_but_are_not_text(server: LoopbackLLMServer) -> None:
    server.queue(openai_stream(["answer"], reasoning=["think ", "more"]))
    result, events = complete(oai(server))
    assert result.text == "answer"
    assert events >= 4  # open + two reasoning deltas + one text delta


@pytest.mark.parametrize(
    ("finish", "stop", "error"),
    [
        ("length", "length", None),
        ("tool_calls", "toolUse", None),
        ("content_filter", "error", "Provider finish_reason: content_filter"),
        (None, "error", "stream ended without a finish reason"),
    ],
)
def test_openai_finish_reasons(
    server: LoopbackLLMServer, finish: Optional[str], stop: str, error: Optional[str]
) -> None:
    server.queue(openai_stream(["partial"], finish_reason=finish, done=finish is not None))
    result, _ = complete(oai(server))
    assert result.stop_reason == stop
    assert result.error_message == error


def test_openai_reported_cost_wins_over_the_price_table(server: LoopbackLLMServer) -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15, "cost": 0.0123}
    server.queue(openai_stream(["ok"], usage=usage))
    result, _ = complete(oai(server))
    assert result.usage.cost.total == 0.0123
    assert (result.usage.input, result.usage.output) == (10, 5)


def test_openai_without_usage_chunk_has_zero_usage(server: LoopbackLLMServer) -> None:
    server.queue(openai_stream(["ok"]))
    result, _ = complete(oai(server))
    assert result.usage.total_tokens == 0
    assert result.usage.cost.total == 0


def test_openai_non_streaming(server: LoopbackLLMServer) -> None:
    usage = {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57}
    server.queue(openai_response("- done", usage=usage))
    result, events = complete(oai(server, stream=False))
    assert result.text == "- done"
    assert result.stop_reason == "stop"
    assert (result.usage.input, result.usage.output, result.usage.total_tokens) == (50, 7, 57)
    assert events == 1
    assert "stream" not in server.requests[0].body or server.requests[0].body["stream"] is False


def test_openai_stream_usage_option_can_be_turned_off(server: LoopbackLLMServer) -> None:
    server.queue(openai_stream(["ok"]))
    complete(oai(server, stream_usage=False, max_tokens=256))
    body = server.requests[0].body
    assert "stream_options" not in body
    assert body["max_tokens"] == 256


@pytest.mark.parametrize("status", [401, 403])
def test_openai_auth_errors(server: LoopbackLLMServer, status: int) -> None:
    server.queue(openai_error(status, "Incorrect API key provided", "invalid_request_error"))
    error = fail(oai(server))
    assert isinstance(error, SummarizerError)
    assert error.auth is True
    assert "Incorrect API key provided" in str(error)


def test_openai_rate_limit_carries_retry_after(server: LoopbackLLMServer) -> None:
    server.queue(openai_error(429, "Rate limit reached", "requests", headers={"Retry-After": "7"}))
    error = fail(oai(server))
    assert isinstance(error, ProviderError)
    assert (error.status, error.retry_after, error.retryable, error.auth) == (429, 7.0, True, False)
    assert str(error) == "openai/test-model: HTTP 429: Rate limit reached"


def test_openai_retry_after_ms_header(server: LoopbackLLMServer) -> None:
    server.queue(openai_error(429, "slow", "requests", headers={"retry-after-ms": "1500"}))
    error = fail(oai(server))
    assert isinstance(error, ProviderError)
    assert error.retry_after == 1.5


@pytest.mark.parametrize(
    ("status", "retryable"), [(500, True), (503, True), (400, False), (404, False)]
)
def test_openai_status_errors(server: LoopbackLLMServer, status: int, retryable: bool) -> None:
    server.queue(openai_error(status, "boom", "server_error"))
    error = fail(oai(server))
    assert isinstance(error, ProviderError)
    assert error.status == status
    assert error.retryable is retryable
    assert error.auth is False


def test_openai_malformed_stream_chunk(server: LoopbackLLMServer) -> None:
    server.queue(Reply(chunks=[(0.0, b'data: {"id": "x", "choices": [\n\n')]))
    error = fail(oai(server))
    assert isinstance(error, SummarizerError)
    assert not error.auth
    assert "malformed response" in str(error)


def test_openai_error_inside_the_stream(server: LoopbackLLMServer) -> None:
    payload = b'data: {"error": {"message": "upstream overloaded", "type": "server_error"}}\n\n'
    server.queue(Reply(chunks=[(0.0, payload)]))
    error = fail(oai(server))
    assert isinstance(error, ProviderError)
    assert error.retryable is True
    assert "upstream overloaded" in str(error)


def test_openai_connection_refused_is_retryable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port any more.
    summarizer = OpenAISummarizer("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
    error = fail(summarizer)
    assert isinstance(error, ProviderError)
    assert error.retryable is True
    assert error.status is None


def test_openai_key_and_base_url_from_env(
    server: LoopbackLLMServer, monkeypatch: pytest.MonkeyPatch, no_env: None
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    server.queue(openai_stream(["ok"]))
    result, _ = complete(OpenAISummarizer("test-model"))
    assert result.text == "ok"
    assert sent_key(server.requests[0].headers) == "sk-from-env"


def test_openai_provider_key_env_does_not_leak_the_openai_key(
    server: LoopbackLLMServer, monkeypatch: pytest.MonkeyPatch, no_env: None
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or")
    server.queue(openai_stream(["ok"]), openai_stream(["ok"]))
    complete(OpenAISummarizer("m", base_url=server.url + "/v1", provider="openrouter"))
    monkeypatch.delenv("OPENROUTER_API_KEY")
    complete(OpenAISummarizer("m", base_url=server.url + "/v1", provider="openrouter"))
    keys = [sent_key(r.headers) for r in server.requests]
    assert keys[0] == "sk-or"
    assert keys[1] != "sk-openai-secret"


def test_openai_missing_key_is_an_auth_failure(no_env: None) -> None:
    error = fail(OpenAISummarizer("gpt-4o-mini"))
    assert isinstance(error, SummarizerError)
    assert error.auth is True
    assert "OPENAI_API_KEY" in str(error)


def test_openai_custom_server_needs_no_key(server: LoopbackLLMServer, no_env: None) -> None:
    server.queue(openai_stream(["ok"]))
    result, _ = complete(OpenAISummarizer("llama3", base_url=server.url + "/v1"))
    assert result.text == "ok"


def test_openai_client_is_reused_within_a_loop_and_rebuilt_across_loops(
    server: LoopbackLLMServer,
) -> None:
    summarizer = oai(server)
    server.queue(*(openai_stream([f"r{i}"]) for i in range(3)))

    async def twice() -> list[str]:
        a = await summarizer.complete(request(), lambda: None)
        b = await summarizer.complete(request(), lambda: None)
        await summarizer.aclose()
        return [a.text, b.text]

    assert asyncio.run(twice()) == ["r0", "r1"]
    assert complete(summarizer)[0].text == "r2"  # a new event loop


# ============================================================================ Anthropic


def test_anthropic_stream_success_wire_and_usage(server: LoopbackLLMServer) -> None:
    server.queue(
        anthropic_stream(
            ["- [[1:bash]] ran", " tests"],
            input_tokens=900,
            output_tokens=120,
            cache_read=3000,
            cache_write=400,
        )
    )
    result, events = complete(ant(server))
    assert result.text == "- [[1:bash]] ran tests"
    assert result.stop_reason == "stop"
    assert result.model.provider == "anthropic"
    usage = result.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write) == (900, 120, 3000, 400)
    assert usage.total_tokens == 900 + 120 + 3000 + 400
    expected = (2.0 * 900 + 8.0 * 120 + 0.5 * 3000 + 2.5 * 400) / 1e6
    assert usage.cost.total == pytest.approx(expected)
    assert usage.cost.cache_write == pytest.approx(2.5 * 400 / 1e6)
    assert events >= 4  # open, block start, two deltas, block stop

    [sent] = server.requests
    assert sent.path == "/v1/messages"
    assert sent_key(sent.headers) == "sk-ant-test"
    body = sent.body
    assert body["model"] == "test-model"
    assert body["stream"] is True
    assert body["max_tokens"] == 4096
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "summarize this"}]}
    ]
    assert "thinking" not in body
    assert "system" not in body
    assert "tools" not in body


@pytest.mark.parametrize(
    ("thinking", "budget"),
    [
        (None, None),
        ("off", None),
        ("minimal", 1024),
        ("low", 2048),
        ("medium", 8192),
        ("high", 16384),
        ("xhigh", 16384),
    ],
)
def test_anthropic_thinking_budget_per_level(
    server: LoopbackLLMServer, thinking: Optional[str], budget: Optional[int]
) -> None:
    server.queue(anthropic_stream(["ok"]))
    complete(ant(server, max_tokens=4000), request(thinking))
    body = server.requests[0].body
    if budget is None:
        assert "thinking" not in body
        assert body["max_tokens"] == 4000
    else:
        assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
        assert body["max_tokens"] == 4000 + budget


def test_anthropic_thinking_block_is_not_text(server: LoopbackLLMServer) -> None:
    server.queue(anthropic_stream(["final"], thinking=["let me ", "see"]))
    result, events = complete(ant(server), request("low"))
    assert result.text == "final"
    assert events >= 7  # open + thinking start/2 deltas/stop + text start/delta/stop


@pytest.mark.parametrize(
    ("reason", "stop", "error"),
    [
        ("max_tokens", "length", None),
        ("stop_sequence", "stop", None),
        ("tool_use", "toolUse", None),
        ("refusal", "error", "Provider stop_reason: refusal"),
        (None, "error", "stream ended without a stop reason"),
    ],
)
def test_anthropic_stop_reasons(
    server: LoopbackLLMServer, reason: Optional[str], stop: str, error: Optional[str]
) -> None:
    server.queue(anthropic_stream(["x"], stop_reason=reason, stop=reason is not None))
    result, _ = complete(ant(server))
    assert result.stop_reason == stop
    assert result.error_message == error


def test_anthropic_non_streaming(server: LoopbackLLMServer) -> None:
    server.queue(anthropic_message("- fine", input_tokens=40, output_tokens=9))
    result, events = complete(ant(server, stream=False))
    assert result.text == "- fine"
    assert (result.usage.input, result.usage.output) == (40, 9)
    assert events == 1


@pytest.mark.parametrize(
    ("status", "kind"), [(401, "authentication_error"), (403, "permission_error")]
)
def test_anthropic_auth_errors(server: LoopbackLLMServer, status: int, kind: str) -> None:
    server.queue(anthropic_error(status, kind, "invalid x-api-key"))
    error = fail(ant(server))
    assert isinstance(error, SummarizerError)
    assert error.auth is True
    assert "invalid x-api-key" in str(error)


@pytest.mark.parametrize(
    ("status", "kind", "headers", "retry_after"),
    [
        (529, "overloaded_error", {}, None),
        (429, "rate_limit_error", {"retry-after": "4"}, 4.0),
        (500, "api_error", {}, None),
    ],
)
def test_anthropic_transient_status_errors(
    server: LoopbackLLMServer,
    status: int,
    kind: str,
    headers: dict[str, str],
    retry_after: Optional[float],
) -> None:
    server.queue(anthropic_error(status, kind, "Overloaded", headers=headers))
    error = fail(ant(server))
    assert isinstance(error, ProviderError)
    assert (error.status, error.retryable, error.auth, error.retry_after) == (
        status,
        True,
        False,
        retry_after,
    )
    assert str(error) == f"anthropic/test-model: HTTP {status}: Overloaded"


def test_anthropic_error_event_inside_the_stream(server: LoopbackLLMServer) -> None:
    server.queue(
        anthropic_stream_error("overloaded_error", "Overloaded", after=anthropic_stream([]))
    )
    error = fail(ant(server))
    assert isinstance(error, ProviderError)
    assert error.retryable is True
    assert error.status is None
    assert str(error) == "anthropic/test-model: overloaded_error: Overloaded"


def test_anthropic_malformed_event(server: LoopbackLLMServer) -> None:
    server.queue(Reply(chunks=[(0.0, b"event: message_start\ndata: {nope\n\n")]))
    error = fail(ant(server))
    assert isinstance(error, SummarizerError)
    assert "malformed response" in str(error)


def test_anthropic_key_and_base_url_from_env(
    server: LoopbackLLMServer, monkeypatch: pytest.MonkeyPatch, no_env: None
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    server.queue(anthropic_stream(["ok"]))
    result, _ = complete(AnthropicSummarizer("claude-haiku-4-5"))
    assert result.text == "ok"
    assert sent_key(server.requests[0].headers) == "sk-ant-env"


def test_anthropic_missing_key_is_an_auth_failure(no_env: None) -> None:
    error = fail(AnthropicSummarizer("claude-haiku-4-5"))
    assert isinstance(error, SummarizerError)
    assert error.auth is True
    assert "ANTHROPIC_API_KEY" in str(error)


# ============================================================================ missing SDK


@pytest.mark.parametrize(
    ("cls", "module"), [(OpenAISummarizer, "openai"), (AnthropicSummarizer, "anthropic")]
)
def test_missing_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, cls: Any, module: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(ImportError) as info:
        cls("m", api_key="k")
    assert isinstance(info.value, MissingExtraError)
    assert f"pip install 'pi-condense[{module}]'" in str(info.value)
    with pytest.raises(MissingExtraError):
        make_summarizer(f"{module}:m")


# ============================================================================ factory


def test_factory_openai_and_anthropic_specs(server: LoopbackLLMServer, no_env: None) -> None:
    gpt = make_summarizer("openai:gpt-4o-mini", base_url=server.url + "/v1")
    assert isinstance(gpt, OpenAISummarizer)
    assert (gpt.model.provider, gpt.model.id) == ("openai", "gpt-4o-mini")
    claude = make_summarizer("anthropic:claude-haiku-4-5", base_url=server.url)
    assert isinstance(claude, AnthropicSummarizer)
    assert (claude.model.provider, claude.model.id) == ("anthropic", "claude-haiku-4-5")
    server.queue(openai_stream(["a"]), anthropic_stream(["b"]))
    assert complete(gpt)[0].text == "a"
    assert complete(claude)[0].text == "b"
    assert [r.path for r in server.requests] == ["/v1/chat/completions", "/v1/messages"]
    assert [r.body["model"] for r in server.requests] == ["gpt-4o-mini", "claude-haiku-4-5"]


@pytest.mark.parametrize(
    ("spec", "provider", "model", "base_url"),
    [
        ("ollama:qwen2.5:7b", "ollama", "qwen2.5:7b", "http://localhost:11434/v1"),
        (
            "openrouter:anthropic/claude-3.5-haiku",
            "openrouter",
            "anthropic/claude-3.5-haiku",
            "https://openrouter.ai/api/v1",
        ),
        ("vllm:meta/llama", "vllm", "meta/llama", "http://localhost:8000/v1"),
        ("llamacpp:local", "llamacpp", "local", "http://localhost:8080/v1"),
    ],
)
def test_factory_openai_compatible_prefixes(
    spec: str, provider: str, model: str, base_url: str
) -> None:
    summarizer = make_summarizer(spec)
    assert isinstance(summarizer, OpenAISummarizer)
    assert (summarizer.model.provider, summarizer.model.id) == (provider, model)
    assert summarizer._base_url == base_url


def test_factory_builtins() -> None:
    from pi_condense.summarize.conformance import ConformanceSummarizer
    from pi_condense.summarize.deterministic import DeterministicSummarizer

    assert isinstance(make_summarizer("default"), DeterministicSummarizer)
    assert isinstance(make_summarizer(" conformance "), ConformanceSummarizer)
    with pytest.raises(SummarizerSpecError, match="base-url"):
        make_summarizer("default", base_url="http://127.0.0.1:1")


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", "bogus:model", "", "openai/gpt-4o"])
def test_factory_rejects_unknown_specs(spec: str) -> None:
    with pytest.raises(SummarizerSpecError, match="expected one of"):
        make_summarizer(spec)


def test_factory_uses_the_configured_prices() -> None:
    config = Config(summarizer_prices={"openai/my-model": {"input": 1.0, "output": 3.0}})
    summarizer = make_summarizer("openai:my-model", base_url="http://127.0.0.1:1", config=config)
    assert isinstance(summarizer, OpenAISummarizer)
    assert summarizer.price == ModelPrice(input=1.0, output=3.0)


# ============================================================================ pricing


def test_cost_of_is_price_per_million_tokens_summed() -> None:
    cost = cost_of(
        ModelPrice(3.0, 15.0, 0.3, 3.75), input=1000, output=500, cache_read=2000, cache_write=100
    )
    assert cost.input == pytest.approx(0.003)
    assert cost.output == pytest.approx(0.0075)
    assert cost.cache_read == pytest.approx(0.0006)
    assert cost.cache_write == pytest.approx(0.000375)
    assert cost.total == pytest.approx(0.003 + 0.0075 + 0.0006 + 0.000375)
    assert cost_of(None, input=1000, output=1000).total == 0


def test_find_price_matches_snapshots_overrides_and_bare_ids() -> None:
    assert find_price("openai", "gpt-4o-mini-2024-07-18") == BUILTIN_PRICES["openai/gpt-4o-mini"]
    assert find_price("openai", "gpt-4o-2024-08-06") == BUILTIN_PRICES["openai/gpt-4o"]
    assert (
        find_price("anthropic", "claude-sonnet-4-5-20250929")
        == BUILTIN_PRICES["anthropic/claude-sonnet-4-5"]
    )
    assert (
        find_price("anthropic", "claude-3-5-haiku-latest")
        == BUILTIN_PRICES["anthropic/claude-3-5-haiku"]
    )
    # OpenRouter names models "vendor/model".
    assert find_price("openrouter", "openai/gpt-4o-mini") == BUILTIN_PRICES["openai/gpt-4o-mini"]
    assert find_price("ollama", "llama3") is None
    overrides = {"gpt-4o-mini": {"input": 9.0}, "ollama/llama3": {"output": 1.0}}
    assert find_price("openai", "gpt-4o-mini", overrides) == ModelPrice(input=9.0)
    assert find_price("ollama", "llama3", overrides) == ModelPrice(output=1.0)
    assert find_price("openai", "gpt-4o", overrides) == BUILTIN_PRICES["openai/gpt-4o"]


def test_builtin_prices_are_consistent() -> None:
    for key, price in BUILTIN_PRICES.items():
        provider, _, model = key.partition("/")
        assert provider in ("openai", "anthropic")
        assert model
        assert price.input > 0
        assert price.output >= price.input
        assert 0 <= price.cache_read < price.input


# ============================================================================ config keys (ours)


REFERENCE_KEYS = list(Config().to_settings_dict())


def test_our_keys_default_and_are_not_written_unless_set() -> None:
    config = Config()
    assert (config.summarizer_concurrency, config.summarizer_retries) == (4, 2)
    assert config.summarizer_prices == {}
    out = normalize({}).to_settings_dict()
    for key in ("summarizerConcurrency", "summarizerRetries", "summarizerPrices"):
        assert key not in out


def test_our_keys_are_written_after_the_reference_keys_before_unknown_ones() -> None:
    prices = {"m": {"input": 1, "cacheWrite": 2.5}}
    source = {
        "zeta": 1,
        "summarizerPrices": prices,
        "summarizerRetries": 2,
        "summarizerConcurrency": 8,
    }
    config = normalize(source)
    assert config.summarizer_concurrency == 8
    assert config.summarizer_retries == 2
    assert config.summarizer_prices == {"m": {"input": 1.0, "cacheWrite": 2.5}}
    # an unknown key is kept (and written back) with one warning, no nearest name this far off
    assert config.warnings == ("contextPrune.zeta: unknown setting, ignored (kept in the file)",)
    keys = list(config.to_settings_dict())
    assert keys[: len(REFERENCE_KEYS)] == REFERENCE_KEYS
    assert keys[len(REFERENCE_KEYS) :] == [
        "summarizerConcurrency",
        "summarizerRetries",
        "summarizerPrices",
        "zeta",
    ]
    assert "summarizerRetries" not in config.unknown_keys


@pytest.mark.parametrize(
    ("key", "value", "expected", "warns"),
    [
        ("summarizerConcurrency", 0, 4, True),
        ("summarizerConcurrency", 2.9, 2, False),  # floored, like the reference's counts
        ("summarizerConcurrency", "3", 4, True),
        ("summarizerRetries", -1, 2, True),
        ("summarizerRetries", 0, 0, False),
        ("summarizerRetries", True, 2, True),
    ],
)
def test_our_counts_fall_back_to_defaults(key: str, value: Any, expected: int, warns: bool) -> None:
    config = normalize({key: value})
    name = "summarizer_concurrency" if key == "summarizerConcurrency" else "summarizer_retries"
    assert getattr(config, name) == expected
    assert bool(config.warnings) is warns


@pytest.mark.parametrize(
    "prices",
    [[1, 2], {"m": 3}, {"m": {"input": -1}}, {"m": {"tokens": 1}}, {"m": {"input": "1"}}],
)
def test_a_bad_price_table_is_ignored_and_kept_in_the_file(prices: Any) -> None:
    config = normalize({"summarizerPrices": prices})
    assert config.summarizer_prices == {}
    assert any("summarizerPrices" in w for w in config.warnings)
    assert config.to_settings_dict()["summarizerPrices"] == prices


def test_with_value_and_parse_for_our_keys() -> None:
    config = Config().with_value("summarizerRetries", 5).with_value("summarizer_concurrency", 1)
    assert (config.summarizer_retries, config.summarizer_concurrency) == (5, 1)
    assert config.to_settings_dict()["summarizerRetries"] == 5
    with pytest.raises(ConfigError):
        Config().with_value("summarizerConcurrency", 0)
    with pytest.raises(ConfigError):
        Config().with_value("summarizerPrices", {"m": {"input": -2}})
    priced = Config().with_value("summarizerPrices", {"m": {"output": 4}})
    assert priced.summarizer_prices == {"m": {"output": 4.0}}
    assert parse_setting_value("summarizerConcurrency", "6") == 6
    assert parse_setting_value("summarizerConcurrency", "0") == 4
    assert parse_setting_value("summarizerRetries", "0") == 0
    assert parse_setting_value("summarizerPrices", '{"m": {"input": 1}}') == {"m": {"input": 1}}
    with pytest.raises(ConfigError):
        parse_setting_value("summarizerPrices", "[1]")
