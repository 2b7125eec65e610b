#!/usr/bin/env python3
"""Plots and table of bench_list_cache's JSON (issue 10; paper 000, Figures 6-9): throughput
against S_c / M for each policy and lambda, the hit rate and the post-processed fraction against
S_c / M, one panel per ratio postings / M (the shard at 2.5x and 10x the budget).

  plot-list-cache.py cache_bench.json [OUTDIR]

Writes OUTDIR/list-cache-throughput.png, list-cache-hit-rate.png, list-cache-post-processed.png
(OUTDIR: the JSON's folder) and prints a Markdown table of the sweep to stdout. Rows at other
launch caps (the model's extra runs) are drawn dashed.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

if len(sys.argv) < 2:
    sys.exit(__doc__)
data = json.load(open(sys.argv[1]))
outdir = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(sys.argv[1]))
os.makedirs(outdir, exist_ok=True)

rows = list(data.get("sweep", []))
seen = {(r["ratio"], r["policy"], r["cache_share"], r["batch_cap"]) for r in rows}
for r in data.get("model", {}).get("rows", []):
    key = (r["ratio"], r["policy"], r["cache_share"], r["batch_cap"])
    if key not in seen:
        seen.add(key)
        rows.append(r)
if not rows:
    sys.exit(f"{sys.argv[1]}: no sweep rows")
sweep_cap = data["sweep"][0]["batch_cap"] if data.get("sweep") else rows[0]["batch_cap"]
ratios = sorted({r["ratio"] for r in rows})
policies = []
for r in rows:
    if r["policy"] not in policies:
        policies.append(r["policy"])
colors = {p: plt.cm.tab10(i % 10) for i, p in enumerate(policies)}


def series(ratio):
    """(policy, cap) -> rows by share, at one ratio."""
    out = {}
    for r in rows:
        if r["ratio"] == ratio:
            out.setdefault((r["policy"], r["batch_cap"]), []).append(r)
    for v in out.values():
        v.sort(key=lambda r: r["cache_share"])
    return out


def panels(metric, ylabel, title, fname, baselines=False, scale=1.0):
    fig, axes = plt.subplots(1, len(ratios), figsize=(6.0 * len(ratios), 4.4), squeeze=False)
    for ax, ratio in zip(axes[0], ratios):
        for (policy, cap), rs in series(ratio).items():
            ys = [metric(r) * scale for r in rs]
            if all(y is None for y in ys):
                continue
            label = policy if cap == sweep_cap else f"{policy}, cap {cap}"
            ax.plot([r["cache_share"] for r in rs], ys, marker="o", color=colors[policy],
                    linestyle="-" if cap == sweep_cap else "--", label=label)
        if baselines:
            for key, name, style in (("gpu_all_resident", "GPU, whole shard", ":"),
                                     ("cpu", f"CPU engine ({data.get('host_threads', '?')} threads)",
                                      "-.")):
                if key in data:
                    ax.axhline(data[key]["queries_per_second"] * scale, color="gray",
                               linestyle=style, label=name)
        ax.set_title(f"shard = {ratio:g} x M ({data.get('mode', '?')}, k={data.get('k', '?')}, "
                     f"{data.get('docs', 0) / 1e6:g}M docs)")
        ax.set_xlabel("S_c / M")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), fontsize=8)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.1, 1, 0.95))
    path = os.path.join(outdir, fname)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(f"wrote {path}", file=sys.stderr)


panels(lambda r: r["queries_per_second"], "throughput (1,000 queries/s)",
       "GPU list cache: throughput against the cache share of the budget M",
       "list-cache-throughput.png", baselines=True, scale=1e-3)
panels(lambda r: r["list_cache"]["hit_rate_bytes"], "hit rate (bytes read from the cache)",
       "GPU list cache: hit rate (bytes)", "list-cache-hit-rate.png")
panels(lambda r: r["list_cache"]["post_processed_fraction"], "post-processed fraction of queries",
       "GPU list cache: queries completed on the CPU (pruned lists)",
       "list-cache-post-processed.png")

print("| ratio | policy | S_c/M | cap | q/s | hit (blocks) | hit (bytes) | post-processed | "
      "launches | MB shipped / launch | KB shipped / query | wrong |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in sorted(rows, key=lambda r: (r["ratio"], policies.index(r["policy"]), r["batch_cap"] != sweep_cap,
                                     r["batch_cap"], r["cache_share"])):
    lc = r["list_cache"]
    print(f"| {r['ratio']:g}x | {r['policy']} | {r['cache_share']:.2f} | {r['batch_cap']} | "
          f"{r['queries_per_second']:.0f} | {lc['hit_rate_blocks']:.3f} | {lc['hit_rate_bytes']:.3f} | "
          f"{lc['post_processed_fraction']:.3f} | {lc['batches']} | "
          f"{lc['bytes_shipped_per_batch'] / 1e6:.2f} | {lc['bytes_shipped_total'] / r['queries'] / 1e3:.1f} | "
          f"{r['wrong']} |")
