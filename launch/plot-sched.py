#!/usr/bin/env python3
"""Paper 001's Figure 7 from bench_scheduler's JSON: mean delay (arrival to answer) against the
arrival rate, one line per configuration (cpu, gpu, best-serial, lbd, queues-lone-cost, queues,
queues-specialize), passing runs only
(no missed deadline), each line ending at its sustained rate; and a table on the terminal
(sustained rate, and per run: rate, mean and p99 delay, jobs per processor, stolen, promoted).
Without matplotlib, only the table.

usage: plot-sched.py sched.json [out.png]
"""
import json
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = json.load(open(sys.argv[1]))
    print(f"{d['index']}: {d['docs']} docs, {d['test_queries']} test queries, "
          f"{d['params']['mode']} k={d['params']['k']}, deadline {d['deadline_ms']} ms, "
          f"{d['cpu_workers']} CPU workers, GPU side: {d['machine']['gpu_side_engine']}")
    for p in ("cpu", "gpu"):
        e = d["predictor"][p]
        print(f"predictor {p}: mean relative error {100 * e['mean_relative_error_held_out']:.1f}% "
              f"(held out), {100 * e.get('mean_relative_error_test', float('nan')):.1f}% (test)")
    print(f"{'config':<18} {'sustained/s':>12}")
    for name, c in d["configs"].items():
        print(f"{name:<18} {c['sustained_rate']:>12.1f}")
    for k, v in d["sustained_rate"].items():
        if k.endswith("_over_best_single"):
            print(f"{k}: {v:.2f}x")
    print(f"\n{'config':<18} {'rate/s':>9} {'pass':>5} {'mean ms':>9} {'p99 ms':>9} "
          f"{'cpu jobs':>9} {'gpu jobs':>9} {'stolen':>7} {'promoted':>9}")
    for name, c in d["configs"].items():
        for r in sorted(c["runs"], key=lambda r: r["rate"]):
            print(f"{name:<18} {r['rate']:>9.1f} {str(r['passed']):>5} "
                  f"{r['delay_ms']['mean']:>9.2f} {r['delay_ms']['p99']:>9.2f} "
                  f"{r['jobs_on']['cpu']:>9} {r['jobs_on']['gpu']:>9} {r['stolen']:>7} "
                  f"{r['promoted']:>9}")
    if len(sys.argv) < 3:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, c in d["configs"].items():
        runs = sorted((r for r in c["runs"] if r["passed"]), key=lambda r: r["rate"])
        if runs:
            ax.plot([r["rate"] for r in runs], [r["delay_ms"]["mean"] for r in runs], marker="o",
                    label=f"{name} (sustains {c['sustained_rate']:.0f}/s)")
    ax.set_xlabel("arrival rate (queries/s)")
    ax.set_ylabel("mean delay (ms)")
    ax.set_yscale("log")
    ax.set_title(f"no missed {d['deadline_ms']} ms deadline; {d['machine']['host']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)
    print("wrote", sys.argv[2])


if __name__ == "__main__":
    main()
