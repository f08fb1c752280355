"""Start-up of the `pi-condense` command: each command imports only what it uses.

Each case runs a fresh interpreter (a real subprocess) that imports the package or runs the
command through its console entry point, then reports which heavy modules ended up in
``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import pi_condense

EXAMPLE = Path(pi_condense.__file__).parent / "examples" / "example-session.jsonl"

FRAMEWORKS = (
    "plotly",
    "dask",
    "distributed",
    "ray",
    "openai",
    "anthropic",
    "agents",
    "langchain",
    "langchain_core",
    "langgraph",
    "pydantic_ai",
)
"""Optional integrations: never imported by a command that does not use them."""

PIPELINE = (
    "pydantic",
    "rich",
    "pi_condense.config",
    "pi_condense.condenser",
    "pi_condense.replay",
    "pi_condense.corpus",
    "pi_condense.summarize",
)
"""The pruner's own heavy parts: not needed to print the version."""

RECOVERY_TOOLS = (
    "pi_condense.tools.query",
    "pi_condense.tools.recovery",
    "pi_condense.tools.registry",
)
"""The tools a model calls: the pruner reads spill files through ``tools.spill_access`` only."""

_PROBE = """
import json, sys
heavy = json.loads(sys.argv[1])
argv = json.loads(sys.argv[2])
if argv is None:
    import pi_condense.cli
else:
    sys.argv = ["pi-condense", *argv]
    from pi_condense.cli import main
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    sys.stderr.write(f"exit {code}\\n")
import gc
sys.stderr.write(f"GC {int(gc.isenabled())} {gc.get_freeze_count()}\\n")
loaded = sorted(name for name in heavy if name in sys.modules)
sys.stderr.write("LOADED " + json.dumps(loaded) + "\\n")
"""


def _loaded(
    argv: list[str] | None, cwd: Path, heavy: tuple[str, ...] = (*FRAMEWORKS, *PIPELINE)
) -> tuple[list[str], str, str]:
    """The ``heavy`` modules a fresh interpreter holds after ``argv`` (None: the import alone)."""
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(list(heavy)), json.dumps(argv)],
        capture_output=True,
        cwd=cwd,
        timeout=120,
        check=False,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines, proc.stderr
    assert lines[-1].startswith("LOADED "), proc.stderr
    return json.loads(lines[-1][len("LOADED ") :]), proc.stdout, proc.stderr


def test_import_cli_loads_nothing_heavy(tmp_path: Path) -> None:
    loaded, _, _ = _loaded(None, tmp_path)
    assert loaded == []


def test_import_package_loads_no_pipeline(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, pi_condense; print(sorted(m for m in sys.argv[1:] if m in sys.modules))",
            *FRAMEWORKS,
            *PIPELINE,
        ],
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
        check=True,
        text=True,
    )
    assert proc.stdout.strip() == "[]"


def test_public_names_still_resolve() -> None:
    from pi_condense import Condenser, Config, SessionFile, render
    from pi_condense.condenser import Condenser as direct
    from pi_condense.config import Config as config_home
    from pi_condense.session import SessionFile as session_home

    assert Condenser is direct
    assert callable(render)
    assert render.__module__ == "pi_condense.render"
    assert Config is config_home
    assert SessionFile is session_home
    assert set(pi_condense.__all__) == {
        *pi_condense._HOME,
        "RenderDiagnostic",
        "RenderResult",
        "__version__",
        "render",
    }
    assert set(pi_condense.__all__) <= set(dir(pi_condense))
    for name in pi_condense.__all__:
        assert getattr(pi_condense, name) is not None
    with pytest.raises(AttributeError, match="no_such_name"):
        pi_condense.no_such_name  # noqa: B018


def test_tool_names_still_resolve() -> None:
    import pi_condense.tools as tools
    from pi_condense.tools import SessionRecovery
    from pi_condense.tools.recovery import SessionRecovery as direct

    assert SessionRecovery is direct
    assert set(tools.__all__) <= set(dir(tools))
    for name in tools.__all__:
        assert getattr(tools, name) is not None
    for module in ("base", "query", "recovery", "registry", "spill_access", "truncate"):
        assert getattr(tools, module).__name__ == f"pi_condense.tools.{module}"
    with pytest.raises(AttributeError, match="no_such_name"):
        tools.no_such_name  # noqa: B018


def test_version_loads_nothing_heavy(tmp_path: Path) -> None:
    loaded, stdout, stderr = _loaded(["--version"], tmp_path)
    assert stdout == f"pi-condense {pi_condense.__version__}\n"
    assert "exit 0" in stderr
    assert loaded == []


VERSION_FREE = ("typer", "click", "rich", "typing", "orjson", "pi_condense.render")
"""Not needed to print the version: the command line's framework, the renderer, typing."""


