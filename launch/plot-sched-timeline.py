#!/usr/bin/env python3
"""Draws one bench_scheduler run's timeline (bench_scheduler --timeline-ms MS).

    launch/plot-sched-timeline.py RESULT.json --config queues-specialize [--rate R] --out PNG

Picks the configuration's run at the rate nearest R (default: its first failed rate, else its
sustained rate) and draws, per bin: arrivals and completions per processor (queries/s), jobs not
yet submitted and jobs waiting in each queue, the CPU's busy workers and the GPU's busy fraction
with its mean batch, the longest wait of the jobs each processor started against the deadline,
and theta (routing specialize). Where a run missed its deadline, this shows which queue grew and
whether a processor sat idle meanwhile.
"""
import argparse
import gzip
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result", help="bench_scheduler's JSON (or .json.gz), run with --timeline-ms")
    ap.add_argument("--config", required=True, help="configuration name, e.g. queues-specialize")
    ap.add_argument("--rate", type=float, help="the run nearest this arrival rate")
    ap.add_argument("--out", required=True, help="PNG to write")
    a = ap.parse_args()
    try:
        opener = gzip.open if a.result.endswith(".gz") else open
        with opener(a.result, "rt") as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"plot-sched-timeline: cannot read {a.result}: {e}")
    configs = d.get("configs", {})
    if a.config not in configs:
        sys.exit(f"plot-sched-timeline: no configuration '{a.config}' in {a.result} "
                 f"(it has: {', '.join(configs) or 'none'})")
    c = configs[a.config]
    runs = [r for r in c["runs"] if "timeline" in r]
    if not runs:
        sys.exit(f"plot-sched-timeline: {a.result} has no timelines: run bench_scheduler "
                 f"with --timeline-ms 10")
    target = a.rate or c.get("first_failed_rate") or c.get("sustained_rate") or runs[-1]["rate"]
    run = min(runs, key=lambda r: abs(r["rate"] - target))
    t = run["timeline"]
    width = t["bin_ms"] / 1e3
    x = t["t_s"]

    fig, ax = plt.subplots(5, 1, figsize=(11, 13), sharex=True)
    verdict = "passed" if run["passed"] else f"failed ({run['missed_deadline']} missed)"
    fig.suptitle(f"{a.config} at {run['rate']:.0f} queries/s: {verdict}; "
                 f"{t['bin_ms']:g} ms bins; {d.get('index', '')}", fontsize=10)
    ax[0].plot(x, [v / width for v in t["arrivals"]], label="arrivals")
    ax[0].plot(x, [v / width for v in t["done_cpu"]], label="answered on the CPU")
    ax[0].plot(x, [v / width for v in t["done_gpu"]], label="answered on the GPU")
    ax[0].set_ylabel("queries/s")
    ax[1].plot(x, t["unsubmitted"], label="arrived, not yet submitted")
    ax[1].plot(x, t["waiting_cpu_queue"], label="CPU queue")
    ax[1].plot(x, t["waiting_gpu_queue"], label="GPU queue")
    if any(t["waiting_either_queue"]):
        ax[1].plot(x, t["waiting_either_queue"], label="either queue")
    ax[1].set_ylabel("jobs waiting")
    ax[2].plot(x, t["cpu_busy_workers"], label="CPU workers busy")
    ax[2].plot(x, t["gpu_busy"], label="GPU busy (fraction)")
    ax[2].set_ylabel("busy")
    batch = ax[2].twinx()
    batch.plot(x, t["gpu_batch_mean"], color="grey", alpha=0.5, label="GPU batch (mean)")
    batch.set_ylabel("GPU batch")
    ax[3].plot(x, t["max_wait_ms_cpu"], label="longest wait, CPU")
    ax[3].plot(x, t["max_wait_ms_gpu"], label="longest wait, GPU")
    ax[3].axhline(d.get("deadline_ms", 500), color="red", linestyle=":", label="deadline")
    ax[3].set_ylabel("ms")
    theta = [(xi, v) for xi, v in zip(x, t["theta"]) if v is not None and v == v]
    if theta:
        ax[4].plot([p[0] for p in theta], [p[1] for p in theta], ".", markersize=3, label="theta")
        ax[4].set_yscale("log")
    ax[4].set_ylabel("theta")
    ax[4].set_xlabel("seconds since the first arrival")
    for axis in ax:
        axis.legend(loc="upper left", fontsize=8)
        axis.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out} ({a.config}, run at {run['rate']:.0f} queries/s)")


if __name__ == "__main__":
    main()
