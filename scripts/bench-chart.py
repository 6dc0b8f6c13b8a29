#!/usr/bin/env python3
"""Draw scripts/bench.sh's main comparison as an SVG chart (python3's standard library only).

Input (a file argument, or stdin): the tab-separated numbers bench.sh computes, one per line,
    tool  metric  waiters  value
where metric is `overhead` (ms; waiters `-`), `p50` or `p99` (hand-over gap in ms), and lines
starting with `#` are notes printed under the chart (the machine, the versions, quick or full).
Output: the SVG on stdout. Two panels: start-up overhead as bars (linear, from zero), and the
hand-over p50 (filled dot) and p99 (open dot) per number of waiters on a log scale, since the
tools differ by an order of magnitude and a linear axis would flatten flock and redlock.
Tools are drawn in the order they first appear (bench.sh puts the etcd ones, etcdctl and
redlock-etcd, last and side by side), under the names in LABELS.
"""

import math
import os
import sys
from html import escape

COLOURS = {
    "flock": "#4c72b0",
    "redlock": "#c44e52",
    "baseline": "#dd8452",
    "old": "#8172b3",
    "bare": "#8c8c8c",
    "etcdctl": "#55a868",
    "redlock-etcd": "#64b5cd",
    "redlock-pg": "#937860",
    "psql": "#da8bc3",
    "psql-2w": "#a27bb8",
    "pg-0.3.0": "#ccb974",
    "etcd-0.3.0": "#8da0cb",
    "redlock-zk": "#e5ae38",
}
# The names shown, where a tool's own (bench.sh's column) says too little on a chart.
LABELS = {
    "redlock": "redlock, Redis",
    "old": "old build, Redis",
    "redlock-etcd": "redlock, etcd",
    "redlock-pg": "redlock, PostgreSQL",
    "psql": "one psql SELECT 1",
    "pg-0.3.0": "0.3.0, PostgreSQL",
    "etcd-0.3.0": "0.3.0, etcd",
    "redlock-zk": "redlock, ZooKeeper",
    "etcdctl": "etcdctl lock",
    "bare": "bare lock",
    # BENCH_BASELINE's column: which build it is, as bench.sh's caller names it.
    "baseline": os.environ.get("BENCH_BASELINE_LABEL", "baseline, Redis"),
}
FALLBACK = ["#8172b3", "#937860", "#da8bc3", "#8c8c8c"]
WIDTH, HEIGHT = 1060, 460
FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"'


def read(stream):
    tools, notes, values = [], [], {}
    for line in stream:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        if line.startswith("#"):
            notes.append(line[1:].strip())
            continue
        tool, metric, waiters, value = line.split("\t")
        if tool not in tools:
            tools.append(tool)
        values[(tool, metric, waiters)] = float(value)
    return tools, notes, values


def colour(tools, tool):
    if tool in COLOURS:
        return COLOURS[tool]
    return FALLBACK[tools.index(tool) % len(FALLBACK)]


def label(tool):
    return LABELS.get(tool, tool)


def text(x, y, s, size=12, anchor="start", weight="normal", fill="#222"):
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
        f'font-weight="{weight}" fill="{fill}" {FONT}>{escape(s)}</text>'
    )


def overhead_panel(tools, values, x0, y0, w, h):
    """Horizontal bars, one per tool, linear from zero."""
    out = [text(x0, y0 - 14, "start-up overhead (ms)", 14, weight="bold")]
    out.append(text(x0, y0 + 2, "median of WRAPPER -- true minus bare true", 11, fill="#555"))
    shown = [t for t in tools if (t, "overhead", "-") in values]
    if not shown:
        return out
    top = max(values[(t, "overhead", "-")] for t in shown)
    # Room for the longest name (about 7 px a character at 12 px).
    label_w = 12 + 7 * max(len(label(t)) for t in shown)
    bar_x, bar_w = x0 + label_w, w - label_w - 60
    row = min(44, (h - 30) / len(shown))
    for i, t in enumerate(shown):
        v = values[(t, "overhead", "-")]
        y = y0 + 24 + i * row
        length = max(1.0, bar_w * v / top)
        out.append(text(bar_x - 8, y + row * 0.45 + 4, label(t), 12, "end"))
        out.append(
            f'<rect x="{bar_x}" y="{y + row * 0.15:.1f}" width="{length:.1f}" '
            f'height="{row * 0.6:.1f}" fill="{colour(tools, t)}"/>'
        )
        out.append(text(bar_x + length + 6, y + row * 0.45 + 4, f"{v:.2f}", 12))
    out.append(
        f'<line x1="{bar_x}" y1="{y0 + 20}" x2="{bar_x}" y2="{y0 + 28 + len(shown) * row:.1f}" '
        'stroke="#444"/>'
    )
    return out


