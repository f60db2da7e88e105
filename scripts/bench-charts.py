#!/usr/bin/env python3
"""Draws docs/BENCHMARKS.md's current table and charts from the benchmark's own JSON lines.

usage: scripts/bench-charts.py [RESULTS]      (default docs/bench/results.jsonl)

RESULTS holds the lines `logsync-bench` printed, each with the commit, date and run it came from
(scripts/bench-record.sh appends them). For every metric the newest run counts. It writes:

- the table between `<!-- current:begin -->` and `<!-- current:end -->` in docs/BENCHMARKS.md: value,
  goal, whether it is met, the baseline of a ratio, the commit and the command;
- docs/bench/latency.svg: the distribution of commit-to-visible latency through a local folder, a live
  context, the relay and Syncthing (quantiles 1 to 99, log scale);
- docs/bench/arrival.svg: the CPU one arrival costs against how many segments the folder holds;
- docs/bench/ratios.svg: capture, replay, rebuild and bootstrap against plain SQLite and the session
  extension, with each goal.

Plain SVG written here: no plotting package is needed.
"""
import json
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs/bench/results.jsonl")
OUT = os.path.join(ROOT, "docs/bench")
DOC = os.path.join(ROOT, "docs/BENCHMARKS.md")

# What each ratio is measured against, in the same run.
BASELINES = {
    "bulk_overhead": "plain SQLite, the same bulk SQL",
    "single_commit_overhead": "plain SQLite, the same one-row commits",
    "bulk_insert_api_overhead": "plain SQLite, the same rows",
    "replay_vs_changeset_apply": "SQLite's changeset_apply of the same rows",
    "replay_mixed_vs_changeset_apply": "changeset_apply of the same net changes",
    "bytes_vs_changeset": "the session extension's changeset bytes",
    "rebuild_vs_plain": "plain SQLite inserting the same rows",
    "bootstrap_vs_plain": "plain SQLite inserting the rows in key order",
    "bootstrap_vs_replay": "replaying the same rows' segments",
    "arrival_cpu_100k_vs_1k": "the same arrival with 1k segments in the folder",
    "writer_stall_vs_idle": "the same writer's longest commit with no import",
    "soak_cpu_growth": "the soak's first quarter",
    "pushes_vs_pgbench": "pgbench one-row inserts, as many clients, the same database",
    "upgrade_vs_open": "opening the same store under its own schema",
    "mixed_import_vs_same": "a version-1 node importing a version-1 writer's rows",
    "sealed_bytes_per_change_over_plain": "the same segments plain",
    "replay_sealed_vs_plain": "the engine replaying the same segments plain",
    "sealed_pushes_vs_plain": "the same pushes plain, to the same relay",
}
# The metrics of the current table, in order: the design brief's goals, and the figures they rest on.
TABLE = [
    ("capture", ["single_commit_overhead", "bulk_overhead", "bulk_insert_api_overhead"]),
    ("replay", ["replay_vs_changeset_apply", "replay_mixed_vs_changeset_apply", "bytes_vs_changeset", "replay_changes_per_s"]),
    ("latency", ["dir_p50_ms", "dir_p99_ms", "context_p50_ms", "context_p99_ms", "syncthing_p50_ms", "syncthing_p99_ms", "syncthing_watcher_p50_ms"]),
    ("stall", ["writer_stall_ms", "writer_stall_vs_idle"]),
    ("rebuild", ["rebuild_1m_s", "rebuild_peak_rss_mb", "rebuild_vs_plain"]),
    ("bootstrap", ["bootstrap_1m_s", "bootstrap_peak_rss_mb", "bootstrap_vs_plain", "bootstrap_vs_replay"]),
    ("upgrade", ["upgrade_1m_ms", "upgrade_vs_open", "mixed_import_vs_same"]),
    ("scale", ["arrival_cpu_100k_vs_1k", "dir_p50_ms_100k", "soak_cpu_growth"]),
    ("seal", ["sealed_bytes_per_change_over_plain", "replay_sealed_vs_plain", "seal_mb_per_s", "open_mb_per_s", "revoke_cpu_ms", "revoke_bytes_written"]),
    ("relay", ["pushes_per_s", "sealed_pushes_vs_plain", "longpoll_p99_ms", "relay_p50_ms", "relay_p99_ms"]),
    ("relay-postgres", ["pushes_per_s", "sealed_pushes_vs_plain", "pushes_vs_pgbench", "relay_cpu_us_per_push", "longpoll_p99_ms", "cross_relay_wake_p50_ms",
                        "load_errors", "idle_longpoll_kb"]),
]


def load(path):
    runs = []
    with open(path) as handle:
        for number, line in enumerate(handle, 1):
            line = line.strip()
            if not line:
                continue
            try:
                run = json.loads(line)
            except ValueError as error:
                sys.exit(f"{path}:{number}: not a JSON line: {error}")
            # The relay on PostgreSQL reports the same metric names as the relay on SQLite: a suite of its own.
            if run.get("suite") == "relay" and "--backend postgres" in run.get("command", ""):
                run["suite"] = "relay-postgres"
            runs.append(run)
    return runs


