"""Chain detection, the closing-message thread, eligibility selection and the deterministic
body grammar (spec 05 sections 9.1, 11.1, 11.2, 12; spec 10 chain-detector and the
``selectEligible`` / ``buildDeterministicBody`` rows of chain-compressor)."""

from __future__ import annotations

import functools
import math
from typing import Any

import pytest

from pi_condense import _core
from pi_condense.chains import (
    ChainRange,
    detect_chains,
    deterministic_body,
    with_closing_message,
)
from pi_condense.config import Config
from pi_condense.keys import ProtectedMatcher
from pi_condense.state import PrunerState
from support.builders import call, final, plain_result, tool_use, user


def closed_chain(base: int, tool_id: str) -> list[dict[str, Any]]:
    """user at base, one call, its result at base + 2, the answer at base + 3."""
    return [
        user(base),
        tool_use(base + 1, call(tool_id)),
        plain_result(tool_id, base + 2),
        final(base + 3),
    ]


def session(n: int) -> list[dict[str, Any]]:
    """``n`` closed chains starting at 100, 200, ... with middle ids c1, c2, ..."""
    out: list[dict[str, Any]] = []
    for k in range(1, n + 1):
        out += closed_chain(100 * k, f"c{k}")
    return out


NO_PROTECTION = Config.from_settings_dict({"protectedPaths": []})


def starts(chains: list[ChainRange]) -> list[Any]:
    return [c.start_user_timestamp for c in chains]


# ----------------------------------------------------------------------------- detection


