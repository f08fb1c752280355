"""The report's recovered-refs figures on a session whose model re-queries a stubbed ref.

The session comes from the corpus generator: group 1's large ``bash`` output becomes ``t1``
at the flush of group 1's final reply, and ``context_tree_query(["t1"])`` is planted in
groups 3 and 5. So the report must show two recoveries of ``t1``: 2 and 4 user-turn groups
after it was stubbed, the second 2 groups after the first query (seed 000's re-query gap).
"""

from __future__ import annotations

from pathlib import Path

from pi_condense.config import Config
from pi_condense.report.data import collect
from pi_condense.session import SessionFile
from pi_condense.summarize.deterministic import DeterministicSummarizer
from support.corpus import write_session


def test_recoveries_are_measured_in_user_turn_groups(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    assert write_session(path, 0, groups=6, queries=[3, 5]) == [2]
    data = collect(
        SessionFile.load(path),
        Config.from_settings_dict({"enabled": True}),
        DeterministicSummarizer(),
        title="planted",
    )
    assert data.replayed
    found = [(r.ref, r.since_stub, r.since_previous_query) for r in data.recoveries]
    assert found == [("t1", 2, None), ("t1", 4, 2)]
    calls = [r.call for r in data.recoveries]
    assert calls == sorted(calls)
    assert all(0 <= c < len(data.calls) for c in calls)
