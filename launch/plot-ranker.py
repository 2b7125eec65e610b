#!/usr/bin/env python3
"""Table and plot of bench_ranker's JSON (issue 12; paper 004, Figures 5.1-5.6): ranking latency
per query against documents per query for each reference ranker, GPU against the CPU twin, and
the copy share of GPU time.

  plot-ranker.py BENCH.json [OUT.png]     (the table goes to stdout as Markdown)
"""
import json
import sys

data = json.load(open(sys.argv[1]))
points = data["points"]
rankers = []
for p in points:
    if p["ranker"] not in rankers:
        rankers.append(p["ranker"])
dev = data.get("device", {})
print(f"GPU {dev.get('device_name', '?')} vs the CPU twin on {data['cpu_threads']} threads; "
      f"{data['documents']} documents (mean length {data['avg_doc_length']:.0f}); median of "
      f"{data['repeat']} runs per query, median over queries.\n")
print("GPU (resident): the forward index kept on the device; GPU (copied): every request "
      "carries its candidates' streams, as in paper 004.\n")
print("| ranker | docs/query | queries | CPU ms | GPU ms (resident) | speedup | copy share | "
      "GPU ms (copied) | speedup | copy share | features ms | transforms ms | net ms | "
      "max rel diff | top-10 equal |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for p in points:
    r, c = p["resident_streams"], p["copied_streams"]
    print(f"| {p['ranker']} | {p['docs_per_query']} | {p['queries']} | {p['cpu_ms_median']:.3f} | "
          f"{r['gpu_ms_median']:.3f} | {r['speedup']:.1f}x | {100 * r['copy_share_of_gpu_time']:.0f}% | "
          f"{c['gpu_ms_median']:.3f} | {c['speedup']:.1f}x | {100 * c['copy_share_of_gpu_time']:.0f}% | "
          f"{r['features_ms_median']:.3f} | {r['transforms_ms_median']:.3f} | {r['net_ms_median']:.3f} | "
          f"{p['max_relative_difference']:.1e} | {p['top10_equal_queries']}/{p['queries']} |")
if len(sys.argv) < 3:
    sys.exit(0)
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("\n(no matplotlib: no plot)")
    sys.exit(0)
fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5))
for i, r in enumerate(rankers):
    ps = [p for p in points if p["ranker"] == r]
    d = [p["docs_per_query"] for p in ps]
    color = f"C{i}"
    ax.plot(d, [p["cpu_ms_median"] for p in ps], "-o", color=color, label=f"{r} CPU")
    ax.plot(d, [p["resident_streams"]["gpu_ms_median"] for p in ps], "--s", color=color,
            label=f"{r} GPU")
    ax.plot(d, [p["copied_streams"]["gpu_ms_median"] for p in ps], ":^", color=color,
            label=f"{r} GPU, streams copied")
    bx.plot(d, [100 * p["resident_streams"]["copy_share_of_gpu_time"] for p in ps], "-o",
            color=color, label=f"{r}")
    bx.plot(d, [100 * p["copied_streams"]["copy_share_of_gpu_time"] for p in ps], ":^",
            color=color, label=f"{r}, streams copied")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("documents per query")
ax.set_ylabel("ranking latency per query (ms)")
ax.set_title("GPU vs CPU twin")
ax.legend(fontsize=8)
ax.grid(True, which="both", alpha=0.3)
bx.set_xscale("log")
bx.set_xlabel("documents per query")
bx.set_ylabel("copies, % of GPU time")
bx.set_title("copy share of GPU time")
bx.legend(fontsize=8)
bx.grid(True, alpha=0.3)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=120)
print(f"\nplot: {sys.argv[2]}")
