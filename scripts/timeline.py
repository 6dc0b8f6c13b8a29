#!/usr/bin/env python3
"""Draw a run's timeline at the default --ttl and --kill-after as an SVG (standard library only).

Input (a file argument, or stdin): the numbers `cargo run --example timeline-numbers` prints,
one per line, `name <TAB> milliseconds <TAB> meaning`, computed by redlock's own timing functions
(src/lease/timing.rs, the run's lease grace) from the defaults of `redlock run`. Nothing here
knows a default: every time drawn comes from those lines. Output: the SVG on stdout.

    cargo run --quiet --example timeline-numbers | python3 scripts/timeline.py > docs/img/timeline.svg

Two lanes: a run whose renewals all work, and one whose Redis falls silent after the first
renewal (each renewal then fails after its time limit and is retried), which reaches the stop
line, the grace, the kill line, and a release that gets no answer. The docs test
`the_timeline_picture_is_drawn_from_the_defaults` fails when docs/img/timeline.svg differs from
what this draws.
"""

import sys
from html import escape

WIDTH, HEIGHT = 960, 500
LEFT, RIGHT = 150, 24
FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"'
INK, GREY, PALE = "#222", "#666", "#999"
COMMAND, LEASE, REDIS_DOWN = "#4c72b0", "#c44e52", "#dddddd"
GRACE, RENEW_OK, RENEW_FAIL = "#f2c14e", "#55a868", "#c44e52"


def read(stream):
    numbers = {}
    for line in stream:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        name, ms, _meaning = line.split("\t", 2)
        numbers[name] = float(ms) / 1000.0
    needed = [
        "ttl", "kill_after", "renew_interval", "renew_timeout", "retry_interval", "drift",
        "kill_margin", "lease_grace", "lease_end", "kill_line", "stop_line", "release_budget",
    ]
    missing = [n for n in needed if n not in numbers]
    if missing:
        sys.exit(f"timeline.py: the input lacks {', '.join(missing)}")
    return numbers


def seconds(s):
    """A duration as redlock prints it: 30s, 10s, 500ms, 29.698s."""
    if s < 1:
        return f"{s * 1000:.0f}ms"
    if abs(s - round(s)) < 1e-9:
        return f"{s:.0f}s"
    return f"{s:.3f}".rstrip("0").rstrip(".") + "s"


def text(x, y, s, size=12, anchor="start", weight="normal", fill=INK, style=""):
    extra = f' font-style="{style}"' if style else ""
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
        f'font-weight="{weight}" fill="{fill}"{extra} {FONT}>{escape(s)}</text>'
    )


def line(x1, y1, x2, y2, stroke=INK, width=1.0, dash=""):
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" '
        f'stroke-width="{width}"{d}/>'
    )


def rect(x, y, w, h, fill, opacity=1.0, stroke="none"):
    o = f' fill-opacity="{opacity}"' if opacity < 1 else ""
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.5):.1f}" height="{h:.1f}" '
        f'fill="{fill}"{o} stroke="{stroke}"/>'
    )


def tick(x, y, ok):
    """A renewal sent at x: a filled dot when it counted, an open one when it failed."""
    if ok:
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{RENEW_OK}"/>'
    return (
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="white" stroke="{RENEW_FAIL}" '
        f'stroke-width="1.6"/>'
    )


def bracket(x1, x2, y, label, size=11, fill=GREY):
    """A span drawn under a lane: |------| with its label below."""
    out = [line(x1, y, x2, y, fill), line(x1, y - 4, x1, y + 4, fill), line(x2, y - 4, x2, y + 4, fill)]
    out.append(text((x1 + x2) / 2, y + 14, label, size, "middle", fill=fill))
    return out