def newest(lines):
    """The newest line per (suite, metric): the last one in the file."""
    latest = {}
    for line in lines:
        latest[(line["suite"], line["metric"])] = line
    return latest


def met(line):
    goal, value = line.get("goal"), line.get("value")
    if goal is None or value is None:
        return "—"
    return "yes" if (value <= goal if line.get("better") == "lower" else value >= goal) else "**no**"


def number(value, unit=""):
    if value is None:
        return "—"
    text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    return f"{text} {unit}".strip()


def table(latest):
    rows = ["| metric | value | goal | met | measured against (same run) | commit | command |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for suite, metrics in TABLE:
        for metric in metrics:
            line = latest.get((suite, metric))
            if line is None:
                continue
            goal = line.get("goal")
            sign = "≤" if line.get("better") == "lower" else "≥"
            rows.append("| `{}/{}` | {} | {} | {} | {} | `{}` | `{}` |".format(
                suite, metric, number(line["value"], line["unit"]), f"{sign} {number(goal, line['unit'])}" if goal is not None else "—",
                met(line), BASELINES.get(metric, "—"), line.get("commit", "?"), line.get("command", f"logsync-bench {suite}")))
    return "\n".join(rows)


# ---- SVG ----

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]


def svg(width, height, body, title):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'font-family="sans-serif" font-size="12">\n<rect width="100%" height="100%" fill="white"/>\n'
            f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{escape(title)}</text>\n{body}</svg>\n')


def escape(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def axes(left, top, width, height, xlabel, ylabel):
    return (f'<line x1="{left}" y1="{top + height}" x2="{left + width}" y2="{top + height}" stroke="black"/>\n'
            f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + height}" stroke="black"/>\n'
            f'<text x="{left + width / 2}" y="{top + height + 36}" text-anchor="middle">{escape(xlabel)}</text>\n'
            f'<text x="{left - 48}" y="{top + height / 2}" text-anchor="middle" transform="rotate(-90 {left - 48} {top + height / 2})">{escape(ylabel)}</text>\n')


def log_ticks(low, high):
    ticks = []
    exponent = math.floor(math.log10(low))
    while 10 ** exponent <= high * 1.0001:
        for factor in (1, 2, 5):
            value = factor * 10 ** exponent
            if low <= value <= high:
                ticks.append(value)
        exponent += 1
    return ticks


def latency_chart(latest):
    series = [("folder (syncd, local folder)", "latency", "dir"), ("live context on B", "latency", "context"),
              ("relay (loopback)", "relay", "relay"), ("Syncthing, with scan requests", "latency", "syncthing"),
              ("Syncthing's own watcher", "latency", "syncthing_watcher")]
    quantiles = [1, 5, 10, 25, 50, 75, 90, 95, 99]
    curves = []
    for label, suite, prefix in series:
        points = [(q, latest[(suite, f"{prefix}_q{q}_ms")]["value"]) for q in quantiles if (suite, f"{prefix}_q{q}_ms") in latest]
        if points:
            commit = latest[(suite, f"{prefix}_q50_ms")].get("commit", "?") if (suite, f"{prefix}_q50_ms") in latest else "?"
            curves.append((f"{label} @{commit}", points))
    if not curves:
        return None
    left, top, width, height = 70, 40, 560, 300
    values = [v for _, points in curves for _, v in points if v > 0]
    low, high = 10 ** math.floor(math.log10(min(values))), 10 ** math.ceil(math.log10(max(values)))
    def x(q): return left + (quantiles.index(q) / (len(quantiles) - 1)) * width
    def y(v): return top + height - (math.log10(max(v, low)) - math.log10(low)) / (math.log10(high) - math.log10(low)) * height
    body = axes(left, top, width, height, "quantile (%)", "commit on A → visible on B (ms, log scale)")
    for q in quantiles:
        body += f'<text x="{x(q)}" y="{top + height + 16}" text-anchor="middle">{q}</text>\n'
    for tick in log_ticks(low, high):
        body += f'<line x1="{left}" y1="{y(tick)}" x2="{left + width}" y2="{y(tick)}" stroke="#ddd"/><text x="{left - 6}" y="{y(tick) + 4}" text-anchor="end">{tick:g}</text>\n'
    for index, (label, points) in enumerate(curves):
        color = COLORS[index % len(COLORS)]
        body += f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(f"{x(q):.1f},{y(v):.1f}" for q, v in points)}"/>\n'
        body += f'<rect x="{left + width + 16}" y="{top + 16 * index}" width="10" height="10" fill="{color}"/><text x="{left + width + 32}" y="{top + 16 * index + 9}">{escape(label)}</text>\n'
    return svg(left + width + 320, top + height + 50, body, "Latency distributions: a commit on node A visible on node B")


