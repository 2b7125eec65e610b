#!/usr/bin/env python3
"""Session 36's drift runs (qtf, H200): online over offline per round, the caches' hit rates and
fill, per call and budget. Run from this directory: python3 summarize.py"""
import json, os
code = {'callC': 'before (main at fb9c740)', 'callD': 'lazy eviction',
        'callE': '+ first copy of a change whatever its size', 'callF': '+ rebuild past 1/32 (final)',
        'callG': 'best fit, rebuild past 1/8 (not kept)'}
print('| call | code | budget | online/offline per round | paired median | hit online / offline | online region used | bytes shipped online / offline | sub-batches online / offline |')
print('| --- | --- | --- | --- | --- | --- | --- | --- | --- |')
for call in sorted(code):
    for r in (50, 25, 10):
        f = f'{call}/ratio{r}/cache_drift.json'
        if not os.path.exists(f):
            continue
        j = json.load(open(f))['online']
        per = sorted(a / b for a, b in zip(j['online_rates'], j['offline_rates']))
        on, off = j['online']['list_cache'], j['offline']['list_cache']
        d = on['device']
        print(f"| {call[-1]} | {code[call]} | 1/{r} | {' '.join('%.3f' % (a / b) for a, b in zip(j['online_rates'], j['offline_rates']))} | "
              f"{per[len(per) // 2]:.3f} | {on['hit_rate_bytes']:.3f} / {off['hit_rate_bytes']:.3f} | "
              f"{100 * d['cache_used_bytes'] / d['cache_capacity_bytes']:.0f}% | "
              f"{on['bytes_shipped'] / 1e6:.0f} / {off['bytes_shipped'] / 1e6:.0f} MB | {on['batches']} / {off['batches']} |")
