#!/usr/bin/env python3
"""Markdown tables from bench_cpu_engine JSON files (launch/bench-cpu.sh writes them).

    launch/cpu_bench_table.py build/bench/cpu/cpu_synthetic_bm25.json [...]
"""
import json
import sys


def table(path):
    r = json.load(open(path))
    out = [f"### {r['index']}: {r['num_docs']:,} documents, {r['num_queries']} queries "
           f"({r['mean_terms']:.1f} terms), {r['mode']}, {r['scoring']}",
           "",
           f"{r['machine']['cpu']}, {r['machine']['cores']} cores, {r['date_utc']}; block decoding "
           f"{r['decode_ints_per_s_per_core']:.3g} ints/s per core.",
           "",
           "| algorithm | k | mean ms | p50 ms | p99 ms | CPU ms | QPS | postings | scored | "
           "speed-up wall / CPU | intra-query ms | wrong |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for x in r["results"]:
        lat, cpu, frac = x["latency_ms"], x["thread_cpu_ms"], x["fraction_of_exhaustive"]
        intra = x.get("intra_query_mean_ms")
        intra_s = f"{intra:.3f} ({x['intra_query_threads']} thr)" if intra is not None else "-"
        out.append(f"| {x['algorithm']} | {x['k']} | {lat['mean']:.3f} | {lat['p50']:.3f} | "
                   f"{lat['p99']:.2f} | {cpu['mean']:.3f} | {x['throughput_qps']:.0f} | "
                   f"{frac['postings_decoded']:.3f} | {frac['docs_scored']:.3f} | "
                   f"{x['speedup_vs_exhaustive']:.2f} / {x['cpu_speedup_vs_exhaustive']:.2f} | "
                   f"{intra_s} | {x['wrong_answers']} |")
    return "\n".join(out)


if __name__ == "__main__":
    print("\n\n".join(table(p) for p in sys.argv[1:]))