class TestDetect:
    def test_empty_gives_no_chains(self) -> None:
        assert detect_chains([]) == []

    def test_one_chain_is_one_range(self) -> None:
        msgs = closed_chain(100, "a")
        (chain,) = detect_chains(msgs)
        assert chain.start_user_timestamp == 100
        assert chain.final_assistant_timestamp == 103
        assert chain.middle_tool_call_ids == ["a"]
        assert chain.middle_occurrence_keys == ["a@102"]
        assert chain.protected_tool_call_ids == []
        assert (chain.start_index, chain.end_index) == (0, 3)
        assert chain.closed

    def test_multiple_chains_in_order_and_the_open_one_dropped(self) -> None:
        msgs = [*session(3), user(900), tool_use(901, call("open"))]
        assert starts(detect_chains(msgs)) == [100, 200, 300]

    def test_synthetic_chain_message_is_a_passthrough(self) -> None:
        msgs = closed_chain(100, "a")
        msgs.insert(2, user(101, '  \n<compressed-chain id="b1" tools="">x</compressed-chain>'))
        msgs.insert(
            3, {"role": "user", "content": '\t<compressed-chain id="b2">', "timestamp": 101}
        )
        (chain,) = detect_chains(msgs)
        assert chain.start_user_timestamp == 100
        assert chain.closed

    def test_marker_not_at_the_start_is_a_real_user_message(self) -> None:
        msgs = [user(1), user(2, 'see <compressed-chain id="b1">'), final(3)]
        chains = detect_chains(msgs)
        assert [(c.start_user_timestamp, c.final_assistant_timestamp) for c in chains] == [
            (1, None),
            (2, 3),
        ]

    def test_interrupted_chain_has_a_null_final(self) -> None:
        msgs = [user(1), tool_use(2, call("a")), plain_result("a", 3), *closed_chain(10, "b")]
        first, second = detect_chains(msgs)
        assert first.final_assistant_timestamp is None
        assert not first.closed
        assert first.middle_tool_call_ids == ["a"]
        assert first.middle_occurrence_keys == ["a@3"]
        assert second.start_user_timestamp == 10

    def test_closing_assistant_absent_leaves_the_newest_chain_open(self) -> None:
        msgs = session(2)[:-1]  # message_end: the final answer is not on the branch yet
        assert starts(detect_chains(msgs)) == [100]

    def test_ids_from_calls_and_results(self) -> None:
        msgs = [
            user(1),
            tool_use(2, call("a"), call("b")),
            plain_result("b", 3),
            plain_result("orphan", 4),
            plain_result("a", 5),
            final(6),
        ]
        (chain,) = detect_chains(msgs)
        assert chain.middle_tool_call_ids == ["a", "b", "orphan"]
        assert chain.middle_occurrence_keys == ["b@3", "orphan@4", "a@5"]

    def test_call_without_name_marks_a_tool_turn_but_adds_no_id(self) -> None:
        nameless = {"type": "toolCall", "id": "x", "arguments": {}}
        msgs = [user(1), tool_use(2, nameless), final(3)]
        (chain,) = detect_chains(msgs)
        assert chain.middle_tool_call_ids == []
        assert chain.final_assistant_timestamp == 3

    def test_no_protection_gives_empty_protected_ids(self) -> None:
        (chain,) = detect_chains(closed_chain(1, "a"), NO_PROTECTION)
        assert chain.protected_tool_call_ids == []

    def test_protected_by_name_from_both_sides_without_leaking(self) -> None:
        config = Config.from_settings_dict({"protectedTools": ["todowrite"]})
        msgs = [
            user(1),
            tool_use(2, call("p", "todowrite"), call("q")),
            plain_result("p", 3, name="todowrite"),
            plain_result("r", 4, name="todowrite"),  # a result whose call is not in the chain
            plain_result("q", 5),
            final(6),
            *closed_chain(10, "s"),
        ]
        first, second = detect_chains(msgs, config)
        assert first.protected_tool_call_ids == ["p", "r"]
        assert second.protected_tool_call_ids == []

    def test_protected_by_args_path_through_the_config_globs(self) -> None:
        msgs = [
            user(1),
            tool_use(2, call("a", "read", path="/h/src/app.ts")),
            plain_result("a", 3, name="read"),
            tool_use(4, call("b", "read", path="/h/skills/x/SKILL.md")),
            plain_result("b", 5, name="read"),
            final(6),
        ]
        (chain,) = detect_chains(msgs, Config())
        assert chain.protected_tool_call_ids == ["b"]

    def test_input_wins_over_arguments_for_the_path(self) -> None:
        block = {
            "type": "toolCall",
            "id": "a",
            "name": "read",
            "input": {"path": "skills/x/y.md"},
            "arguments": {"path": "plain.txt"},
        }
        (chain,) = detect_chains([user(1), tool_use(2, block), final(3)], Config())
        assert chain.protected_tool_call_ids == ["a"]

    def test_detection_reads_input_else_arguments_never_args(self) -> None:
        # `b.input ?? b.arguments`: a null input falls through; `args` is not read, and there
        # is no `?? {}` (a missing or null `arguments` is passed as it is: None).
        members: list[dict[str, Any]] = [
            {"input": None, "args": {"n": 0}, "arguments": {"n": 1}},
            {"input": {}, "arguments": {"n": 2}},
            {"args": {"n": 3}},
            {"input": None, "arguments": None},
            {"input": "s", "arguments": {"n": 5}},
        ]
        blocks = [
            {"type": "toolCall", "id": f"c{i}", "name": "t", **m} for i, m in enumerate(members)
        ]
        seen: list[Any] = []

        def predicate(name: Any, args: Any) -> bool:
            if name == "t":
                seen.append(args)
            return False

        detect_chains([user(1), tool_use(2, *blocks), final(3)], protection=predicate)
        assert seen == [{"n": 1}, {}, None, None, "s"]

    def test_protection_predicate_and_matcher_overrides(self) -> None:
        msgs = closed_chain(1, "a")
        seen: list[tuple[Any, Any]] = []

        def predicate(name: Any, args: Any) -> bool:
            seen.append((name, args))
            return True

        (chain,) = detect_chains(msgs, protection=predicate)
        assert chain.protected_tool_call_ids == ["a"]
        # The call side sees the args; the result side is name-only.
        assert seen == [("bash", {}), ("bash", None)]
        (chain,) = detect_chains(msgs, protection=ProtectedMatcher(["bash"], []))
        assert chain.protected_tool_call_ids == ["a"]

    def test_protected_ids_populated_on_interrupted_chains(self) -> None:
        config = Config.from_settings_dict({"protectedTools": ["bash"]})
        msgs = [user(1), tool_use(2, call("a")), plain_result("a", 3), user(4)]
        (chain,) = detect_chains(msgs, config)
        assert chain.final_assistant_timestamp is None
        assert chain.protected_tool_call_ids == ["a"]

    def test_reference_mode_string_protected_tools_match_by_substring(self) -> None:
        config = Config.from_settings_dict(
            {"protectedTools": "bash,read", "compat": "reference"}, compat="reference"
        )
        (chain,) = detect_chains(closed_chain(1, "a"), config)
        assert chain.protected_tool_call_ids == ["a"]

    def test_occurrence_keys(self) -> None:
        msgs = [
            user(1),
            tool_use(2, call("bash_1"), call("lost")),
            plain_result("bash_1", 3),
            final(4),
            *closed_chain(10, "bash_1"),
        ]
        first, second = detect_chains(msgs)
        # one key per middle result; a call without a result contributes none
        assert first.middle_occurrence_keys == ["bash_1@3"]
        assert first.middle_tool_call_ids == ["bash_1", "lost"]
        # a chain reusing an id gets its own key
        assert second.middle_occurrence_keys == ["bash_1@12"]

    def test_result_without_numeric_timestamp_keys_by_bare_id(self) -> None:
        msgs = [user(1), tool_use(2, call("a")), plain_result("a", "later"), final(4)]
        (chain,) = detect_chains(msgs)
        assert chain.middle_occurrence_keys == ["a"]

    def test_ids_are_the_messages_own_objects(self) -> None:
        msgs = closed_chain(1, "a")
        (chain,) = detect_chains(msgs)
        assert chain.middle_tool_call_ids[0] is msgs[1]["content"][0]["id"]

    def test_null_message_throws_like_the_reference(self) -> None:
        with pytest.raises(TypeError):
            detect_chains([user(1), None])

    def test_fully_protected(self) -> None:
        config = Config.from_settings_dict({"protectedTools": ["bash"]})
        (chain,) = detect_chains(closed_chain(1, "a"), config)
        assert chain.fully_protected
        (chain,) = detect_chains(closed_chain(1, "a"), NO_PROTECTION)
        assert not chain.fully_protected


