#!/usr/bin/env python3
"""Plots launch/bench-cluster.sh's JSON: throughput and p99 latency against batch size (one line
per ISN count) and against ISN count (one line per batch size).

usage: plot-cluster.py bench-cluster.json out.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
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
