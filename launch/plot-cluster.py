#!/usr/bin/env python3
"""Plots launch/bench-cluster.sh's JSON: throughput and p99 latency against batch size (one line
per ISN count) and against ISN count (one line per batch size). With --timeline, plots one
cluster run's per-batch timeline from its metrics JSON (the aggregator's "timeline", every time
on the aggregator's clock): a Gantt chart of a window of consecutive batches (aggregator: encode,
broadcast, waiting for the merge thread, merge; each ISN: to the ISN, queued, compute, encode,
back) and, for every batch, where its time from cut to merged answers went.

usage: plot-cluster.py bench-cluster.json out.png
       plot-cluster.py --timeline metrics.json out.png [--first B] [--count N]
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


STAGE_COLORS = {"encode": "#9467bd", "broadcast": "#1f77b4", "to ISN": "#aec7e8",
                "queued at ISN": "#dddddd", "compute": "#2ca02c", "ISN encode": "#bcbd22",
                "back": "#ff7f0e", "merge wait": "#c5b0d5", "merge": "#d62728"}


def plot_timeline(metrics_path, out_path, first=None, count=24):
    m = json.load(open(metrics_path))
    batches = [b for b in m["timeline"]["batches"] if all("start" in i for i in b["isn"])]
    if not batches:
        sys.exit("no complete batches in the timeline of " + metrics_path)
    if first is None:  # a window from the middle of the run, past the warm-up
        first = max(0, len(batches) // 2 - count // 2)
    window = batches[first:first + count]
    isns = len(window[0]["isn"])
    fig, ax = plt.subplots(2, 1, figsize=(13, 3 + 0.5 * isns + 4), gridspec_kw={"height_ratios": [1 + 0.4 * isns, 2]})
    gantt = ax[0]
    used = set()

    def bar(row, start, end, stage, label=None, height=0.6):
        if end is None or start is None or end <= start:
            return
        gantt.barh(row, end - start, left=start, height=height, color=STAGE_COLORS[stage],
                   edgecolor="black", linewidth=0.3, label=None if stage in used else stage)
        used.add(stage)
        if label is not None:
            gantt.text(start + (end - start) / 2, row, label, ha="center", va="center", fontsize=6)

    for b in window:
        bar(0, b["cut"], b["encoded"], "encode")
        bar(0, b["sent"], b.get("sends_done"), "broadcast")
        bar(0, b["complete"], b["merge_start"], "merge wait")
        bar(0, b["merge_start"], b["merged"], "merge")
    # Waiting stages thin and underneath: with several batches in flight a batch waits at an ISN
    # while the one before it computes there.
    for b in window:
        for j, i in enumerate(b["isn"]):
            bar(j + 1.25, b["sent"], i["received"], "to ISN", height=0.2)
            bar(j + 1.25, i["received"], i["start"], "queued at ISN", height=0.2)
            bar(j + 1.25, i["encoded"], i["arrived"], "back", height=0.2)
    for b in window:
        for j, i in enumerate(b["isn"]):
            bar(j + 0.9, i["start"], i["end"], "compute", str(b["batch"]), height=0.4)
            bar(j + 0.9, i["end"], i["encoded"], "ISN encode", height=0.4)
    gantt.set_yticks(range(isns + 1))
    gantt.set_yticklabels(["aggregator"] + ["ISN rank %d" % i["rank"] for i in window[0]["isn"]])
    gantt.invert_yaxis()
    gantt.set_xlabel("ms since the run started (aggregator clock; ISN clocks offset-corrected)")
    gantt.legend(loc="upper right", fontsize=7, ncol=5)
    gantt.set_title("batches %d-%d of %d (numbers: batch ids on the ISNs' compute)" % (
        window[0]["batch"], window[-1]["batch"], len(batches)), fontsize=9)

    # Every batch: where the time from cut to merged answers went (the critical ISN: the last
    # answer to arrive).
    stages = ["encode", "to ISN", "queued at ISN", "compute", "ISN encode", "back", "merge wait", "merge"]
    cols = {s: [] for s in stages}
    for b in batches:
        c = max(b["isn"], key=lambda i: i["arrived"])
        parts = {"encode": b["encoded"] - b["cut"], "to ISN": c["received"] - b["sent"],
                 "queued at ISN": c["start"] - c["received"], "compute": c["end"] - c["start"],
                 "ISN encode": c["encoded"] - c["end"], "back": c["arrived"] - c["encoded"],
                 "merge wait": b["merge_start"] - b["complete"], "merge": b["merged"] - b["merge_start"]}
        for s in stages:
            cols[s].append(max(0.0, parts[s]))
    xs = [b["batch"] for b in batches]
    bottom = [0.0] * len(xs)
    for s in stages:
        ax[1].bar(xs, cols[s], bottom=bottom, color=STAGE_COLORS[s], width=1.0, label=s)
        bottom = [a + b for a, b in zip(bottom, cols[s])]
    ax[1].set_xlabel("batch")
    ax[1].set_ylabel("ms, cut to merged (critical ISN)")
    ax[1].legend(fontsize=7, ncol=4)
    st = m["stages_ms"]
    fig.suptitle("%s: %d ISN(s), engine %s, batch %s, depth %s, progress %s; %.0f q/s; mean ms per batch: "
                 "compute %.2f, aggregator overhead %.2f" % (
                     metrics_path.split("/")[-1], m["isns"], m["engine"], m["batch_policy"]["batch_size"],
                     m["batch_policy"].get("depth", "?"), m.get("progress", {}).get("mode", "?"),
                     m["queries_per_second"], st["isn_compute_max"].get("mean", 0),
                     st.get("aggregator_overhead", {}).get("mean", 0)), fontsize=9)
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)
    print("wrote", out_path)


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--timeline":
        args = sys.argv[2:]
        opts = {"--first": None, "--count": 24}
        pos = []
        while args:
            a = args.pop(0)
            if a in opts:
                opts[a] = int(args.pop(0))
            else:
                pos.append(a)
        if len(pos) != 2:
            sys.exit(__doc__)
        plot_timeline(pos[0], pos[1], opts["--first"], opts["--count"])
        return
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data = json.load(open(sys.argv[1]))
    runs = data["runs"]
    isns = sorted({r["isns"] for r in runs})
    batches = sorted({r["batch_size"] for r in runs})
    at = {(r["isns"], r["batch_size"]): r for r in runs}
    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    metrics = [("queries_per_second", "throughput (queries/s)"),
               (lambda r: r["latency_ms"]["p99"], "p99 latency (ms)")]
    for row, (key, label) in enumerate(metrics):
        get = key if callable(key) else (lambda r, key=key: r[key])
        for n in isns:
            xs = [b for b in batches if (n, b) in at]
            ax[row][0].plot(xs, [get(at[(n, b)]) for b in xs], marker="o", label=f"{n} ISN(s)")
        ax[row][0].set_xscale("log", base=2)
        ax[row][0].set_xlabel("batch size (queries)")
        ax[row][0].set_ylabel(label)
        ax[row][0].legend()
        for b in batches:
            xs = [n for n in isns if (n, b) in at]
            ax[row][1].plot(xs, [get(at[(n, b)]) for n in xs], marker="o", label=f"batch {b}")
        if row == 1:
            ax[row][0].set_yscale("log")
            ax[row][1].set_yscale("log")
        ax[row][1].set_xticks(isns)
        ax[row][1].set_xlabel("ISNs (one shard each)")
        ax[row][1].set_ylabel(label)
        ax[row][1].legend()
    m = data.get("machine", {})
    q = runs[0]["metrics"] if runs else {}
    fig.suptitle("gpusearch cluster, {} queries, mode {}, k {}, engine {} - {} ({} cores)".format(
        q.get("queries", {}).get("run", "?"), q.get("mode", "?"), q.get("k", "?"),
        q.get("engine", "?"), m.get("cpu", "?"), m.get("cores", "?")), fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    print("wrote", sys.argv[2])


if __name__ == "__main__":
    main()