def arrival_chart(latest):
    points = []
    for (suite, metric), line in latest.items():
        match = re.fullmatch(r"arrival_cpu_ms_(\d+)(k?)", metric) if suite == "scale" else None
        if match:
            points.append((int(match.group(1)) * (1000 if match.group(2) else 1), line["value"], line.get("commit", "?")))
    if len(points) < 2:
        return None
    points.sort()
    left, top, width, height = 70, 40, 520, 260
    low_x, high_x = math.log10(points[0][0]), math.log10(points[-1][0])
    top_y = max(v for _, v, _ in points) * 1.25
    def x(n): return left + (math.log10(n) - low_x) / max(high_x - low_x, 1e-9) * width
    def y(v): return top + height - v / top_y * height
    body = axes(left, top, width, height, "segments already in the folder (log scale)", "CPU per arrival (ms)")
    for n, v, _ in points:
        body += f'<circle cx="{x(n):.1f}" cy="{y(v):.1f}" r="4" fill="{COLORS[0]}"/><text x="{x(n):.1f}" y="{top + height + 16}" text-anchor="middle">{n:,}</text>\n'
        body += f'<text x="{x(n):.1f}" y="{y(v) - 8:.1f}" text-anchor="middle">{v:.3g} ms</text>\n'
    body += f'<polyline fill="none" stroke="{COLORS[0]}" points="{" ".join(f"{x(n):.1f},{y(v):.1f}" for n, v, _ in points)}"/>\n'
    return svg(left + width + 40, top + height + 50, body, f"Cost of one arrival against folder size (@{points[-1][2]})")


def ratio_chart(latest):
    bars = [("capture", m) for m in ("single_commit_overhead", "bulk_overhead", "bulk_insert_api_overhead")] + \
           [("replay", m) for m in ("replay_vs_changeset_apply", "replay_mixed_vs_changeset_apply", "bytes_vs_changeset")] + \
           [("rebuild", "rebuild_vs_plain"), ("bootstrap", "bootstrap_vs_plain")]
    bars = [(suite, metric, latest[(suite, metric)]) for suite, metric in bars if (suite, metric) in latest]
    if not bars:
        return None
    left, top, row, width = 250, 40, 28, 420
    scale = max(max(line["value"], line.get("goal") or 0) for _, _, line in bars) * 1.15
    body = ""
    for index, (suite, metric, line) in enumerate(bars):
        y = top + index * row
        good = met(line) == "yes"
        body += f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">{escape(suite + "/" + metric)}</text>\n'
        body += f'<rect x="{left}" y="{y + 4}" width="{line["value"] / scale * width:.1f}" height="16" fill="{"#4c9f4c" if good else "#d9534f"}"/>\n'
        goal = f'goal {"≤" if line.get("better") == "lower" else "≥"} {line["goal"]:g}' if line.get("goal") is not None else "no goal"
        body += f'<text x="{left + line["value"] / scale * width + 6:.1f}" y="{y + 16}">{line["value"]:.3g} x ({goal})</text>\n'
        if line.get("goal") is not None:
            gx = left + line["goal"] / scale * width
            body += f'<line x1="{gx:.1f}" y1="{y + 1}" x2="{gx:.1f}" y2="{y + 23}" stroke="black" stroke-width="2"/>\n'
    one = left + 1 / scale * width
    body += f'<line x1="{one:.1f}" y1="{top - 4}" x2="{one:.1f}" y2="{top + len(bars) * row}" stroke="#888" stroke-dasharray="4 3"/>\n'
    body += f'<text x="{one:.1f}" y="{top + len(bars) * row + 16}" text-anchor="middle">1 x = the baseline in the same run</text>\n'
    return svg(left + width + 220, top + len(bars) * row + 30, body, "logsync against SQLite doing the same work (bar: value, tick: goal)")


def main():
    if not os.path.exists(RESULTS):
        sys.exit(f"no results at {RESULTS}: run scripts/bench-record.sh first")
    latest = newest(load(RESULTS))
    os.makedirs(OUT, exist_ok=True)
    for name, chart in (("latency.svg", latency_chart(latest)), ("arrival.svg", arrival_chart(latest)), ("ratios.svg", ratio_chart(latest))):
        if chart:
            with open(os.path.join(OUT, name), "w") as handle:
                handle.write(chart)
            print(f"wrote docs/bench/{name}")
    with open(DOC) as handle:
        text = handle.read()
    begin, end = "<!-- current:begin -->", "<!-- current:end -->"
    if begin not in text or end not in text:
        sys.exit(f"{DOC} has no {begin} … {end} section to fill")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(DOC, "w") as handle:
        handle.write(head + begin + "\n" + table(latest) + "\n" + end + tail)
    print("wrote the current table in docs/BENCHMARKS.md")


if __name__ == "__main__":
    main()
