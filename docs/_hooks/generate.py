"""mkdocs hooks: the parts of the docs generated at build time, so they cannot drift.

A page line that is exactly one of these markers is replaced:

- ``<!-- generate: cli-reference -->``: every command's own ``--help``, as the CLI prints it;
- ``<!-- generate: config-keys -->``: every ``contextPrune`` key with its default and the
  reference's default, read from ``pi_condense.config.defaults``;
- ``<!-- include: FILE -->``: a file of the repository (PRUNING.md, COMPAT.md,
  benches/quality/README.md), its links to other root files pointed at their docs pages and
  its images of the repository put inline (an SVG plot), so the page shows what the file does.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
try:
    import pi_condense  # noqa: F401  (the installed wheel, as in .ci/run)
except ImportError:  # a developer's clone with the built module in python/
    sys.path.insert(0, str(ROOT / "python"))

PAGES = {"PRUNING.md": "algorithm.md", "COMPAT.md": "compatibility.md"}
MARKER = re.compile(r"^<!-- (generate|include): ([\w./-]+) -->$", re.M)
IMAGE = re.compile(r"^!\[([^\]]*)\]\(([\w./-]+\.svg)\)$", re.M)


def _help(path: list[str]) -> str:
    from typer.testing import CliRunner

    from pi_condense.cli import app

    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "100", "NO_COLOR": "1"})
    if result.exit_code != 0:
        raise RuntimeError(f"pi-condense {' '.join(path)} --help exited {result.exit_code}")
    return "\n".join(line.rstrip() for line in result.output.splitlines()).strip("\n")


def _commands() -> list[list[str]]:
    """Every command path, depth first (groups before their subcommands)."""
    import typer.main

    from pi_condense.cli import app

    out: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:
        out.append(path)
        if hasattr(command, "list_commands"):  # a group (typer's own click: duck-typed)
            context = command.context_class(command)
            for name in command.list_commands(context):
                sub = command.get_command(context, name)
                if sub is not None and not sub.hidden:
                    walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return out


def cli_reference() -> str:
    parts = []
    for path in _commands():
        title = " ".join(["pi-condense", *path])
        level = "#" * min(2 + len(path), 4)
        parts.append(f"{level} `{title}`\n\n```text\n{_help(path)}\n```\n")
    return "\n".join(parts)


def _shown(value: Any) -> str:
    return f"`{json.dumps(value)}`"


def _flat(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, dict) and value and key != "summarizerPrices":
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def config_keys() -> str:
    from pi_condense.config.defaults import DEFAULTS, OURS_DEFAULTS

    reference = _flat(DEFAULTS)
    ours = _flat(OURS_DEFAULTS)
    rows = ["| key | default | the reference's default |", "|---|---|---|"]
    for key, value in {**reference, **ours}.items():
        theirs = _shown(reference[key]) if key in reference else "(ours: the extension ignores it)"
        rows.append(f"| `{key}` | {_shown(value)} | {theirs} |")
    return "\n".join(rows)


def include(name: str, page: str) -> str:
    source_file = ROOT / name
    text = source_file.read_text("utf-8")

    def inline(match: re.Match[str]) -> str:
        svg = (source_file.parent / match.group(2)).read_text("utf-8").strip()
        return f'<figure markdown="0" aria-label="{match.group(1)}">{svg}</figure>'

    text = IMAGE.sub(inline, text)
    depth = page.count("/")
    for source, target in PAGES.items():
        text = text.replace(f"]({source})", f"]({'../' * depth}{target})")
        text = text.replace(f"]({source}#", f"]({'../' * depth}{target}#")
    return text


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    def replace(match: re.Match[str]) -> str:
        kind, name = match.group(1), match.group(2)
        if kind == "include":
            return include(name, page.file.src_uri)
        if name == "cli-reference":
            return cli_reference()
        if name == "config-keys":
            return config_keys()
        raise ValueError(f"{page.file.src_uri}: unknown marker {match.group(0)}")

    os.environ.setdefault("PI_CODING_AGENT_DIR", str(ROOT / ".no-such-agent-dir"))
    return MARKER.sub(replace, markdown)