# ----------------------------------------------------------------------------- closing


class TestWithClosingMessage:
    def test_no_closing_returns_the_same_list(self) -> None:
        branch = session(1)
        assert with_closing_message(branch, None) is branch

    def test_appends_when_missing(self) -> None:
        branch = session(2)[:-1]
        closing = final(203)
        out = with_closing_message(branch, closing)
        assert out is not branch
        assert out[-1] is closing
        assert len(out) == len(branch) + 1

    def test_no_double_append_by_role_and_timestamp(self) -> None:
        branch = session(2)
        assert with_closing_message(branch, final(203, "a copy")) is branch
        # Same timestamp, other role: appended.
        assert len(with_closing_message(branch, user(203))) == len(branch) + 1

    def test_threading_makes_the_window_exactly_k(self) -> None:
        # Four closed chains, the fourth closing at message_end: K = 3 leaves exactly three
        # raw, so the oldest compresses only with the closing message threaded in.
        branch = session(4)[:-1]
        closing = final(403)
        state = PrunerState()
        scan = _core.ChainScan(branch)
        assert scan.select(state.index, 3.0)[0] == []
        scan = _core.ChainScan(with_closing_message(branch, closing))
        eligible = scan.select(state.index, 3.0)[0]
        assert [row[3] for row in eligible] == [100]


# ----------------------------------------------------------------------------- selection


