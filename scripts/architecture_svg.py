"""Draw docs/architecture.svg: the package's layers (from the module map of
docs/architecture.md, which tests/architecture/test_layering.py holds to the code) and the path of a live
model call and of `pi-condense condense` through them.

    python scripts/architecture_svg.py          # write docs/architecture.svg
    python scripts/architecture_svg.py --check  # exit 1 when the committed picture is stale
"""

from __future__ import annotations

import itertools
import math
import re
import sys
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
PICTURE = ROOT / "docs" / "architecture.svg"

ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*([a-z]+)\s*\|(.*?)\|")
UNIT = re.compile(r"`([A-Za-z_][A-Za-z0-9_./]*)`")

FLOWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "a live model call",
        (
            "integrations",
            "live",
            "adapters",
            "session",
            "condenser",
            "pipeline",
            "summarize",
            "session",
            "state",
            "render",
            "adapters",
            "integrations",
        ),
    ),
    (
        "pi-condense condense",
        (
            "cli",
            "session",
            "replay",
            "condenser",
            "pipeline",
            "summarize",
            "session",
            "render",
            "report",
            "session",
        ),
    ),
)
"""Each flow's steps, by layer; docs/architecture.md says what happens at each numbered step."""

ROW_H = 30
TOP = 64
CHAR_W = 6.7  # an 11px monospace character
LANE_W = 290
STEP_DX = 21
FONT = "font-family:DejaVu Sans,Helvetica,Arial,sans-serif"
MONO = "font-family:DejaVu Sans Mono,Menlo,Consolas,monospace"
COLOURS = ("#1f6feb", "#bf3989")


def layers(page: str) -> list[tuple[int, str, list[str]]]:
    """(number, name, units) of the module map's rows, lowest layer first."""
    section = page.split("## Module map", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        match = ROW.match(line)
        if match:
            rows.append((int(match[1]), match[2], UNIT.findall(match[3])))
    if not rows:
        raise SystemExit(f"{PAGE}: no module map rows under '## Module map'")
    return rows


def svg(rows: list[tuple[int, str, list[str]]]) -> str:
    names = [name for _, name, _ in rows]
    for title, steps in FLOWS:
        unknown = sorted(set(steps) - set(names))
        if unknown:
            raise SystemExit(f"flow {title!r} names layers the map lacks: {unknown}")
    shown = {name: " ".join(u.removesuffix(".py") for u in units) for _, name, units in rows}
    map_w = 140 + round(CHAR_W * max(len(text) for text in shown.values())) + 16
    width = map_w + 20 + LANE_W * len(FLOWS) + 10
    height = TOP + ROW_H * len(rows) + 16

    def centre_y(layer: str) -> float:
        # The lowest layer is drawn at the bottom.
        return TOP + ROW_H * (len(rows) - 1 - names.index(layer)) + ROW_H / 2

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" '
        'aria-label="The layers of the pi_condense package and two data flows through them">',
        "<defs>",
    ]
    for n, colour in enumerate(COLOURS):
        out.append(
            f'<marker id="arrow{n}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
            f'fill="{colour}"/></marker>'
        )
    out.append("</defs>")
    out.append(f'<rect width="{width}" height="{height}" fill="#ffffff"/>')
    out.append(
        f'<text x="10" y="24" style="{FONT};font-size:15px;font-weight:bold">'
        "python/pi_condense: layers, lowest at the bottom (a module imports only its own layer "
        "or lower)</text>"
    )
    out.append(
        f'<text x="10" y="46" style="{FONT};font-size:12px" fill="#555">'
        "module map: docs/architecture.md, held to the code by tests/architecture/test_layering.py</text>"
    )
    for index, (number, name, _) in enumerate(reversed(rows)):
        y = TOP + ROW_H * index
        fill = "#f6f8fa" if index % 2 else "#eaeef2"
        out.append(
            f'<rect x="10" y="{y}" width="{width - 20}" height="{ROW_H}" fill="{fill}" '
            'stroke="#d0d7de"/>'
        )
        out.append(
            f'<text x="18" y="{y + 20}" style="{FONT};font-size:13px;font-weight:bold">'
            f"{number} {escape(name)}</text>"
        )
        out.append(
            f'<text x="140" y="{y + 20}" style="{MONO};font-size:11px" fill="#24292f">'
            f"{escape(shown[name])}</text>"
        )
    for lane, (title, steps) in enumerate(FLOWS):
        colour = COLOURS[lane % len(COLOURS)]
        x0 = map_w + 20 + LANE_W * lane
        out.append(
            f'<text x="{x0}" y="{TOP - 6}" style="{FONT};font-size:13px;font-weight:bold" '
            f'fill="{colour}">{escape(title)}</text>'
        )
        points = [(x0 + 12 + STEP_DX * i, centre_y(layer)) for i, layer in enumerate(steps)]
        for (xa, ya), (xb, yb) in itertools.pairwise(points):
            # From circle edge to circle edge, so the arrowhead shows.
            length = math.hypot(xb - xa, yb - ya)
            dx, dy = (xb - xa) / length * 9, (yb - ya) / length * 9
            out.append(
                f'<line x1="{xa + dx:.1f}" y1="{ya + dy:.1f}" x2="{xb - dx:.1f}" '
                f'y2="{yb - dy:.1f}" stroke="{colour}" stroke-width="1.6" '
                f'marker-end="url(#arrow{lane})"/>'
            )
        for step, (x, y) in enumerate(points, 1):
            out.append(f'<circle cx="{x}" cy="{y}" r="8" fill="{colour}"/>')
            out.append(
                f'<text x="{x}" y="{y + 3.5}" text-anchor="middle" '
                f'style="{FONT};font-size:9.5px;font-weight:bold" fill="#ffffff">{step}</text>'
            )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    picture = svg(layers(PAGE.read_text(encoding="utf-8")))
    if argv == ["--check"]:
        if PICTURE.read_text(encoding="utf-8") != picture:
            print(f"{PICTURE} is stale: run python scripts/architecture_svg.py", file=sys.stderr)
            return 1
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    PICTURE.write_text(picture, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