def test_version_loads_no_cli_framework(tmp_path: Path) -> None:
    loaded, stdout, stderr = _loaded(["--version"], tmp_path, VERSION_FREE)
    assert stdout == f"pi-condense {pi_condense.__version__}\n"
    assert "exit 0" in stderr
    assert loaded == []


def test_package_render_stays_the_function_after_its_module_loads(tmp_path: Path) -> None:
    # The renderer is imported on first use; the import system binding the submodule
    # `render` on the package must leave the public function there.
    code = (
        "import sys, types, pi_condense\n"
        "assert 'pi_condense.render' not in sys.modules\n"
        "import pi_condense.report.condense\n"
        "import pi_condense.render as module\n"
        "from pi_condense import render\n"
        "assert isinstance(pi_condense.render, types.FunctionType), pi_condense.render\n"
        "home = sys.modules['pi_condense.render']\n"
        "assert render is pi_condense.render is module is home.render\n"
        "print(render.__module__)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, cwd=tmp_path, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "pi_condense.render\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["session", "info", str(EXAMPLE)],
        ["condense", "--help"],
        ["config", "show", "--settings", "{tmp}/settings.json"],
        ["--help"],
    ],
    ids=["session-info", "condense-help", "config-show", "root-help"],
)
def test_light_commands_load_no_framework(argv: list[str], tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text('{"contextPrune": {"enabled": true}}\n')
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    loaded, stdout, stderr = _loaded(argv, tmp_path)
    assert "exit 0" in stderr, stderr
    assert stdout.strip()
    assert [name for name in loaded if name in FRAMEWORKS] == []


def test_session_info_does_not_load_the_pruner(tmp_path: Path) -> None:
    loaded, stdout, _ = _loaded(["session", "info", str(EXAMPLE)], tmp_path)
    assert "1018" in stdout.replace(",", "")
    assert "pi_condense.condenser" not in loaded
    assert "pi_condense.replay" not in loaded
    assert "pi_condense.corpus" not in loaded


def test_unknown_command_is_a_usage_error(tmp_path: Path) -> None:
    _, _, stderr = _loaded(["no-such-command"], tmp_path)
    assert "exit 2" in stderr
    assert "No such command" in stderr


def test_condense_loads_no_recovery_tool(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"enabled": true}\n')
    out = tmp_path / "out.jsonl"
    argv = ["condense", str(EXAMPLE), "-o", str(out), "--config", str(config), "--json"]
    loaded, stdout, stderr = _loaded(argv, tmp_path, RECOVERY_TOOLS)
    assert "exit 0" in stderr, stderr
    assert json.loads(stdout)["llmCalls"] > 0
    assert out.is_file()
    assert loaded == []


def test_command_imports_are_frozen(tmp_path: Path) -> None:
    # The objects the imports leave are moved out of the GC's reach (gc.freeze); the GC itself
    # stays on for the command's own objects.
    _, _, stderr = _loaded(["session", "info", str(EXAMPLE)], tmp_path)
    enabled, frozen = stderr.splitlines()[-2].split()[1:]
    assert enabled == "1"
    assert int(frozen) > 10_000


CONDENSE_FREE = ("pydantic", "pydantic_core", "typer", "click", "rich")
"""Not needed by a ``condense`` with plain arguments and a normal config: the command line's
framework, pydantic (the config is checked without it), rich (nothing printed through it)."""


def test_condense_loads_no_cli_framework_nor_pydantic(tmp_path: Path) -> None:
    config = tmp_path / "settings.json"
    config.write_text('{"contextPrune": {"enabled": true, "protectedTools": ["bash"]}}\n')
    out = tmp_path / "out.jsonl"
    argv = ["condense", str(EXAMPLE), "-o", str(out), "--config", str(config), "--json"]
    loaded, stdout, stderr = _loaded(argv, tmp_path, CONDENSE_FREE)
    assert "exit 0" in stderr, stderr
    assert json.loads(stdout)["llmCalls"] > 0
    assert out.is_file()
    assert loaded == []


def test_condense_help_still_loads_typer(tmp_path: Path) -> None:
    loaded, stdout, stderr = _loaded(["condense", "--help"], tmp_path, CONDENSE_FREE)
    assert "exit 0" in stderr, stderr
    assert "--in-place" in stdout
    assert "typer" in loaded


API_CLIENTS = (
    "pi_condense.summarize.openai_client",
    "pi_condense.summarize.anthropic_client",
    "email.utils",
)
"""Not needed offline: the model clients, and the parser of an HTTP-date ``Retry-After``."""


def test_offline_condense_loads_no_api_client(tmp_path: Path) -> None:
    # `--summarizer default` runs offline: the model clients load with the first one made.
    out = tmp_path / "out.jsonl"
    argv = ["condense", str(EXAMPLE), "-o", str(out), "--summarizer", "default", "--json"]
    loaded, stdout, stderr = _loaded(argv, tmp_path, API_CLIENTS)
    assert "exit 0" in stderr, stderr
    assert json.loads(stdout)["llmCalls"] > 0
    assert loaded == []