def draw(n):
    ttl, interval = n["ttl"], n["renew_interval"]
    last_counted = interval  # the silent lane: the first renewal counts, then Redis falls silent
    silent_from = last_counted + interval / 5
    stop_at = last_counted + n["stop_line"]
    kill_at = last_counted + n["kill_line"]
    lease_end = last_counted + n["lease_end"]
    key_expires = last_counted + ttl  # Redis counts the ttl from when the renewal reached it
    released_by = kill_at + n["release_budget"]
    healthy_end = 4 * interval + interval / 2  # the healthy lane's command ends here
    span = max(released_by, healthy_end) + interval * 0.9  # room for the labels on the right
    x0, x1 = LEFT, WIDTH - RIGHT

    def x(t):
        return x0 + (x1 - x0) * t / span

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}">',
        rect(0, 0, WIDTH, HEIGHT, "white"),
        text(20, 28, f"A run's lease at the defaults: --ttl {seconds(ttl)}, "
             f"--kill-after {seconds(n['kill_after'])}", 16, weight="bold"),
        text(20, 47, "Times count from the request that took the lock; a lease counts from "
             "when the request that took or renewed it was sent.", 11, fill=GREY),
    ]

    # Lane 1: Redis answers every renewal.
    y1 = 100
    out.append(text(20, y1 + 4, "Redis answers", 13, weight="bold"))
    out.append(rect(x(0), y1 - 7, x(healthy_end) - x(0), 14, COMMAND, 0.85))
    out.append(text(x(0) + 6, y1 + 4, "the command runs", 11, fill="white"))
    renewals = []
    t = interval
    while t < healthy_end:
        renewals.append(t)
        t += interval
    for r in renewals:
        out.append(tick(x(r), y1 - 16, True))
    out.append(text(x(renewals[0]) - 4, y1 - 28,
                    f"renewed every ttl/3 = {seconds(interval)}, each counting from when it was sent",
                    11, fill=RENEW_OK))
    out.append(line(x(0), y1 - 24, x(0), y1 + 10, INK, 1.5))
    out.append(text(x(0), y1 - 28, "acquire", 11, "middle"))
    out.append(line(x(healthy_end), y1 - 24, x(healthy_end), y1 + 10, INK, 1.5))
    out.append(text(x(healthy_end), y1 - 28, "exits: release", 11, "middle"))
    out.extend(bracket(x(0), x(interval), y1 + 20, f"ttl/3 = {seconds(interval)}"))

    # The legend.
    yl = y1 + 58
    out.append(tick(x(0) + 4, yl - 4, True))
    out.append(text(x(0) + 14, yl, "a renewal that counted", 11))
    out.append(tick(x(0) + 164, yl - 4, False))
    out.append(text(x(0) + 174, yl, "a renewal that failed", 11))
    out.append(rect(x(0) + 320, yl - 9, 22, 10, GRACE))
    out.append(text(x(0) + 348, yl,
                    f"the grace after the loss of the lease: --kill-after, at most ttl/4", 11))

    # Lane 2: Redis falls silent after the first renewal.
    y2 = 250
    out.append(text(20, y2 + 4, "Redis falls silent", 13, weight="bold"))
    out.append(text(20, y2 + 20, f"at {seconds(silent_from)}", 11, fill=GREY))
    out.append(rect(x(silent_from), y2 - 44, x(span) - x(silent_from), 10, REDIS_DOWN))
    out.append(text(x(silent_from) + 4, y2 - 47, "Redis does not answer", 10, fill=GREY))
    out.append(rect(x(0), y2 - 7, x(stop_at) - x(0), 14, COMMAND, 0.85))
    out.append(text(x(0) + 6, y2 + 4, "the command runs", 11, fill="white"))
    out.append(rect(x(stop_at), y2 - 7, x(kill_at) - x(stop_at), 14, GRACE))
    out.append(line(x(0), y2 - 24, x(0), y2 + 10, INK, 1.5))
    out.append(text(x(0), y2 - 28, "acquire", 11, "middle"))
    out.append(tick(x(last_counted), y2 - 16, True))
    out.append(text(x(last_counted), y2 - 28, "renewed", 11, "middle", fill=RENEW_OK))
    # The renewals that fail: each sent when due, given up after its time limit (cut to the
    # lease left), the next one a retry interval later; none after the stop line.
    sent = last_counted + interval
    first_failed = sent
    while sent < stop_at:
        out.append(tick(x(sent), y2 - 16, False))
        limit = min(n["renew_timeout"], max(lease_end - sent, 0.001))
        sent = sent + limit + n["retry_interval"]
    out.append(text(x(first_failed) - 6, y2 - 28,
                    f"renewals fail ({seconds(n['renew_timeout'])} limit), each retried "
                    f"{seconds(n['retry_interval'])} after", 11, fill=RENEW_FAIL))
    # The stop line, the grace, the kill line, the lease's end, the key's expiry.
    out.append(line(x(stop_at), y2 - 10, x(stop_at), y2 + 30, INK, 1.5))
    out.append(text(x(stop_at) - 4, y2 + 44, "stop line: TERM", 11, "end"))
    out.append(text(x(stop_at) - 4, y2 + 57, "(the stop signal)", 11, "end", fill=GREY))
    out.append(text((x(stop_at) + x(kill_at)) / 2, y2 + 4, "grace", 11, "middle"))
    out.append(line(x(kill_at), y2 - 10, x(kill_at), y2 + 62, INK, 1.5))
    out.append(text(x(kill_at) - 4, y2 + 76, "kill line: SIGKILL to the group", 11, "end"))
    out.append(text(x(kill_at) - 4, y2 + 89, "(by the watchdog if redlock is frozen)", 11, "end", fill=GREY))
    out.append(line(x(lease_end), y2 - 10, x(lease_end), y2 + 94, LEASE, 1.2, "3 2"))
    out.append(text(x(lease_end) + 4, y2 + 108, "the lease ends (redlock's clock)", 11, fill=LEASE))
    out.append(line(x(key_expires), y2 - 34, x(key_expires), y2 + 122, PALE, 1.2, "1 2"))
    out.append(text(x(key_expires) + 4, y2 + 136, "the key expires in Redis", 11, fill=GREY))
    out.append(rect(x(kill_at), y2 + 14, x(released_by) - x(kill_at), 8, PALE, 0.6))
    out.append(text(x(released_by) + 4, y2 + 22, "release tried; exit 76", 11, fill=GREY))

    # The spans under lane 2, each with the number it comes from.
    yb = y2 + 166
    out.extend(bracket(x(last_counted), x(stop_at),
                       yb, f"stop line: {seconds(n['stop_line'])} after the renewal that counted"))
    out.extend(bracket(x(stop_at), x(kill_at), yb,
                       f"grace {seconds(n['lease_grace'])}"))

    # The time axis.
    ya = HEIGHT - 58
    out.append(line(x(0), ya, x(span), ya, GREY))
    step = interval / 2 if interval >= 4 else interval
    t = 0.0
    while t <= span + 1e-9:
        out.append(line(x(t), ya, x(t), ya + 5, GREY))
        out.append(text(x(t), ya + 17, seconds(t) if t else "0", 10, "middle", fill=GREY))
        t += step
    out.append(text(20, HEIGHT - 12,
                    f"The lease ends ttl − drift ({seconds(n['drift'])} = ttl/100 + 2ms) after the "
                    f"renewal that counted was sent; the kill line is a margin ({seconds(n['kill_margin'])}"
                    " = ttl/50 + 10ms) before it.", 11, fill=GREY))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) > 2:
        sys.exit("usage: timeline.py [NUMBERS]   (stdin without an argument)")
    if len(sys.argv) == 2:
        with open(sys.argv[1], encoding="utf-8") as f:
            numbers = read(f)
    else:
        numbers = read(sys.stdin)
    sys.stdout.write(draw(numbers))


if __name__ == "__main__":
    main()
