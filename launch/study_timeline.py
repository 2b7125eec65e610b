"""A compact summary of an aggregator run's per-batch timeline (metrics "timeline.batches").

The timeline holds every batch's cut, send, per-ISN receive/start/end/encode/arrival and merge
times: megabytes per point, so copies kept in the repository leave it out (`launch/study-strip`).
What the simulator (launch/study-simulate) needs from it is summarized here and stored in the
point's `derived.timeline` by the driver, so it survives the stripping:

- first_cut_ms: from the run's start to the first batch's cut. In a closed loop the aggregator
  admits a whole window (batch x (in-flight + 1) queries) before it cuts, so this over the window
  is its admission cost per query (resolving the terms in its vocabulary), on the main thread,
  cold (page faults in the vocabulary; on a busy host, waiting for a core).
- admission_ms_per_query, admission_samples: the same cost in the run's steady state: from the
  merge end that gave the window room to the next cut, per query of that batch, over the batches
  whose cut waited for that room last (not for a place in the pipeline); the median.
- cut_to_sent_ms: mean time from a cut to the encoded batch handed to MPI (main thread).
- per_query_merge_ms: the merge thread's cost per query answered (mean over batches).
- first_batch: the first batch's per-ISN compute, to-ISN and from-ISN delays and encoding (the
  run's warm-up: first messages, cold caches, the GPU's first kernels), and whether each was the
  run's maximum.
- batch sizes, compute per ISN per batch, and the fit of the mean ISN compute per batch against
  the batch size (within the point's own batches; a fixed part and a part per query).

Plain Python (no numpy): the driver runs it on GPU hosts whose Python may have no numpy.
"""


def _mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def _line(xs, ys):
    """Least-squares (slope, intercept) of ys against xs."""
    mx, my = _mean(xs), _mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    return slope, my - slope * mx


def summarize(metrics):
    """The summary of metrics["timeline"]["batches"], or None when the run has no timeline."""
    batches = (metrics.get("timeline") or {}).get("batches")
    if not batches:
        return None
    pol = metrics.get("batch_policy", {})
    sizes = [float(b["queries"]) for b in batches]
    first = batches[0]
    compute, isn_encode = [], []
    for b in batches:
        per = [i["end"] - i["start"] for i in b["isn"] if not i.get("missing")]
        enc = [i["encoded"] - i["end"] for i in b["isn"] if not i.get("missing")]
        compute.append(per)
        isn_encode.extend(enc)
    mean_compute = [_mean(c) for c in compute]
    if len(set(sizes)) > 2:
        slope, fixed = _line(sizes, mean_compute)
        fit = {"fixed_ms": float(fixed), "per_query_ms": float(slope)}
    else:
        fit = None
    merge = [b["merged"] - b["merge_start"] for b in batches]
    admission = []
    if not pol.get("qps"):
        for k, b in enumerate(batches[3:], 3):
            merged = [x["merged"] for x in batches[:k] if x["merged"] <= b["cut"]]
            completed = [x["complete"] for x in batches[:k] if x["complete"] <= b["cut"]]
            if merged and completed and max(merged) > max(completed):
                admission.append((b["cut"] - max(merged)) / b["queries"])
    # The first batch's own times per ISN (the run's warm-up), and whether each was the
    # maximum over the run's batches of that stage's per-batch maximum.
    stage = {
        "isn_compute": lambda b, i: i["end"] - i["start"],
        "to_isn": lambda b, i: i["received"] - b["sent"],
        "isn_encode": lambda b, i: i["encoded"] - i["end"],
        "from_isn": lambda b, i: i["arrived"] - i["encoded"],
    }
    present = [[i for i in b["isn"] if not i.get("missing")] for b in batches]
    first_batch = {"queries": int(first["queries"]), "was_max": {}}
    for name, f in stage.items():
        per_batch_max = [max((f(b, i) for i in isn), default=0.0) for b, isn in zip(batches, present)]
        first_batch[f"{name}_ms"] = [round(f(first, i), 4) for i in present[0]]
        first_batch["was_max"][name] = bool(per_batch_max[0] >= max(per_batch_max))
    return {
        "batches_summarized": len(batches),
        "first_cut_ms": float(first["cut"]),
        "closed_loop": not pol.get("qps"),
        "admission_ms_per_query": sorted(admission)[len(admission) // 2] if admission else None,
        "admission_samples": len(admission),
        "cut_to_sent_ms": _mean(b["sent"] - b["cut"] for b in batches),
        "cut_to_sent_per_query_ms": sum(b["sent"] - b["cut"] for b in batches) / sum(sizes),
        "per_query_merge_ms": sum(merge) / sum(sizes),
        "merge_wait_ms": _mean(b["merge_start"] - b["complete"] for b in batches),
        "mean_batch_size": _mean(sizes),
        "isn_compute_mean_ms": _mean(mean_compute),
        "isn_encode_mean_ms": _mean(isn_encode),
        "isn_compute_vs_batch_size": fit,
        "first_batch": first_batch,
    }
