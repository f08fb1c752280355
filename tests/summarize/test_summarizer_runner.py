"""SummarizerRunner: timeouts, outcome classification, outage fallback, retries, concurrency.

Calls go through the real SDK clients to loopback servers (tests/support/llm_servers.py). Expected
notification texts and levels, timeout messages and the fallback transitions come from spec 05
section 13.3 and spec 08 sections 3-4 (the reference's summarizer, summarizer-fallback and
summarizer-wiring tests); retry delays from `Retry-After` or our documented backoff. The probe
cooldown runs on an injected clock; waits between retries go to an injected sleep.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Callable, Optional

import pytest

from pi_condense.config import Config
from pi_condense.errors import CondenseError
from pi_condense.summarize.anthropic_client import AnthropicSummarizer
from pi_condense.summarize.base import (
    Completion,
    CompletionRequest,
    ModelRef,
    SummarizerError,
)
from pi_condense.summarize.fallback import COOLDOWN_MS, FallbackController, has_distinct_fallback
from pi_condense.summarize.openai_client import OpenAISummarizer
from pi_condense.summarize.pricing import ModelPrice
from pi_condense.summarize.runner import (
    BACKOFF_BASE_SECONDS,
    ProviderError,
    SummarizerRunner,
    retry_after_seconds,
)
from support.llm_servers import (
    LoopbackLLMServer,
    Recorded,
    Reply,
    anthropic_error,
    anthropic_stream,
    openai_error,
    openai_stream,
)

T0 = 1_750_000_000_000
MINUTE = 60_000


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Harness:
    """A runner over OpenAI clients named Primary / Session on one loopback server."""

    def __init__(
        self,
        server: LoopbackLLMServer,
        *,
        distinct: bool = True,
        primary_model: str = "primary-model",
        session_model: Optional[str] = "session-model",
        **config: Any,
    ) -> None:
        self.server = server
        self.clock = Clock()
        self.notes: list[tuple[str, str]] = []
        self.sleeps: list[float] = []
        config.setdefault("summarizer_idle_timeout_ms", 0)
        config.setdefault("summarizer_max_timeout_ms", 0)
        self.config = Config(**config)
        self.primary = OpenAISummarizer(
            primary_model, base_url=server.url + "/v1", api_key="k", name="Primary"
        )
        self.session: Optional[OpenAISummarizer] = None
        if session_model is not None:
            self.session = OpenAISummarizer(
                session_model if distinct else primary_model,
                base_url=server.url + "/v1",
                api_key="k",
                name="Session",
            )

        async def fake_sleep(seconds: float) -> None:
            self.sleeps.append(seconds)

        self.runner = SummarizerRunner(
            self.primary,
            self.session,
            self.config,
            clock=self.clock,
            notify=lambda level, text: self.notes.append((level, text)),
            sleep=fake_sleep,
        )

    def run(self, req: Optional[CompletionRequest] = None) -> Optional[Completion]:
        return asyncio.run(self.runner.run(req or request()))

    def models_called(self) -> list[str]:
        return [r.body["model"] for r in self.server.requests]


def request(thinking: Optional[str] = None) -> CompletionRequest:
    return CompletionRequest(prompt="summarize", kind="batch", timestamp=T0, thinking=thinking)


class ByModel:
    """Responder: a queue of replies per model; an exhausted queue repeats its last reply."""

    def __init__(self, **scripts: list[Reply]) -> None:
        self.scripts = {
            model.replace("_", "-"): deque(replies) for model, replies in scripts.items()
        }

    def set(self, model: str, *replies: Reply) -> None:
        self.scripts[model] = deque(replies)

    def __call__(self, req: Recorded) -> Reply:
        queue = self.scripts[req.body["model"]]
        return queue.popleft() if len(queue) > 1 else queue[0]


def ok(text: str = "- summary") -> Reply:
    return openai_stream(
        [text], usage={"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}
    )


def down(message: str = "upstream unavailable") -> Reply:
    return openai_error(503, message, "server_error")


pytestmark = pytest.mark.usefixtures("loopback_only")


ENTER = (
    "warning",
    "pi-condense: summarizer model Primary failing, using session model Session until it recovers",
)
RECOVER = ("info", "pi-condense: summarizer model Primary recovered")


# ============================================================================ single model


def test_success_returns_the_completion_without_notifications(server: LoopbackLLMServer) -> None:
    h = Harness(server, session_model=None)
    server.queue(ok("- done"))
    result = h.run()
    assert result is not None
    assert result.text == "- done"
    assert result.usage.input == 10
    assert h.notes == []


def test_config_thinking_reaches_the_wire_unless_the_request_sets_it(
    server: LoopbackLLMServer,
) -> None:
    h = Harness(server, session_model=None, summarizer_thinking="low")
    server.queue(ok(), ok(), ok())
    h.run()
    h.run(request("high"))
    h.run(request("off"))
    efforts = [r.body.get("reasoning_effort") for r in server.requests]
    assert efforts == ["low", "high", None]


def test_usage_and_cost_are_carried_through(server: LoopbackLLMServer) -> None:
    h = Harness(server, session_model=None)
    h.runner.primary = OpenAISummarizer(
        "gpt-x", base_url=server.url + "/v1", api_key="k", prices=ModelPrice(1.0, 4.0, 0.1)
    )
    usage = {
        "prompt_tokens": 5000,
        "completion_tokens": 700,
        "total_tokens": 5700,
        "prompt_tokens_details": {"cached_tokens": 4000},
    }
    server.queue(openai_stream(["- s"], usage=usage))
    result = h.run()
    assert result is not None
    assert (result.usage.input, result.usage.output, result.usage.cache_read) == (1000, 700, 4000)
    assert result.usage.cost.total == pytest.approx((1000 * 1.0 + 700 * 4.0 + 4000 * 0.1) / 1e6)


@pytest.mark.parametrize(
    "reply",
    [
        openai_stream([]),
        openai_stream(["  \n\t "]),
        openai_stream(["cut off"], finish_reason="length"),
    ],
    ids=["empty", "whitespace", "length"],
)
def test_unusable_replies_are_silent(server: LoopbackLLMServer, reply: Reply) -> None:
    h = Harness(server)
    server.queue(reply)
    assert h.run() is None
    assert h.notes == []
    assert h.models_called() == ["primary-model"]  # unusable never trips the fallback
    assert not h.runner.in_fallback


def test_stop_reason_error_is_transient_with_the_provider_message(
    server: LoopbackLLMServer,
) -> None:
    h = Harness(server, session_model=None)
    server.queue(openai_stream(["x"], finish_reason="content_filter"))
    assert h.run() is None
    assert h.notes == [
        ("error", "pruner: summarization failed: Provider finish_reason: content_filter")
    ]


def test_malformed_stream_is_a_transient_failure(server: LoopbackLLMServer) -> None:
    h = Harness(server, session_model=None)
    server.queue(Reply(chunks=[(0.0, b"data: {oops\n\n")]))
    assert h.run() is None
    [(level, text)] = h.notes
    assert level == "error"
    assert text.startswith("pruner: summarization failed: Primary: malformed response")


def test_summarizer_exceptions_of_any_kind_are_transient() -> None:
    class Broken:
        model = ModelRef("p", "broken")

        async def complete(
            self, request: CompletionRequest, on_event: Callable[[], None]
        ) -> Completion:
            raise RuntimeError("kaput")

    notes: list[tuple[str, str]] = []
    runner = SummarizerRunner(
        Broken(), None, Config(), clock=Clock(), notify=lambda *n: notes.append(n)
    )
    assert asyncio.run(runner.run(request())) is None
    assert notes == [("error", "pruner: summarization failed: kaput")]


# ============================================================================ timeouts


def test_idle_timeout_bounds_the_time_to_the_first_event(server: LoopbackLLMServer) -> None:
    h = Harness(server, session_model=None, summarizer_idle_timeout_ms=150)
    server.queue(Reply(delay=20.0, body=b"{}"))  # no headers for 20 s (cut short at teardown)
    assert h.run() is None
    assert h.notes == [
        (
            "warning",
            "pi-condense: summarizer Primary stalled (no output for 0s); summarizer call abandoned",
        )
    ]


def test_idle_timeout_after_a_stalled_stream(server: LoopbackLLMServer) -> None:
    h = Harness(server, session_model=None, summarizer_idle_timeout_ms=200)
    server.queue(openai_stream(["- part"], finish_reason=None, done=False, hold=20.0))
    assert h.run() is None
    [(level, text)] = h.notes
    assert (level, text) == (
        "warning",
        "pi-condense: summarizer Primary stalled (no output for 0s); summarizer call abandoned",
    )


def test_idle_message_rounds_seconds_like_javascript(server: LoopbackLLMServer) -> None:
    h = Harness(server, session_model=None, summarizer_idle_timeout_ms=500)
    server.queue(Reply(delay=20.0, body=b"{}"))
    assert h.run() is None
    # Math.round(0.5) is 1 (Python's round(0.5) would be 0).
    assert "stalled (no output for 1s)" in h.notes[0][1]


def test_every_event_resets_the_idle_timer(server: LoopbackLLMServer) -> None:
    # 12 deltas 50 ms apart (600 ms in all) against a 400 ms idle window.
    texts = [f"w{i} " for i in range(12)]
    h = Harness(server, session_model=None, summarizer_idle_timeout_ms=400)
    server.queue(openai_stream(texts, gap=0.05))
    result = h.run()
    assert result is not None
    assert result.text == "".join(texts)
    assert h.notes == []


def test_ceiling_timeout(server: LoopbackLLMServer) -> None:
    # A stream that keeps talking (20 s, cut short at teardown): only the ceiling stops it.
    h = Harness(server, session_model=None, summarizer_max_timeout_ms=300)
    server.queue(openai_stream(["x"] * 400, gap=0.05, finish_reason=None, done=False))
    assert h.run() is None
    assert h.notes == [
        (
            "warning",
            "pi-condense: summarizer Primary exceeded 0s ceiling; summarizer call abandoned",
        )
    ]


def test_both_timers_disabled_lets_a_slow_stream_finish(server: LoopbackLLMServer) -> None:
    h = Harness(server, session_model=None)
    server.queue(openai_stream(["a", "b"], gap=0.1))
    result = h.run()
    assert result is not None
    assert result.text == "ab"


def test_caller_cancellation_propagates_and_is_not_a_timeout(server: LoopbackLLMServer) -> None:
    h = Harness(server, summarizer_idle_timeout_ms=60_000)
    server.queue(Reply(delay=20.0, body=b"{}"))

    async def main() -> None:
        task = asyncio.ensure_future(h.runner.run(request()))
        while not server.requests:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert h.notes == []
    assert not h.runner.in_fallback


# ============================================================================ retries (ours)


def test_rate_limit_is_retried_after_retry_after(server: LoopbackLLMServer) -> None:
    h = Harness(server, session_model=None)
    server.queue(
        openai_error(429, "Rate limit reached", "requests", headers={"Retry-After": "2"}),
        ok("- after"),
    )
    result = h.run()
    assert result is not None
    assert result.text == "- after"
    assert h.sleeps == [2.0]
    assert len(server.requests) == 2
    assert h.notes == []


def test_server_errors_back_off_exponentially_then_give_up(server: LoopbackLLMServer) -> None:
    h = Harness(server, session_model=None, summarizer_retries=2)
    server.queue(down("a"), down("b"), down("c"), ok())
    assert h.run() is None
    assert h.sleeps == [BACKOFF_BASE_SECONDS, 2 * BACKOFF_BASE_SECONDS]
    assert len(server.requests) == 3
    assert h.notes == [("error", "pruner: summarization failed: Primary: HTTP 503: c")]


def test_anthropic_overload_529_is_retried(server: LoopbackLLMServer) -> None:
    claude = AnthropicSummarizer("claude-x", base_url=server.url, api_key="k", name="Claude")
    notes: list[tuple[str, str]] = []
    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    runner = SummarizerRunner(
        claude,
        None,
        Config(),
        clock=Clock(),
        notify=lambda *n: notes.append(n),
        sleep=fake_sleep,
    )
    server.queue(anthropic_error(529, "overloaded_error", "Overloaded"), anthropic_stream(["- ok"]))
    result = asyncio.run(runner.run(request()))
    assert result is not None
    assert result.text == "- ok"
    assert sleeps == [BACKOFF_BASE_SECONDS]
    assert notes == []


@pytest.mark.parametrize(
    "reply",
    [
        openai_error(400, "bad request", "invalid_request_error"),
        openai_error(429, "come back tomorrow", "requests", headers={"Retry-After": "3600"}),
    ],
    ids=["client-error", "retry-after-too-long"],
)
def test_not_retried(server: LoopbackLLMServer, reply: Reply) -> None:
    h = Harness(server, session_model=None)
    server.queue(reply, ok())
    assert h.run() is None
    assert len(server.requests) == 1
    assert h.sleeps == []
    assert h.notes[0][0] == "error"


def test_reference_mode_makes_a_single_attempt(server: LoopbackLLMServer) -> None:
    h = Harness(server, session_model=None, compat="reference")
    server.queue(
        openai_error(429, "Rate limit reached", "requests", headers={"Retry-After": "1"}), ok()
    )
    assert h.run() is None
    assert len(server.requests) == 1
    assert h.notes == [
        ("error", "pruner: summarization failed: Primary: HTTP 429: Rate limit reached")
    ]


def test_retries_stay_inside_the_ceiling(server: LoopbackLLMServer) -> None:
    # A 5 s Retry-After does not fit in a 3 s ceiling: fail at once.
    h = Harness(server, session_model=None, summarizer_max_timeout_ms=3000)
    server.queue(openai_error(429, "slow down", "requests", headers={"Retry-After": "5"}), ok())
    assert h.run() is None
    assert h.sleeps == []
    assert len(server.requests) == 1


def test_retry_after_parsing() -> None:
    assert retry_after_seconds({"Retry-After": "12"}) == 12.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert (
        retry_after_seconds({"Retry-After": "Wed, 21 Oct 2015 07:28:30 GMT"}, now=1445412500.0)
        == 10.0
    )
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    assert retry_after_seconds({"Retry-After": "-3"}) is None
    assert retry_after_seconds({}) is None


# ============================================================================ concurrency (ours)


@pytest.mark.parametrize(
    ("compat", "limit", "expected"), [("default", 2, 2), ("default", 3, 3), ("reference", 2, 6)]
)
def test_concurrency_limit(compat: str, limit: int, expected: int) -> None:
    # The server holds each request until all six are in flight (or 1.5 s pass): an
    # unlimited runner gets all six in at once, a limited one never more than its limit.
    # (With 0.4 s the limited runner's second request missed the first one on a loaded
    # 2-core machine, and the maximum in flight read below the limit.)
    server = LoopbackLLMServer(responder=lambda _: ok(), gate=6, gate_timeout=1.5)
    with server:
        h = Harness(server, session_model=None, summarizer_concurrency=limit, compat=compat)

        async def main() -> list[Optional[Completion]]:
            return await h.runner.run_all([request() for _ in range(6)])

        results = asyncio.run(main())
        assert all(r is not None and r.text == "- summary" for r in results)
        assert server.max_in_flight == expected
        assert len(server.requests) == 6


# ============================================================================ outage fallback


def test_same_model_never_engages_the_fallback(server: LoopbackLLMServer) -> None:
    h = Harness(server, distinct=False, summarizer_retries=0)
    assert not h.runner.fallback_engaged
    server.queue(down("provider overloaded"))
    assert h.run() is None
    assert h.notes == [
        ("error", "pruner: summarization failed: Primary: HTTP 503: provider overloaded")
    ]
    assert not h.runner.in_fallback
    assert h.models_called() == ["primary-model"]


def test_outage_enters_fallback_then_a_probe_recovers(server: LoopbackLLMServer) -> None:
    script = ByModel(primary_model=[down()], session_model=[ok("- from session")])
    server.responder = script
    h = Harness(server, summarizer_retries=0)

    result = h.run()
    assert result is not None
    assert result.text == "- from session"
    assert h.notes == [ENTER]
    assert h.runner.in_fallback
    assert h.models_called() == ["primary-model", "session-model"]

    # Sticky: before the cooldown only the session model is called, silently.
    server.requests.clear()
    h.notes.clear()
    h.clock.now += COOLDOWN_MS - 1
    assert h.run() is not None
    assert h.models_called() == ["session-model"]
    assert h.notes == []

    # Ten minutes after entering, one probe of the primary; it succeeds and recovers.
    server.requests.clear()
    h.clock.now = T0 + COOLDOWN_MS
    script.set("primary-model", ok("- primary is back"))
    result = h.run()
    assert result is not None
    assert result.text == "- primary is back"
    assert h.models_called() == ["primary-model"]
    assert h.notes == [RECOVER]
    assert not h.runner.in_fallback


def test_a_failed_probe_rescued_by_the_session_model_stays_silent(
    server: LoopbackLLMServer,
) -> None:
    server.responder = ByModel(primary_model=[down()], session_model=[ok()])
    h = Harness(server, summarizer_retries=0)
    h.run()
    h.notes.clear()
    server.requests.clear()
    h.clock.now += COOLDOWN_MS
    assert h.run() is not None
    assert h.models_called() == ["primary-model", "session-model"]
    assert h.notes == []
    assert h.runner.in_fallback
    # The failed probe restarted the cooldown.
    server.requests.clear()
    h.clock.now += COOLDOWN_MS - 1
    h.run()
    assert h.models_called() == ["session-model"]


def test_both_down_notifies_an_error_and_owes_the_enter_warning(
    server: LoopbackLLMServer,
) -> None:
    script = ByModel(primary_model=[down("primary down")], session_model=[down("session down")])
    server.responder = script
    h = Harness(server, summarizer_retries=0)
    assert h.run() is None
    assert h.notes == [("error", "pruner: summarization failed: Session: HTTP 503: session down")]
    assert h.runner.in_fallback

    h.notes.clear()
    script.set("session-model", ok("- rescued"))
    result = h.run()
    assert result is not None
    assert result.text == "- rescued"
    assert h.notes == [ENTER]  # the owed warning, once
    h.notes.clear()
    h.run()
    assert h.notes == []


def test_fallback_only_failures_do_not_delay_the_probe(server: LoopbackLLMServer) -> None:
    script = ByModel(primary_model=[down()], session_model=[ok()])
    server.responder = script
    h = Harness(server, summarizer_retries=0)
    h.run()  # enter at T0
    script.set("session-model", down("session hiccup"))
    h.clock.now = T0 + 5 * MINUTE
    h.notes.clear()
    assert h.run() is None
    assert h.notes == [("error", "pruner: summarization failed: Session: HTTP 503: session hiccup")]
    server.requests.clear()
    script.set("primary-model", ok("- back"))
    h.clock.now = T0 + COOLDOWN_MS
    h.notes.clear()
    result = h.run()
    assert result is not None
    assert result.text == "- back"
    assert h.models_called() == ["primary-model"]
    assert h.notes == [RECOVER]


def test_an_unusable_probe_does_not_recover(server: LoopbackLLMServer) -> None:
    script = ByModel(primary_model=[down()], session_model=[ok()])
    server.responder = script
    h = Harness(server, summarizer_retries=0)
    h.run()
    script.set("primary-model", openai_stream(["   "]))
    h.clock.now += COOLDOWN_MS
    h.notes.clear()
    server.requests.clear()
    assert h.run() is None
    assert h.models_called() == ["primary-model"]
    assert h.notes == []
    assert h.runner.in_fallback


def test_auth_failures_never_trip_the_fallback(server: LoopbackLLMServer) -> None:
    server.responder = ByModel(
        primary_model=[openai_error(401, "Incorrect API key provided", "invalid_request_error")],
        session_model=[ok()],
    )
    h = Harness(server)
    assert h.run() is None
    assert h.notes == [
        ("error", "pruner: summarization failed: Primary: HTTP 401: Incorrect API key provided")
    ]
    assert h.models_called() == ["primary-model"]
    assert not h.runner.in_fallback
    assert h.sleeps == []  # auth is never retried


def test_primary_idle_timeout_is_rescued_by_the_session_model(server: LoopbackLLMServer) -> None:
    server.responder = ByModel(
        primary_model=[Reply(delay=20.0, body=b"{}")], session_model=[ok("- rescued")]
    )
    # The window only has to cut the hung primary short; the session model's reply must come
    # inside it too, which 150 ms did not always leave room for on a loaded 2-core machine.
    h = Harness(server, summarizer_idle_timeout_ms=1500)
    result = h.run()
    assert result is not None
    assert result.text == "- rescued"
    assert h.notes == [ENTER]
    assert h.runner.in_fallback


def test_both_time_out_gives_one_warning(server: LoopbackLLMServer) -> None:
    hang = Reply(delay=20.0, body=b"{}")
    server.responder = ByModel(primary_model=[hang], session_model=[hang])
    h = Harness(server, summarizer_idle_timeout_ms=150)
    assert h.run() is None
    assert h.notes == [
        (
            "warning",
            "pi-condense: summarizer Session stalled (no output for 0s); summarizer call abandoned",
        )
    ]


def test_concurrent_calls_elect_exactly_one_probe(server: LoopbackLLMServer) -> None:
    script = ByModel(primary_model=[down()], session_model=[ok()])
    server.responder = script
    h = Harness(server, summarizer_retries=0)
    h.run()
    h.clock.now += COOLDOWN_MS
    script.set("primary-model", ok("- probe ok"))
    server.requests.clear()
    h.notes.clear()

    async def main() -> list[Optional[Completion]]:
        return await h.runner.run_all([request() for _ in range(3)])

    results = asyncio.run(main())
    assert all(r is not None for r in results)
    assert sorted(h.models_called()) == ["primary-model", "session-model", "session-model"]
    assert h.notes == [RECOVER]


def test_reset_forgets_the_fallback(server: LoopbackLLMServer) -> None:
    server.responder = ByModel(primary_model=[down()], session_model=[ok()])
    h = Harness(server, summarizer_retries=0)
    h.run()
    assert h.runner.in_fallback
    h.runner.reset()
    assert not h.runner.in_fallback
    server.requests.clear()
    h.run()
    assert h.models_called()[0] == "primary-model"


def test_retries_run_before_the_fallback(server: LoopbackLLMServer) -> None:
    server.responder = ByModel(primary_model=[down(), ok("- second try")], session_model=[ok()])
    h = Harness(server)
    result = h.run()
    assert result is not None
    assert result.text == "- second try"
    assert h.models_called() == ["primary-model", "primary-model"]
    assert h.sleeps == [BACKOFF_BASE_SECONDS]
    assert not h.runner.in_fallback
    assert h.notes == []


# ============================================================================ controller


def test_controller_transitions() -> None:
    clock = Clock(0)
    c = FallbackController(clock)
    assert c.choose_target().target == "primary"
    assert c.on_primary_fail_fallback_ok(False) == "enter"
    assert c.on_primary_fail_fallback_ok(False) == "none"
    clock.now = COOLDOWN_MS - 1
    assert c.choose_target().target == "fallback"
    clock.now = COOLDOWN_MS
    first = c.choose_target()
    assert (first.target, first.was_probe) == ("primary", True)
    assert c.choose_target().target == "fallback"
    assert c.on_primary_success(False) == "none"
    assert c.on_primary_success(True) == "recover"
    assert not c.in_fallback

    c.on_both_down()
    assert c.in_fallback
    assert c.on_fallback_success() == "enter"
    assert c.on_fallback_success() == "none"
    c.reset()
    assert not c.in_fallback
    c.on_primary_fail_fallback_ok(False)
    c.on_both_down()  # while in fallback: no new warning owed
    assert c.on_fallback_success() == "none"


def test_distinct_fallback_rule() -> None:
    a = ModelRef("anthropic", "claude-haiku", "Haiku")
    assert not has_distinct_fallback(a, a)
    assert not has_distinct_fallback(a, ModelRef("anthropic", "claude-haiku", "Other name"))
    assert not has_distinct_fallback(None, a)
    assert not has_distinct_fallback(a, None)
    assert has_distinct_fallback(a, ModelRef("anthropic", "claude-sonnet"))
    assert has_distinct_fallback(ModelRef("a", "m"), ModelRef("b", "m"))


def test_provider_error_is_a_summarizer_error() -> None:
    error = ProviderError("x", status=503, retryable=True)
    assert isinstance(error, SummarizerError)
    assert not error.auth
    assert (error.status, error.retryable, error.retry_after) == (503, True, None)


def test_summarizer_errors_are_condense_errors() -> None:
    # One ``except CondenseError`` catches every error the package raises.
    assert issubclass(SummarizerError, CondenseError)
    assert isinstance(ProviderError("x", status=429, retryable=True), CondenseError)
    assert isinstance(SummarizerError("no key", auth=True), CondenseError)
