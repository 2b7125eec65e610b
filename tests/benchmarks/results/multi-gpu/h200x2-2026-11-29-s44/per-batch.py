#!/usr/bin/env python3
"""Per-batch ISN figures of launch/multi-gpu-runs.sh rows, from each row's cluster metrics JSON
(runs/NAME.json, not kept here: call C's are 1.4 MB). For every ISN: its mean compute a batch
(the engine's call), and for several GPUs per ISN the ranges' share (every GPU answering its docID
range, rows left on the devices) and the NCCL merge's (gather on the lead, merge kernel, copy
back), the NCCL bytes a batch, and the work (postings decoded, documents scored) a batch.

    per-batch.py RUNS_DIR... > per-batch.md
"""
import glob, json, os, sys

print("| row | ISN | batches | compute ms | ranges ms | merge ms | rest ms | NCCL MB | postings decoded (M) | docs scored (M) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for d in sys.argv[1:]:
    for f in sorted(glob.glob(os.path.join(d, "*.json"))):
        if f.endswith(".row.json"):
            continue
        m = json.load(open(f))
        name = os.path.basename(f)[:-5]
        for i in m["isn"]:
            s = i["stats"]
            b = s["batches"]
            mg = s.get("multi_gpu")
            comp = 1000 * s["compute_seconds"] / b
            w = s.get("work", {})
            cells = [name, str(s["rank"]), str(b), f"{comp:.2f}"]
            if mg:
                rng = 1000 * mg["range_seconds"] / mg["batches"]
                mrg = 1000 * mg["merge_seconds"] / mg["batches"]
                cells += [f"{rng:.2f}", f"{mrg:.2f}", f"{comp - rng - mrg:.2f}",
                          f"{mg['nccl_bytes_received'] / mg['batches'] / 1e6:.2f}"]
            else:
                cells += ["-", "-", "-", "-"]
            cells += [f"{w.get('postings_decoded', 0) / b / 1e6:.1f}", f"{w.get('docs_scored', 0) / b / 1e6:.2f}"]
            print("| " + " | ".join(cells) + " |")
