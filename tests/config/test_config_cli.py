"""`pi-condense config ...`: the `/pruner` settings subcommands over a real settings.json.

Messages are the reference's (spec 09 section 2, checked against `src/commands.ts`); every
write is read back from the file, other keys intact; a refused value leaves the file as it
was, and so does a write that dies before its rename.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pi_condense.cli import app
from pi_condense.config import Config

LEVELS = "default, off, minimal, low, medium, high, xhigh"


class Result:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run(*args: str, agent: Path, code: str | None = None) -> Result:
    """The CLI in this process (typer's runner), or in a subprocess running ``code``."""
    if code is None:
        previous = os.environ.get("PI_CODING_AGENT_DIR")
        os.environ["PI_CODING_AGENT_DIR"] = str(agent)
        try:
            result = CliRunner().invoke(app, list(args))
        finally:
            if previous is not None:
                os.environ["PI_CODING_AGENT_DIR"] = previous
        return Result(result.exit_code, result.stdout, result.stderr)
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(agent)}
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    directory = tmp_path / "agent"
    directory.mkdir()
    return directory


@pytest.fixture
def settings(agent: Path) -> Path:
    """Pi's settings.json with other keys around the block."""
    path = agent / "settings.json"
    document = {
        "theme": "dark",
        "contextPrune": {"enabled": False, "futureKey": {"x": 1}},
        "packages": ["pi-condense"],
    }
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def block(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text("utf-8"))
    assert document["theme"] == "dark"
    assert document["packages"] == ["pi-condense"]
    assert list(document) == ["theme", "contextPrune", "packages"]
    result: dict[str, Any] = document["contextPrune"]
    assert result["futureKey"] == {"x": 1}
    return result


SETTERS = [
    (["on"], "Context pruning enabled.", {"enabled": True}),
    (["off"], "Context pruning disabled.", {"enabled": False}),
    (["model", "openai/gpt-4o-mini"], "Summarizer model set to: openai/gpt-4o-mini", None),
    (
        ["model", "openai/gpt-5-mini:low"],
        "Summarizer model set to: openai/gpt-5-mini with thinking low",
        {"summarizerModel": "openai/gpt-5-mini", "summarizerThinking": "low"},
    ),
    (["thinking", "high"], "Summarizer thinking set to: high", {"summarizerThinking": "high"}),
    (["prune-on", "on-demand"], "Prune trigger set to: On demand", {"pruneOn": "on-demand"}),
    (
        ["batching", "agent-message"],
        "Batching mode set to: Per agent message",
        {"batchingMode": "agent-message"},
    ),
    (
        ["protected-tools", "todowrite,", "todoread"],
        "Protected tools: todowrite, todoread",
        {"protectedTools": ["todowrite", "todoread"]},
    ),
    (["protected-tools", "NONE"], "Protected tools: (none)", {"protectedTools": []}),
    (
        ["protected-paths", "**/docs/**,", "*.md"],
        "Protected paths: **/docs/**, *.md",
        {"protectedPaths": ["**/docs/**", "*.md"]},
    ),
    (["protected-paths", "clear"], "Protected paths: (none)", {"protectedPaths": []}),
    (
        ["min-batch-chars", "0"],
        "minBatchChars set to 0 \u2014 pre-flush trivial-batch skipping disabled.",
        {"minBatchChars": 0},
    ),
    (["min-batch-chars", "2500"], "minBatchChars set to 2500.", {"minBatchChars": 2500}),
    (["min-batch-chars", "12abc"], "minBatchChars set to 12.", {"minBatchChars": 12}),
    (
        ["recovery-grace", "0"],
        "recovery-grace set to 0 - context_tree_query output stubs immediately.",
        {"recoveryGraceTurns": 0},
    ),
    (
        ["recovery-grace", "5"],
        "recovery-grace set to 5 user-turn-group(s).",
        {"recoveryGraceTurns": 5},
    ),
    (["dedup", "off"], "Content-hash dedup turned OFF.", {"dedupByContentHash": False}),
    (["dedup", "TRUE"], "Content-hash dedup turned ON.", {"dedupByContentHash": True}),
    (
        ["set", "chainCompression.rollingWindow", "7"],
        "chainCompression.rollingWindow set to: 7",
        None,
    ),
]


