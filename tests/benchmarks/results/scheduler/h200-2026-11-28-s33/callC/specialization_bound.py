#!/usr/bin/env python3
"""Issue 11, session 33: what the logged per-query costs of call C (costs_best.tsv) allow.

1. Predictor error the features could give (scikit-learn's boosted trees, the shipped settings,
   3 seeds) with and without an oracle "did the OR phase run" feature, per processor.
2. The throughput bound of splitting queries between 8 CPU workers and the GPU with perfect
   knowledge of each query's costs (CPU takes the queries of lowest CPU/GPU cost ratio), under
   three models of the GPU's amortized per-query cost (proportional to its lone latency, flat, or
   to the postings), each scaled so that the whole mix runs at the GPU-alone rate measured in the
   same call (386,861 q/s); the CPU's costs are scaled so that 15 workers run the mix at its
   measured CPU-alone rate (77,790 q/s), so they carry the cost of running under load.
Run: /usr/bin/python3 specialization_bound.py costs_best.tsv
"""
import csv
import sys

import numpy as np
from sklearn.ensemble import GradientBoostingRegressor

FEATS = ['terms', 'shortest', 'second_shortest', 'total', 'total_blocks', 'and_estimate']


def features(rows, oracle=False):
    return np.array([[float(r['terms'])] + [np.log1p(float(r[k])) for k in FEATS[1:5]] +
                     [np.log(float(r['and_estimate']) + 1e-30)] +
                     ([float(r['or_ran'])] if oracle else []) for r in rows])


rows = list(csv.DictReader(open(sys.argv[1]), delimiter='\t'))
train = [r for r in rows if r['set'] == 'train']
test = [r for r in rows if r['set'] == 'test']
for proc in ('cpu', 'gpu'):
    y_train = np.log([float(r[proc + '_seconds']) for r in train])
    y_test = np.array([float(r[proc + '_seconds']) for r in test])
    for oracle in (False, True):
        errors = []
        for seed in range(3):
            m = GradientBoostingRegressor(n_estimators=50, max_depth=3, learning_rate=0.25,
                                          random_state=seed, subsample=0.8)
            m.fit(features(train, oracle), y_train)
            p = np.exp(m.predict(features(test, oracle)))
            errors.append(min(np.mean(np.abs(s * p - y_test) / y_test)
                              for s in np.linspace(0.5, 1.5, 101)))
        print(f'{proc} {"with the oracle" if oracle else "features only"}: test mean relative '
              f'error {np.mean(errors):.3f}')

cpu = np.array([float(r['cpu_seconds']) for r in rows])
gpu = np.array([float(r['gpu_seconds']) for r in rows])
total = np.array([float(r['total']) for r in rows])
n = len(rows)
CPU_ALONE, GPU_ALONE, WORKERS = 77790, 386861, 8
cpu_work = cpu * (15 / CPU_ALONE) / cpu.mean()  # worker-seconds per query under load


def bound(gpu_cost):
    gpu_cost = gpu_cost * (1 / GPU_ALONE) / gpu_cost.mean()
    order = np.argsort(cpu_work / gpu_cost)
    on_cpu = np.concatenate([[0], np.cumsum(cpu_work[order])]) / WORKERS
    on_gpu = np.concatenate([[0], np.cumsum(gpu_cost[order][::-1])])[::-1]
    best = max((n / max(on_cpu[m], on_gpu[m]), m) for m in range(n + 1))
    return best[0] / GPU_ALONE, best[1]


for name, cost in (('its lone latency', gpu), ('flat', np.ones(n)), ('its postings', total)):
    ratio, on_cpu = bound(cost.astype(float))
    print(f'GPU cost ~ {name}: bound {ratio:.2f}x the GPU alone, the CPU taking {on_cpu} of {n}')
print(f'no specialization: {(GPU_ALONE + CPU_ALONE * WORKERS / 15) / GPU_ALONE:.2f}x')
