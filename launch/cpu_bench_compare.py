#!/usr/bin/env python3
"""Before/after markdown tables from the bench_cpu_engine JSON files of
launch/bench-cpu-compare.sh (cpu_<collection>_<scoring>_<before|after>_r<round>.json).

    launch/cpu_bench_compare.py DIR

Per collection, scoring and k: each algorithm's single-thread latency (mean, p50, p99; the median
over the rounds of each statistic) before and after, the ratio of the means, and the work
counters per query (postings decoded, documents scored, blocks skipped); then the best
algorithm before (lowest mean) against the best after. Latencies are wall time of one engine
call per query (bench_cpu_engine's latency loop), without reading queries or writing results.
"""
import glob
import json
import os
import re
import statistics
import sys
from collections import defaultdict


def load(directory):
    runs = defaultdict(list)  # (collection, scoring, side) -> [report]
    for path in sorted(glob.glob(os.path.join(directory, "cpu_*_r*.json"))):
        m = re.match(r"cpu_(.+)_(bm25(?:-pr)?)_(before|after)_r(\d+)\.json$", os.path.basename(path))
        if m:
            runs[(m.group(1), m.group(2), m.group(3))].append(json.load(open(path)))
    return runs


def summarize(reports):
    """(algorithm, k) -> dict of medians over rounds."""
    rows = defaultdict(lambda: defaultdict(list))
    for r in reports:
        q = r["num_queries"]
        for x in r["results"]:
            row = rows[(x["algorithm"], x["k"])]
            for stat in ("mean", "p50", "p99"):
                row[stat].append(x["latency_ms"][stat])
            row["cpu"].append(x["thread_cpu_ms"]["mean"])
            row["qps"].append(x["throughput_qps"])
            c = x["counters"]
            row["postings"].append(c["postings_decoded"] / q)
            row["scored"].append(c["docs_scored"] / q)
            row["skipped"].append(c["blocks_skipped"] / q)
            row["wrong"].append(x["wrong_answers"])
    return {key: {s: (max(v) if s == "wrong" else statistics.median(v)) for s, v in row.items()}
            for key, row in rows.items()}


def fmt_count(x):
    return f"{x / 1e3:.1f}K" if x >= 1e4 else f"{x:.0f}"


def tables(directory):
    runs = load(directory)
    out = []
    keys = sorted({(c, s) for (c, s, _) in runs})
    for collection, scoring in keys:
        before = runs.get((collection, scoring, "before"), [])
        after = runs.get((collection, scoring, "after"), [])
        if not before or not after:
            continue
        b, a = summarize(before), summarize(after)
        r0 = after[0]
        out.append(f"### {collection}, {scoring}: {r0['num_docs']:,} documents, "
                   f"{r0['num_queries']} queries ({r0['mean_terms']:.1f} terms), {r0['mode']}")
        out.append("")
        out.append(f"{r0['machine']['cpu']}, {r0['machine']['cores']} cores; {len(before)} before "
                   f"and {len(after)} after rounds, alternating ({before[0]['date_utc']} to "
                   f"{after[-1]['date_utc']}); medians over rounds.")
        out.append("")
        out.append("| k | algorithm | mean ms before / after | p50 ms before / after | "
                   "p99 ms before / after | speed-up (mean) | postings / query before / after | "
                   "scored / query before / after | blocks skipped / query before / after | "
                   "QPS all cores before / after | wrong after |")
        out.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        ks = sorted({k for (_, k) in list(b) + list(a)})
        for k in ks:
            algorithms = sorted({al for (al, kk) in list(b) + list(a) if kk == k},
                                key=lambda al: (al not in dict(b), al))
            for al in algorithms:
                x, y = b.get((al, k)), a.get((al, k))
                if x and y:
                    out.append(
                        f"| {k} | {al} | {x['mean']:.3f} / **{y['mean']:.3f}** | "
                        f"{x['p50']:.3f} / {y['p50']:.3f} | {x['p99']:.2f} / {y['p99']:.2f} | "
                        f"{x['mean'] / y['mean']:.2f}x | {fmt_count(x['postings'])} / "
                        f"{fmt_count(y['postings'])} | {fmt_count(x['scored'])} / "
                        f"{fmt_count(y['scored'])} | {fmt_count(x['skipped'])} / "
                        f"{fmt_count(y['skipped'])} | {x['qps']:.0f} / {y['qps']:.0f} | "
                        f"{y['wrong']:.0f} |")
                elif y:
                    out.append(
                        f"| {k} | {al} (new) | - / **{y['mean']:.3f}** | - / {y['p50']:.3f} | "
                        f"- / {y['p99']:.2f} | - | - / {fmt_count(y['postings'])} | - / "
                        f"{fmt_count(y['scored'])} | - / {fmt_count(y['skipped'])} | "
                        f"- / {y['qps']:.0f} | {y['wrong']:.0f} |")
        out.append("")
        for k in ks:
            bb = min((v["mean"], al) for (al, kk), v in b.items() if kk == k)
            ba = min((v["mean"], al) for (al, kk), v in a.items() if kk == k)
            out.append(f"- k = {k}: best before {bb[1]} {bb[0]:.3f} ms, best after {ba[1]} "
                       f"{ba[0]:.3f} ms: **{bb[0] / ba[0]:.2f}x** faster per query.")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(tables(sys.argv[1] if len(sys.argv) > 1 else "build/bench/cpu-compare"))