@pytest.mark.parametrize(("args", "message", "written"), SETTERS)
def test_setters_write_the_block_and_keep_other_keys(
    args: list[str], message: str, written: dict[str, Any] | None, agent: Path, settings: Path
) -> None:
    proc = run("config", *args, agent=agent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == message + "\n"
    saved = block(settings)
    if written is None:
        written = {"summarizerModel": "openai/gpt-4o-mini"} if args[0] == "model" else {}
    for key, value in written.items():
        assert saved[key] == value
    if args[0] == "set":
        assert saved["chainCompression"]["rollingWindow"] == 7
    assert Config.from_settings_dict(saved).to_settings_dict() == saved
    assert [p.name for p in settings.parent.iterdir()] == ["settings.json"]


REFUSALS = [
    (
        ["model", "a/b:free"],
        f"Invalid model thinking suffix: free. Use one of: {LEVELS}.",
    ),
    (["model", ":low"], f"Invalid model thinking suffix: low. Use one of: {LEVELS}."),
    (
        ["thinking", "max"],
        f"Invalid summarizer thinking level: max. Use one of: {LEVELS}.",
    ),
    (
        ["batching", "hourly"],
        "Invalid batching mode: hourly. Use one of: turn, agent-message.",
    ),
    (
        ["min-batch-chars", "-3"],
        'Invalid minBatchChars: "-3". Expected a non-negative integer (0 disables).',
    ),
    (
        ["min-batch-chars", "lots"],
        'Invalid minBatchChars: "lots". Expected a non-negative integer (0 disables).',
    ),
    (
        ["recovery-grace", "x"],
        'Invalid recovery-grace: "x". Expected a non-negative integer (0 disables).',
    ),
    (
        ["dedup", "Maybe"],
        'Invalid dedup value: "maybe". Expected on, off, status, true, or false.',
    ),
]


@pytest.mark.parametrize(("args", "message"), REFUSALS)
def test_refused_values_leave_the_file_untouched(
    args: list[str], message: str, agent: Path, settings: Path
) -> None:
    before = settings.read_bytes()
    proc = run("config", *args, agent=agent)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines()[-1] == message
    assert settings.read_bytes() == before


SHOWS = [
    (
        ["model"],
        "Current summarizer model: default\nCurrent summarizer thinking: Default (default)",
    ),
    (["thinking"], "Current summarizer thinking: Default (default)"),
    (["min-batch-chars"], "Current minBatchChars: 1000 chars."),
    (["recovery-grace"], "Current recovery grace: 3 user-turn-group(s)."),
    (["protected-tools"], "Protected tools: (none)"),
    (["protected-paths"], "Protected paths: **/skills/**/*.md, **/gauntlet-overrides.md"),
    (
        ["dedup", "STATUS"],
        "Content-hash dedup is ON. Pre-flush content-hash dedup. When a captured tool call's "
        "(toolName, normalized resultText) matches a record already in the indexer, the "
        "duplicate is registered as an alias of the original \u2014 no summarizer LLM call. "
        "Currently ON.",
    ),
]


@pytest.mark.parametrize(("args", "message"), SHOWS)
def test_bare_subcommands_show_without_writing(
    args: list[str], message: str, agent: Path, settings: Path
) -> None:
    before = settings.read_bytes()
    proc = run("config", *args, agent=agent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == message + "\n"
    assert settings.read_bytes() == before


def test_disabled_states_of_the_counts(agent: Path, tmp_path: Path) -> None:
    path = tmp_path / "custom.json"
    path.write_text('{"contextPrune": {"minBatchChars": 0, "recoveryGraceTurns": 0}}')
    shown = run("config", "min-batch-chars", "--settings", str(path), agent=agent)
    assert shown.stdout == "Current minBatchChars: disabled.\n"
    shown = run("config", "recovery-grace", "--settings", str(path), agent=agent)
    assert shown.stdout == "Current recovery grace: disabled.\n"
    assert not (agent / "settings.json").exists()


def test_json_output_and_a_missing_settings_file(agent: Path) -> None:
    proc = run("config", "on", "--json", agent=agent)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report == {
        "level": "info",
        "message": "Context pruning enabled.",
        "settings": str(agent / "settings.json"),
        "changed": {"enabled": True},
    }
    saved = json.loads((agent / "settings.json").read_text())
    assert list(saved) == ["contextPrune"]
    assert saved["contextPrune"]["enabled"] is True
    refused = run("config", "thinking", "max", "--json", agent=agent)
    assert refused.returncode == 2
    assert json.loads(refused.stdout)["level"] == "warning"


def test_show_names_where_each_value_came_from(agent: Path, tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    document = {
        "contextPrune": {
            "minBatchChar": 10,
            "recoveryGraceTurns": 5,
            "dedupByContentHash": "yes",
            "chainCompression": {"rollingWindow": 4},
        }
    }
    path.write_text(json.dumps(document))
    proc = run("config", "show", "--settings", str(path), "--json", agent=agent)
    assert proc.returncode == 0, proc.stderr
    values = json.loads(proc.stdout)["values"]
    assert values["recoveryGraceTurns"] == {"value": 5, "source": "settings file"}
    assert values["minBatchChars"] == {"value": 1000, "source": "default"}
    assert values["dedupByContentHash"] == {
        "value": True,
        "source": "settings file (invalid, default used)",
    }
    assert values["chainCompression.rollingWindow"] == {"value": 4, "source": "settings file"}
    assert values["chainCompression.enabled"] == {"value": True, "source": "default"}
    assert values["minBatchChar"] == {"value": 10, "source": "settings file (unknown key)"}
    assert values["compat"] == {"value": "default", "source": "default"}
    warning = (
        "pi-condense: warning: contextPrune.minBatchChar: unknown setting, ignored (kept in the "
        "file); did you mean minBatchChars?"
    )
    assert proc.stderr.splitlines().count(warning) == 1
    table = run("config", "show", "--settings", str(path), agent=agent)
    assert table.returncode == 0
    assert "recoveryGraceTurns" in table.stdout
    assert str(path) in table.stdout


def test_unknown_keys_warn_with_the_nearest_name() -> None:
    config = Config.from_settings_dict(
        {"minBatchChar": 1, "zzz": 2, "chainCompression": {"rollingWindw": 2}}
    )
    assert config.warnings == (
        "contextPrune.chainCompression.rollingWindw: unknown setting, ignored (kept in the "
        "file); did you mean rollingWindow?",
        "contextPrune.minBatchChar: unknown setting, ignored (kept in the file); "
        "did you mean minBatchChars?",
        "contextPrune.zzz: unknown setting, ignored (kept in the file)",
    )
    assert config.unknown_keys == {"minBatchChar": 1, "zzz": 2}
    assert Config.from_settings_dict({"enabled": True}).warnings == ()


def test_a_write_killed_before_its_rename_leaves_the_old_file(agent: Path, settings: Path) -> None:
    before = settings.read_bytes()
    # The process dies (SIGKILL) in os.replace: the new text is written and fsynced to the
    # temporary file, the rename never happens.
    crash = (
        "import os, signal\n"
        "os.replace = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
        "from pi_condense.cli import main; main()"
    )
    proc = run("config", "on", agent=agent, code=crash)
    assert proc.returncode == -9
    assert settings.read_bytes() == before
    leftovers = [p for p in agent.iterdir() if p.name != "settings.json"]
    assert len(leftovers) == 1  # the temporary file of the interrupted write
    assert json.loads(leftovers[0].read_text())["contextPrune"]["enabled"] is True


def test_a_failed_rename_is_reported_and_cleaned_up(agent: Path, settings: Path) -> None:
    before = settings.read_bytes()
    failing = (
        "import errno, os\n"
        "def replace(*a, **k):\n"
        "    raise OSError(errno.EROFS, 'Read-only file system')\n"
        "os.replace = replace\n"
        "from pi_condense.cli import main; main()"
    )
    proc = run("config", "dedup", "off", agent=agent, code=failing)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        f"pi-condense: {settings}: cannot write settings: Read-only file system"
    )
    assert settings.read_bytes() == before
    assert [p.name for p in agent.iterdir()] == ["settings.json"]
