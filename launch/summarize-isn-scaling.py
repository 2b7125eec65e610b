#!/usr/bin/env python3
"""N ISNs over one ISN, rep by rep: issue 16's fourth target (four ISNs >= one ISN at batch
1,024) on a loaned host whose speed drifts between runs. launch/bench-cluster-overhead.sh
interleaves its reps, so a rep's N-ISN run and one-ISN run ran next to each other; their ratio
removes the drift that the medians of each side keep.

  launch/summarize-isn-scaling.py RUNS_DIR... [--isns N]

RUNS_DIR: bench-cluster-overhead.sh's OUT/runs (metrics VARIANT-isnsK-batchB-repR.json[.gz]).
Several folders pool their reps (runs of the same variant and batch in different calls). Per
variant and batch size: the one-ISN and N-ISN throughput (median and mean over reps), each rep's
N/1 ratio, and the ratios' median, geometric mean and range. A rep lacking either run is left out.
"""
import argparse
import glob
import gzip
import json
import math
import os
import re
import statistics as st
import sys
from collections import defaultdict

NAME = re.compile(r"^(?P<variant>.+)-isns(?P<isns>\d+)-batch(?P<batch>\d+)-rep(?P<rep>\d+)\.json(\.gz)?$")


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="bench-cluster-overhead.sh OUT/runs folders")
    ap.add_argument("--isns", type=int, default=4, help="the N of N over one (default 4)")
    a = ap.parse_args()
    qps = defaultdict(dict)  # (variant, batch) -> {(folder, rep, isns): q/s}
    for folder in a.runs:
        if not os.path.isdir(folder):
            sys.exit(f"summarize-isn-scaling: {folder}: not a folder")
        for path in sorted(glob.glob(os.path.join(folder, "*.json*"))):
            m = NAME.match(os.path.basename(path))
            if not m:
                continue
            try:
                q = load(path).get("queries_per_second")
            except (OSError, ValueError) as e:
                sys.exit(f"summarize-isn-scaling: cannot read {path}: {e}")
            if q:
                qps[(m["variant"], int(m["batch"]))][(folder, int(m["rep"]), int(m["isns"]))] = q
    rows = []
    for (variant, batch), runs in sorted(qps.items()):
        reps = sorted({(f, r) for (f, r, _) in runs})
        pairs = [(runs[(f, r, 1)], runs[(f, r, a.isns)]) for f, r in reps
                 if (f, r, 1) in runs and (f, r, a.isns) in runs]
        if not pairs:
            continue
        ratios = [n / one for one, n in pairs]
        ones, ns = [p[0] for p in pairs], [p[1] for p in pairs]
        rows.append((variant, batch, len(pairs), st.median(ones), st.mean(ones), st.median(ns),
                     st.mean(ns), st.median(ratios),
                     math.exp(st.mean(math.log(x) for x in ratios)), min(ratios), max(ratios)))
    if not rows:
        sys.exit(f"summarize-isn-scaling: no rep with both a 1-ISN and a {a.isns}-ISN run")
    width = max(len(r[0]) for r in rows)
    print(f"{'variant':<{width}}  batch reps  1 ISN q/s (med / mean)  {a.isns} ISNs q/s (med / mean)"
          f"  {a.isns}/1 median  geomean  range")
    for r in rows:
        print(f"{r[0]:<{width}}  {r[1]:5d} {r[2]:4d}  {r[3]:9.0f} / {r[4]:9.0f}  {r[5]:10.0f} / "
              f"{r[6]:9.0f}  {r[7]:11.3f}  {r[8]:7.3f}  {r[9]:.3f}-{r[10]:.3f}")


if __name__ == "__main__":
    main()
