#!/usr/bin/env python3
"""Session 37's drift runs (H200): online over offline busy q/s per round, hit rates, and what
the online cache's changes cost (bytes copied from the host, moved on the device, swap time).
Run from this directory: python3 summarize.py"""
import json, os

code = {'callA': 'session 36 final (rebuilds copy the region from the host)',
        'callC': 'rebuilds compact on the device; entries regenerated',
        'callD': 'as C, with apply timers',
        'callG': 'as C, + table shifts, uploads on their kernels stream (final)',
        'callJ': 'final'}


def row(call, run, rates, offline_rates, online, offline):
    ratios = [a / b for a, b in zip(rates, offline_rates)]
    med = sorted(ratios)[len(ratios) // 2]
    on, off = online['list_cache'], offline['list_cache']
    d, sw = on['device'], on.get('online_swaps', {})
    moved = d.get('cache_bytes_relocated', 0)
    print(f"| {call[-1]} | {code[call]} | {run.replace('-ratio', ', 1/')} | "
          f"{' '.join('%.3f' % r for r in ratios)} | {med:.3f} | "
          f"{on['hit_rate_bytes']:.3f} / {off['hit_rate_bytes']:.3f} | "
          f"{d['cache_bytes_copied'] / 1e6:.0f} / {moved / 1e6:.0f} | "
          f"{sw.get('apply_seconds', 0):.3f} ({sw.get('swaps', 0)}) | "
          f"{sw.get('calls_waited', 0)} ({sw.get('call_wait_seconds', 0):.4f}) |")


print('| call | code | policy, budget | online/offline per round | median | hit online / offline | '
      'MB copied from host / moved on device | swap s (changes) | calls waited (s) |')
print('| --- | --- | --- | --- | --- | --- | --- | --- | --- |')
for call in sorted(code):
    for run in ('qtf-ratio10', 'vfb1-ratio10', 'vfb1-ratio25', 'vfb1-ratio50'):
        f = f'{call}/{run}/cache_drift.json'
        if not os.path.exists(f):
            continue
        j = json.load(open(f))['online']
        variants = j.get('variants', [])
        if len(variants) > 1:  # several online variants in one run (call J), same offline rounds
            for v in variants:  # the first variant's run is the run file's "online"
                run_json = v['run'] if isinstance(v['run'], dict) else j[v['run']]
                row(call, f"{run}, {v['spec']}", v['rates'], j['offline_rates'], run_json,
                    j['offline'])
        else:
            row(call, run, j['online_rates'], j['offline_rates'], j['online'], j['offline'])
