#!/usr/bin/env python3
"""Every cluster run's latency legs, one line a run (issue 16).

    launch/cluster-legs.py RUNS_DIR

RUNS_DIR: a launch/bench-cluster-overhead.sh step's runs/ folder (its *-rep*.json metrics). For
each run: throughput, p50 latency (ms), and the p50 (us) of each stage a query passes: its wait
for the batch's cut (the batch's admission), the cut to encoded, the cut to sent, the wire to the
ISN, the ISN's queue, compute, the answer's encoding, the wire back and the merge's decoding;
then the admission's time a query and its resolving's (us), the resolving threads, and the
resolver's helpers' chunks and polling seconds (aggregator/admission_resolver.hpp).
"""
import glob
import json
import os
import sys


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: launch/cluster-legs.py RUNS_DIR (a bench-cluster-overhead step's runs/)")
    files = sorted(f for f in glob.glob(os.path.join(sys.argv[1], "*-rep*.json"))
                   if not os.path.basename(f).startswith("inprocess"))
    if not files:
        sys.exit(f"{sys.argv[1]}: no cluster runs' metrics (*-rep*.json)")
    print(f"{'run':<34} {'q/s':>6} {'p50ms':>6} {'wait':>6} {'encode':>6} {'sent':>6} "
          f"{'to_isn':>6} {'isn_q':>6} {'comp':>7} {'isn_enc':>7} {'back':>6} {'decode':>6} "
          f"{'adm_us/q':>8} {'res_us/q':>8} {'thr':>3} {'helper_chunks':>13} {'poll_s':>6}")
    for f in files:
        m = json.load(open(f))
        st, a = m["stages_ms"], m.get("admission", {})
        h = a.get("helpers")

        def us(k):
            return f"{st[k]['p50'] * 1000:6.1f}" if k in st else f"{'-':>6}"

        res = a.get("resolve_us_per_query")
        print(f"{os.path.basename(f)[:-5]:<34} {m['queries_per_second']:6.0f} "
              f"{m['latency_ms']['p50']:6.3f} {us('batching_wait_per_query')} {us('encode')} "
              f"{us('broadcast')} {us('to_isn')} {us('isn_queue')} "
              f"{st['isn_compute_max']['p50'] * 1000:7.0f} {us('isn_encode'):>7} {us('from_isn')} "
              f"{us('decode')} {a.get('us_per_query', float('nan')):8.2f} "
              f"{res if res is not None else float('nan'):8.2f} {a.get('threads', 0):3d} "
              f"{(str(h['helper_chunks']) + '/' + str(h['chunks'])) if h else '-':>13} "
              f"{(format(h['poll_seconds'], '.3f')) if h else '-':>6}")


if __name__ == "__main__":
    main()
