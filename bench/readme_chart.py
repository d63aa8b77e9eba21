"""The README's headline chart: retrieval quality and speed against the reference libraries.

Reads the recorded results, never measures: LoCoMo hit@5 from ``bench/results/quality.md``
(``make bench-quality``) and p50 latencies at 10,000 memories from
``bench/results/compare.json`` (``make bench``), and writes ``bench/results/headline.svg``
(plain SVG, no plotting library, no web font). Run it after either bench:

    python bench/readme_chart.py

The figures in the chart's labels are the files' figures, rounded for display.
"""

from __future__ import annotations

import json
import math
import re
from html import escape
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
OUT = RESULTS / "headline.svg"

# (label in the chart, how to find the row in quality.md, column)
QUALITY_ROWS = (
    # The default's held-out row (weights fitted without the conversation asked: the figure to quote).
    (
        "betterdb-memory recall()",
        re.compile(
            r"^\| ONNX MiniLM, LearnedRanker held out by conversation \| [\d.]+ \| (?P<v>[\d.]+) \|", re.M
        ),
    ),
    (
        "BM25 alone (all turns)",
        re.compile(r"^\| BM25, all turns of the conversation \| [\d.]+ \| (?P<v>[\d.]+) \|", re.M),
    ),
    (
        "KNN alone, as betterdb-agent-memory ranks",
        re.compile(r"^\| ONNX MiniLM dense \| [\d.]+ \| (?P<v>[\d.]+) \|", re.M),
    ),
)
SPEED_ROWS = (
    ("recall k=10", "recall k=10, unscoped"),
    ("recall, reinforcing hits", "recall k=10, unscoped, reinforce on"),
    ("retrieve_context 4k tokens", "retrieve_context, budget 4,096 tokens"),
    ("remember", "remember, one at a time"),
)
SIDES = (
    ("ours", "betterdb-memory", "#3f51b5"),
    ("bam", "betterdb-agent-memory", "#9e9e9e"),
    ("actrone", "actrone-memory", "#e0a040"),
)
FONT = 'font-family="system-ui, -apple-system, Segoe UI, Roboto, Helvetica, Arial, sans-serif"'


def quality() -> list[tuple[str, float]]:
    text = (RESULTS / "quality.md").read_text(encoding="utf-8")
    rows = []
    for label, pattern in QUALITY_ROWS:
        m = pattern.search(text)
        if m is None:
            raise SystemExit(f"quality.md has no row for {label!r}: update QUALITY_ROWS")
        rows.append((label, float(m["v"])))
    return rows


def speed(n: int = 10_000) -> list[tuple[str, dict[str, float]]]:
    data = json.loads((RESULTS / "compare.json").read_text(encoding="utf-8"))
    size = next(s for s in data["sizes"] if s["n"] == n)
    by_label = {r["label"]: r for r in size["rows"]}
    out = []
    for label, key in SPEED_ROWS:
        sides = by_label[key]["sides"]
        out.append((label, {side: sides[side]["p50_s"] * 1000 for side, _, _ in SIDES if side in sides}))
    return out


def svg(q: list[tuple[str, float]], s: list[tuple[str, dict[str, float]]]) -> str:
    width, left = 920, 330
    parts: list[str] = []
    y = 30
    parts.append(
        f'<text x="10" y="{y}" font-size="15" font-weight="600">Retrieval quality: LoCoMo hit@5, 1,536 questions (higher is better)</text>'
    )
    y += 14
    bar_w = width - left - 80
    for label, value in q:
        ours = label.startswith("betterdb-memory")
        colour = "#3f51b5" if ours else "#9e9e9e"
        parts.append(
            f'<text x="{left - 8}" y="{y + 15}" font-size="13" text-anchor="end">{escape(label)}</text>'
        )
        parts.append(
            f'<rect x="{left}" y="{y + 3}" width="{bar_w * value:.1f}" height="16" fill="{colour}"/>'
        )
        parts.append(
            f'<text x="{left + bar_w * value + 6:.1f}" y="{y + 15}" font-size="13">{value:.3f}</text>'
        )
        y += 24
    y += 26
    parts.append(
        f'<text x="10" y="{y}" font-size="15" font-weight="600">Speed: p50 latency at 10,000 memories, milliseconds, log scale (lower is better)</text>'
    )
    y += 14
    lo, hi = math.log10(0.1), math.log10(1000)
    for label, sides in s:
        parts.append(
            f'<text x="{left - 8}" y="{y + 22}" font-size="13" text-anchor="end">{escape(label)}</text>'
        )
        for side, _name, colour in SIDES:
            if side not in sides:
                parts.append(f'<text x="{left + 4}" y="{y + 13}" font-size="11" fill="#777">n/a</text>')
                y += 13
                continue
            ms = sides[side]
            w = bar_w * (math.log10(ms) - lo) / (hi - lo)
            parts.append(f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="11" fill="{colour}"/>')
            parts.append(f'<text x="{left + w + 6:.1f}" y="{y + 13}" font-size="11">{ms:.3g}</text>')
            y += 13
        y += 10
    y += 4
    x = left
    for _side, name, colour in SIDES:
        parts.append(f'<rect x="{x}" y="{y}" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{x + 17}" y="{y + 11}" font-size="12">{escape(name)}</text>')
        x += 30 + 8 * len(name)
    y += 24
    parts.append(
        f'<text x="10" y="{y}" font-size="11" fill="#666">From bench/results/quality.md and compare.json (python bench/readme_chart.py); machine, date and command in those files.</text>'
    )
    height = y + 12
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" {FONT}>'
        "<title>betterdb-memory: retrieval quality and speed against betterdb-agent-memory and actrone-memory</title>"
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>'
    )
    return head + "".join(parts) + "</svg>\n"


def main() -> None:
    OUT.write_text(svg(quality(), speed()), encoding="utf-8")
    print(f"wrote {OUT.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