def handover_panel(tools, values, x0, y0, w, h):
    """p50 and p99 of the hand-over gap per number of waiters, log scale."""
    out = [text(x0, y0 - 14, "hand-over gap (ms, log scale)", 14, weight="bold")]
    out.append(
        text(x0, y0 + 2, "one holder's command ending to the next one's starting:"
             " filled dot p50, open dot p99", 11, fill="#555")
    )
    groups = sorted(
        {n for (_, m, n) in values if m in ("p50", "p99")}, key=lambda n: int(n)
    )
    shown = [t for t in tools if any((t, "p50", n) in values for n in groups)]
    if not groups or not shown:
        return out
    data = [values[k] for k in values if k[1] in ("p50", "p99") and values[k] > 0]
    # The axis runs between the nearest 1-2-5 steps below the smallest and above the largest.
    steps = [m * 10.0 ** k for k in range(-3, 6) for m in (1, 2, 5)]
    lo = max(v for v in steps if v <= min(data))
    hi = min(v for v in steps if v >= max(data))
    axis_x, plot_w = x0 + 44, w - 44
    plot_top, plot_h = y0 + 24, h - 64

    def y_of(v):
        return plot_top + plot_h * (1 - (math.log10(v) - math.log10(lo))
                                    / (math.log10(hi) - math.log10(lo)))

    for v in steps:
        if lo * 0.9999 <= v <= hi * 1.0001:
            y = y_of(v)
            major = abs(math.log10(v) - round(math.log10(v))) < 1e-9
            out.append(
                f'<line x1="{axis_x}" y1="{y:.1f}" x2="{axis_x + plot_w}" y2="{y:.1f}" '
                f'stroke="{"#ccc" if major else "#eee"}"/>'
            )
            out.append(text(axis_x - 6, y + 4, f"{v:g}", 11, "end", fill="#555"))
    group_w = plot_w / len(groups)
    for g, n in enumerate(groups):
        gx = axis_x + g * group_w
        out.append(text(gx + group_w / 2, plot_top + plot_h + 20, f"{n} waiters", 12, "middle"))
        step = group_w / (len(shown) + 1)
        for i, t in enumerate(shown):
            cx = gx + step * (i + 1)
            c = colour(tools, t)
            p50, p99 = values.get((t, "p50", n)), values.get((t, "p99", n))
            if p50 and p99:
                out.append(
                    f'<line x1="{cx:.1f}" y1="{y_of(p50):.1f}" x2="{cx:.1f}" '
                    f'y2="{y_of(p99):.1f}" stroke="{c}" stroke-width="2"/>'
                )
            if p99:
                out.append(
                    f'<circle cx="{cx:.1f}" cy="{y_of(p99):.1f}" r="5" fill="white" '
                    f'stroke="{c}" stroke-width="2"/>'
                )
                out.append(text(cx + 8, y_of(p99) + 4, f"{p99:.1f}", 10, fill="#555"))
            if p50:
                out.append(f'<circle cx="{cx:.1f}" cy="{y_of(p50):.1f}" r="5" fill="{c}"/>')
                out.append(text(cx + 8, y_of(p50) + 4, f"{p50:.1f}", 10))
    out.append(
        f'<line x1="{axis_x}" y1="{plot_top}" x2="{axis_x}" y2="{plot_top + plot_h}" '
        'stroke="#444"/>'
    )
    # Legend, one swatch per tool, on as many rows as the width takes.
    lx, ly = axis_x, plot_top + plot_h + 32
    for t in shown:
        width = 30 + 7 * len(label(t))
        if lx + width > WIDTH and lx > axis_x:
            lx, ly = axis_x, ly + 18
        out.append(
            f'<rect x="{lx}" y="{ly}" width="12" height="12" fill="{colour(tools, t)}"/>'
        )
        out.append(text(lx + 17, ly + 10, label(t), 12))
        lx += width
    return out


def main():
    stream = open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin
    tools, notes, values = read(stream)
    height = HEIGHT + 8 + 16 * len(notes)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        text(20, 26, "redlock on Redis, etcd, PostgreSQL and ZooKeeper, beside flock, etcdctl lock "
             "and psql", 16, weight="bold"),
    ]
    parts += overhead_panel(tools, values, 20, 72, 370, HEIGHT - 100)
    # 20 px under it for a second row of the legend.
    parts += handover_panel(tools, values, 430, 72, WIDTH - 450, HEIGHT - 92)
    for i, note in enumerate(notes):
        parts.append(text(20, HEIGHT + 14 + 16 * i, note, 11, fill="#555"))
    parts.append("</svg>")
    print("\n".join(parts))


if __name__ == "__main__":
    main()
