#!/usr/bin/env python3
"""Where a cluster run's CPU went, per rank and thread role, from its metrics JSON (the
aggregator's cpu_seconds and each ISN's stats.cpu_seconds; issue 16), and how its ISNs' batches
lined up (the timeline).

    launch/summarize-cluster-cpu.py RUNS_DIR_OR_METRICS... [--markdown]

Takes metrics files (*.json, *.json.gz) or folders of them (launch/bench-cluster-overhead.sh's
OUT/overhead-ENGINE/runs). Runs named VARIANT-isnsN-batchB-repR.json are grouped by the name
before "-rep" and their medians printed; other files are printed one by one. Columns, in CPU
seconds summed over the ISNs unless named:
  run        the aggregator's run seconds (admission to the last answer)
  q/s        queries over run seconds
  agg        the aggregator process
  isn        the ISN processes
  mpi        the ISNs' MPI (main) threads
  in-calls   the ISN processes while their engines searched (the work, and the calls' tails)
  between    the ISN processes between engine calls (MPI threads, idle workers' spinning)
  docs M     documents scored (millions); ns/doc: in-calls over documents scored
From the timeline (batches past the first 5 and before the last 3; "-" without one):
  c ms       an ISN's compute per batch (engine start to end), the mean over ISNs and batches
  skew%      the batch's slowest ISN over the ISNs' mean compute, averaged over batches: what
             waiting for the slowest costs a batch
  idle ms    an ISN's wait between the end of one batch and the start of the next
  cut>1st    the next batch's cut after the first ISN's answer to the batch before it arrived
             (median over batches, ms): just in time, what passes before the next batch can
             leave once an ISN is idle (mostly the admission of its queries; session 43)
"""
import gzip
import json
import os
import re
import statistics
import sys


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def batch_lineup(m):
    """(mean compute ms, skew %, idle ms, cut after the first answer ms) of the ISNs'
    batches, from the timeline."""
    batches = m.get("timeline", {}).get("batches", [])[5:-3]
    nan = float("nan")
    if not batches:
        return nan, nan, nan, nan
    slowest, mean, idle, last_end, cut_after_first = [], [], [], {}, []
    for prev, b in zip(batches, batches[1:]):
        arrived = [i["arrived"] for i in prev["isn"] if "arrived" in i]
        if arrived and "cut" in b:
            cut_after_first.append(b["cut"] - min(arrived))
    for b in batches:
        c = [i["end"] - i["start"] for i in b["isn"]]
        if not c:
            continue
        slowest.append(max(c))
        mean.append(sum(c) / len(c))
        for i in b["isn"]:
            if i["rank"] in last_end:
                idle.append(max(0.0, i["start"] - last_end[i["rank"]]))
            last_end[i["rank"]] = i["end"]
    if not mean:
        return nan, nan, nan, nan
    avg = statistics.mean(mean)
    return (avg, 100 * (statistics.mean(slowest) / avg - 1) if avg > 0 else nan,
            statistics.mean(idle) if idle else nan,
            statistics.median(cut_after_first) if cut_after_first else nan)


def row(m):
    a = m.get("cpu_seconds")
    isns = [i["stats"] for i in m.get("isn", [])]
    if a is None or not isns or any("cpu_seconds" not in s for s in isns):
        return None
    c = [s["cpu_seconds"] for s in isns]
    docs = sum(s["work"]["docs_scored"] for s in isns)
    queries = m["queries"]["run"]
    # Metrics of session 40's call B and earlier have no in_engine_calls: those columns are "-".
    split = all("in_engine_calls" in x for x in c)
    in_calls = sum(x["in_engine_calls"] for x in c) if split else float("nan")
    compute_ms, skew, idle_ms, cut_after_first = batch_lineup(m)
    return {
        "run": a["run_seconds"],
        "q/s": queries / a["run_seconds"] if a["run_seconds"] > 0 else 0,
        "agg": a["process"],
        "isn": sum(x["process"] for x in c),
        "mpi": sum(x["mpi_thread"] for x in c),
        "in-calls": in_calls,
        "between": sum(x["process"] - x["in_engine_calls"] for x in c) if split else float("nan"),
        "docs M": docs / 1e6,
        "ns/doc": in_calls / docs * 1e9 if docs else float("nan"),
        "c ms": compute_ms,
        "skew%": skew,
        "idle ms": idle_ms,
        "cut>1st": cut_after_first,
    }


def main(argv):
    markdown = "--markdown" in argv
    paths = []
    for p in (a for a in argv if a != "--markdown"):
        if os.path.isdir(p):
            paths += sorted(os.path.join(p, f) for f in os.listdir(p)
                            if re.search(r"\.json(\.gz)?$", f))
        else:
            paths.append(p)
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    groups, without = {}, 0
    for p in paths:
        name = re.sub(r"(-rep\d+)?\.json(\.gz)?$", "", os.path.basename(p))
        try:
            r = row(load(p))
        except (OSError, ValueError, KeyError) as e:
            print(f"{p}: skipped ({e})", file=sys.stderr)
            continue
        if r is None:
            without += 1
            continue
        groups.setdefault(name, []).append(r)
    if without:
        print(f"{without} metrics file(s) without a cluster's cpu_seconds left out (in-process "
              "runs, or cluster runs from before session 40)", file=sys.stderr)
    if not groups:
        return 1
    keys = list(next(iter(groups.values()))[0].keys())
    fmt = {"q/s": "{:.0f}", "ns/doc": "{:.1f}", "c ms": "{:.2f}", "skew%": "{:.1f}",
           "idle ms": "{:.2f}", "cut>1st": "{:.2f}"}
    width = max(max(len(n) for n in groups), 3) + 2
    if markdown:
        print("| run (median of reps) | reps | " + " | ".join(keys) + " |")
        print("| --- " * (len(keys) + 2) + "|")
    else:
        print("run".ljust(width) + "reps " + " ".join(k.rjust(9) for k in keys))
    for name, rs in groups.items():
        vals = []
        for k in keys:
            v = statistics.median(r[k] for r in rs)
            vals.append("-" if v != v else fmt.get(k, "{:.3f}").format(v))
        if markdown:
            print(f"| {name} | {len(rs)} | " + " | ".join(vals) + " |")
        else:
            print(name.ljust(width) + f"{len(rs):>4} " + " ".join(v.rjust(9) for v in vals))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
