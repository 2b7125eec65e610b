#!/usr/bin/env python3
"""The list cache's drift runs (`launch/gpu-host.sh cache-drift`): each online arm's busy rate
over the same round's offline plan, per round, and the bench's figure (the arm's median rate over
the offline median), from every callX/*/*/cache_drift.log under DIR (a results folder such as
tests/benchmarks/results/list-cache/h200-2026-11-29-s39). Usage: summarize-cache-drift.py DIR"""
import pathlib
import re
import statistics
import sys

if len(sys.argv) != 2:
    sys.exit("usage: summarize-cache-drift.py DIR (a results folder with callX/ subfolders)")
root = pathlib.Path(sys.argv[1])
row = re.compile(r"^drifting log at (\d+)x, (offline|online (\S+)): (\d+) q/s busy.*hit ([\d.]+)")
print("| run | ratio | arm | online / offline per round | median ratio | hit (bytes) |")
print("| --- | --- | --- | --- | --- | --- |")
for log in sorted(root.glob("call*/*/*/cache_drift.log")):
    rounds, offline, arms, hits = [], None, {}, {}
    ratio = None
    for line in log.read_text().splitlines():
        m = row.match(line)
        if not m:
            continue
        ratio = m.group(1)
        rate = int(m.group(4))
        if m.group(2) == "offline":
            offline = rate
            rounds.append({})
            hits["offline"] = m.group(5)
        else:
            rounds[-1][m.group(3)] = rate / offline
            arms.setdefault(m.group(3), [])
            hits[m.group(3)] = m.group(5)
    offline_rates = [int(row.match(l).group(4)) for l in log.read_text().splitlines()
                     if row.match(l) and row.match(l).group(2) == "offline"]
    run = str(log.parent.relative_to(root))
    for arm in arms:
        per_round = [r[arm] for r in rounds if arm in r]
        arm_rates = [int(row.match(l).group(4)) for l in log.read_text().splitlines()
                     if row.match(l) and row.match(l).group(3) == arm]
        # The bench's own figure: the arm's median rate over the offline median.
        med = statistics.median_low(arm_rates) / statistics.median_low(offline_rates)
        print(f"| {run} | 1/{ratio} | {arm} | {' '.join(f'{x:.3f}' for x in per_round)} | "
              f"**{med:.3f}** | {hits[arm]} (offline {hits['offline']}) |")