def select(
    msgs: list[dict[str, Any]],
    window: float,
    registered: tuple[int, ...] = (),
    grace_turns: float = 0.0,
) -> list[Any]:
    state = PrunerState()
    for k, start in enumerate(registered):
        state.register_chain({"blockId": f"b{k + 1}", "startUserTimestamp": start})
    scan = _core.ChainScan(msgs, grace_turns=grace_turns)
    eligible, _, _ = scan.select(state.index, window)
    return [row[3] for row in eligible]


class TestSelectEligible:
    def test_empty(self) -> None:
        assert select([], 3) == []

    def test_fewer_than_or_exactly_k_selects_none(self) -> None:
        assert select(session(2), 3) == []
        assert select(session(3), 3) == []

    def test_k_plus_one_takes_the_oldest(self) -> None:
        assert select(session(4), 3) == [100]

    def test_k_plus_three_takes_the_three_oldest_in_order(self) -> None:
        assert select(session(6), 3) == [100, 200, 300]

    def test_open_chains_never(self) -> None:
        msgs = [*session(4), user(900), tool_use(901, call("x")), plain_result("x", 902)]
        assert select(msgs, 3) == [100]
        msgs = [user(50), tool_use(51, call("i")), *session(4)]  # interrupted
        assert select(msgs, 3) == [100]

    def test_already_compressed_excluded_and_not_counted(self) -> None:
        assert select(session(5), 3, registered=(100,)) == [200]
        state = PrunerState()
        state.register_chain({"blockId": "b1", "startUserTimestamp": 100})
        _, compressed, _ = _core.ChainScan(session(5)).select(state.index, 3)
        assert compressed == [100]

    def test_k_zero_takes_all(self) -> None:
        assert select(session(3), 0) == [100, 200, 300]

    def test_absent_window_selects_nothing(self) -> None:
        assert select(session(5), math.nan) == []

    def test_empty_middle_chains_never(self) -> None:
        msgs = [user(1), final(2), user(3), final(4)]
        assert select(msgs, 0) == []

    def test_window_matches_the_config_rule(self) -> None:
        for window in (0, 1, 3, 10):
            config = Config.from_settings_dict(
                {"chainCompression": {"enabled": True, "rollingWindow": window}}
            )
            chain_config = config.chain_compression
            assert len(select(session(6), window)) == chain_config.auto_compress_count(6)

    def test_grace_defers_a_chain_holding_a_recovery_output(self) -> None:
        msgs = session(5)
        recovery = {
            "role": "toolResult",
            "toolCallId": "q1",
            "toolName": "context_tree_query",
            "content": [{"type": "text", "text": "raw"}],
            "isError": False,
            "timestamp": 202,
        }
        # chain 2 runs the query tool
        msgs[5:7] = [tool_use(201, call("q1", "context_tree_query")), recovery]
        # Five chains, K = 2: chains 1-3 are past the window; chain 2 is deferred while its
        # recovery output is within 3 user turns, and chain 4 does not move in.
        assert select(msgs, 2, grace_turns=3) == [100, 300]
        # Without grace it compresses.
        assert select(msgs, 2, grace_turns=0) == [100, 200, 300]
        # Aged out (more than 3 user turns later): compresses again.
        aged = [*msgs, *session(9)[20:]]
        assert 200 in select(aged, 2, grace_turns=3)

    def test_grace_is_computed_on_the_branch_without_the_closing_message(self) -> None:
        msgs = session(2)
        recovery = plain_result("q1", 102, name="context_tree_query")
        msgs[2] = recovery
        msgs[1] = tool_use(101, call("q1", "context_tree_query"))
        scan = _core.ChainScan(msgs, grace_len=len(msgs) - 1, grace_turns=1)
        assert scan.in_grace == ["q1@102"]
        scan = _core.ChainScan(msgs, grace_len=0, grace_turns=1)
        assert scan.in_grace == []


# ----------------------------------------------------------------------------- body


def rec(tool_id: str, name: str, args: Any, at: int, **extra: Any) -> dict[str, Any]:
    record = {
        "toolCallId": tool_id,
        "toolName": name,
        "args": args,
        "resultText": "",
        "isError": False,
        "turnIndex": -1,
        "timestamp": at,
        "resultTimestamp": at,
    }
    record.update(extra)
    return record


