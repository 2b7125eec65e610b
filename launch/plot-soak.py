#!/usr/bin/env python3
"""The soak's plot (launch/soak.sh): RSS of every rank over time, and latency p50 / p99 per minute.

    plot-soak.py DIR     reads DIR/samples.jsonl and DIR/soak.json, writes DIR/soak.png

Needs matplotlib (Debian: python3-matplotlib); exits 2 with a message without it.
"""
import collections
import json
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("plot-soak.py: no matplotlib (apt-get install python3-matplotlib): no soak.png",
          file=sys.stderr)
    sys.exit(2)

out = sys.argv[1]
report = json.load(open(f"{out}/soak.json"))
by_pid = collections.defaultdict(list)
for line in open(f"{out}/samples.jsonl"):
    if line.strip():
        s = json.loads(line)
        by_pid[(s["program"], s["pid"])].append(s)
per_minute = report["per_minute"]
fig, (a, b) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
for (prog, pid), ss in sorted(by_pid.items()):
    ss.sort(key=lambda s: s["t"])
    growth = next((r["rss_growth_percent"] for r in report["ranks"] if r["pid"] == pid), None)
    label = f"{prog} {pid}" + (f" ({growth:+.1f}% after minute 1)" if growth is not None else "")
    a.plot([s["t"] / 60 for s in ss], [s["rss_bytes"] / 2**20 for s in ss], label=label)
a.axvline(1, color="grey", lw=0.8, ls=":")
a.set_ylabel("RSS (MiB)")
a.set_ylim(bottom=0)
a.legend(fontsize=7)
minutes = [p["minute"] - 0.5 for p in per_minute]
b.plot(minutes, [p["p99_ms"] for p in per_minute], "o-", label="p99")
b.plot(minutes, [p["p50_ms"] for p in per_minute], "o-", label="p50")
b.plot(minutes, [p["max_ms"] for p in per_minute], ".:", color="grey", label="max")
b.set_yscale("log")
b.set_ylabel("latency per minute (ms)")
b.set_xlabel("minutes since the soak started")
b.legend(fontsize=8)
fig.suptitle(f"soak: {report['rate_qps']:.0f} queries/s ({report['rate_qps'] / report['peak_qps']:.0%} "
             f"of {report['peak_qps']:.0f}), {report['sent']} sent, {report['lost_answers']} lost, "
             f"{report['duplicate_answers']} duplicated", fontsize=10)
fig.tight_layout()
fig.savefig(f"{out}/soak.png", dpi=120)
print(f"plot-soak.py: {out}/soak.png")
