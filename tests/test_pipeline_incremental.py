"""The flush pipeline's incremental paths equal their from-scratch computations (issue 18).

The index's summary-body lookups answer as a walk over every body.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pi_condense import _core

# ---------------------------------------------------------------------------- the index


_KEYS = st.lists(st.sampled_from(("a@1", "b@2", "c@3", "d@4")), max_size=3)


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(st.tuples(_KEYS, st.sampled_from(("S", "T", "U"))), max_size=8),
    query=_KEYS,
)
def test_summary_body_lookups_answer_as_a_walk_over_the_bodies(
    bodies: list[tuple[list[str], str]], query: list[str]
) -> None:
    index = _core.Index()
    for keys, body in bodies:
        index.register_summary_body(keys, body)
    kept = index.summary_bodies()
    covering = [text for keys, text in kept if set(keys) & set(query)]
    assert index.has_summary_covering_any(query) == bool(covering)
    assert index.per_batch_summaries(query) == list(dict.fromkeys(covering))
    assert index.summary_bodies_with_keys(query) == [b for b in kept if b[0] == query]