class TestDeterministicBody:
    def test_spec_vector(self) -> None:
        records = [
            rec("x1", "read", {"path": "a"}, 1500),
            rec("x2", "Bash", {}, 4000),
            rec("x3", "bash", {}, 2500),
        ]
        assert deterministic_body(records, []) == (
            "Deterministic chain compression (no per-batch summary existed for this span; raw "
            "outputs recoverable via context_tree_query).\n"
            "Calls: 3\n"
            "Tools: bash x1, Bash x1, read x1\n"
            "Span: 1970-01-01T00:00:01.500Z -> 1970-01-01T00:00:04.000Z (3s)\n"
            'First: read {"path":"a"}\n'
            "Last: Bash {}\n"
            "Refs: x1, x2, x3"
        )

    def test_sorts_and_spans_by_result_timestamp(self) -> None:
        records = [
            rec("a", "edit", {"n": 1}, 5000, timestamp=1),
            rec("b", "bash", {"n": 2}, 1000, timestamp=9),
        ]
        body = deterministic_body(records, ["t7", "t8"])
        assert "Span: 1970-01-01T00:00:01.000Z -> 1970-01-01T00:00:05.000Z (4s)" in body
        assert 'First: bash {"n":2}\nLast: edit {"n":1}' in body
        assert body.endswith("Refs: t7, t8")

    def test_timestamp_when_result_timestamp_is_missing(self) -> None:
        record = rec("a", "t", {}, 0)
        del record["resultTimestamp"]
        record["timestamp"] = 60000
        assert "1970-01-01T00:01:00.000Z -> 1970-01-01T00:01:00.000Z (0s)" in deterministic_body(
            [record], []
        )

    def test_histogram_counts_descending(self) -> None:
        records = [rec(str(i), n, {}, i) for i, n in enumerate(["read", "bash", "read", "edit"])]
        assert "Tools: read x2, bash x1, edit x1" in deterministic_body(records, [])

    def test_long_args_cut_to_200_units(self) -> None:
        args = {"command": "y" * 300}
        text = '{"command":"' + "y" * 300 + '"}'
        body = deterministic_body([rec("a", "bash", args, 0)], [])
        assert f"First: bash {text[:200]}...\n" in body

    def test_cut_counts_utf16_units(self) -> None:
        args = {"kk": "😀" * 150}  # '{"kk":"' is 7 units, then 2 per emoji
        body = deterministic_body([rec("a", "bash", args, 0)], [])
        first = body.split("\n")[4]
        excerpt = first[len("First: bash ") : -3]
        assert len(excerpt.encode("utf-16-le", "surrogatepass")) == 400
        # 200 units end inside a surrogate pair: the lone half is kept.
        assert excerpt[-1] == "\ud83d"

    def test_empty_args_still_give_a_full_body(self) -> None:
        record = rec("a", "noop", {}, 0)
        del record["args"]
        body = deterministic_body([record], [])
        assert body.count("\n") == 6
        assert "First: noop \nLast: noop \n" in body

    def test_key_order_of_args_is_javascripts(self) -> None:
        body = deterministic_body([rec("a", "t", {"b": 1, "2": 0}, 0)], [])
        assert 'First: t {"2":0,"b":1}' in body

    def test_invalid_time_raises(self) -> None:
        with pytest.raises(ValueError, match="Invalid time value"):
            deterministic_body([rec("a", "t", {}, 9e15)], [])


class TestCollation:
    def test_spec_example_sort(self) -> None:
        # 11 section 8.
        words = ["A", "a1", "a10", "a2", "bash", "read", "Read"]
        words += ["web_fetch", "web-fetch", "web.fetch", "webfetch"]
        shuffled = sorted(words, key=lambda w: w[::-1])
        ordered = sorted(shuffled, key=functools.cmp_to_key(_core.locale_compare))
        assert ordered == words
