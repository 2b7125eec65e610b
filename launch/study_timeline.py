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
- cut_to_sent_ms: mean time from a cut to the encoded batch handed to MPI (main thread);
  cut_to_sent: its per-batch distribution (a main thread that stalls there, 10 ms now and then on
  the GPU host, holds every query behind it).
- per_query_merge_ms: the merge thread's cost per query answered (mean over batches).
- first_batch: the first batch's per-ISN compute, to-ISN and from-ISN delays and encoding (the
  run's warm-up: first messages, cold caches, the GPU's first kernels), and whether each was the
  run's maximum.
- batch sizes, compute per ISN per batch, and the fit of the mean ISN compute per batch against
  the batch size (within the point's own batches; a fixed part and a part per query).
- isn_occupancy, isn_overlap_fraction: an ISN that pipelines its batches (--scheduler: a batch's
  jobs are queued when it arrives) starts a batch before the previous one has ended, so its
  batches' compute times overlap and add up to more than the time it was busy. A batch's
  occupancy is its compute less the part spent under the previous batch's: end less the later of
  its start and the previous batch's end (so an ISN's ends follow from its starts as those of a
  FIFO server with these service times). The per-batch maximum over the ISNs, summarized as
  common/metrics does; the share of batches that started before the previous one ended.
- isn_open: per batch, the longest over the ISNs from the later of its receipt and the ISN's
  engine thread being free (the previous batch's start or encoding) to its start: decoding the
  message and resolving the terms, and a thread that was not running (measured: 3 ms now and
  then on an idle ISN of the GPU host). merge_delay: the merge thread's like delay (from the later
  of the batch's last answer and the previous merge's end to the merge's start). Summarized as
  common/metrics does.
- stage_serial_correlation: per stage, the lag-1 correlation of the per-batch values' normal
  scores (serial_correlation), for the simulator's draws to keep; stage_tail_successors: the
  levels of the batches that followed the slowest 1/64 (tail_successors).
- stage_tails_ms: the largest per-batch values of each stage (compute, occupancy, message delays,
  encoding), exact: the summaries' 128 order statistics leave the top cell (15 batches of a
  2,000-batch run) between the 127th and the maximum, and drawing uniformly across that cell
  gives a run a dozen batches near the maximum where it had one.

Plain Python (no numpy): the driver runs it on GPU hosts whose Python may have no numpy.
"""


def _mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


import bisect
from statistics import NormalDist

TAIL_SAMPLES = 32
ORDER_STATISTICS = 128  # common/metrics' kSummaryOrderStatistics


def summary(values):
    """common/metrics' summary shape (count, mean, min, max, p50/p95/p99 by nearest rank, and
    up to 128 order statistics, the i-th of m at rank ceil(i n / m))."""
    v = sorted(values)
    n = len(v)
    if not n:
        return {"count": 0}
    m = min(n, ORDER_STATISTICS)

    def rank(p):
        return max(1, min(n, -(-p * n // 100)))  # nearest rank: ceil(p n / 100)

    return {"count": n, "mean": sum(v) / n, "min": v[0], "max": v[-1],
            "p50": v[rank(50) - 1], "p95": v[rank(95) - 1], "p99": v[rank(99) - 1],
            "order_statistics": [v[(i * n + m - 1) // m - 1] for i in range(1, m + 1)]}


def serial_correlation(values):
    """The lag-1 correlation of a per-batch sequence's normal scores (each value replaced by the
    standard normal quantile of its rank): the dependence of a batch's value on the previous
    batch's, whatever the distribution's shape. A pipelining ISN's occupancies alternate (about
    -0.7: a batch that overlapped the previous one occupies the ISN briefly); delays that come in
    bursts follow each other (positive)."""
    n = len(values)
    if n < 8:
        return 0.0
    order = sorted(range(n), key=lambda i: values[i])
    score = [0.0] * n
    normal = NormalDist()
    for r, i in enumerate(order):
        score[i] = normal.inv_cdf((r + 1) / (n + 1))
    a, b = score[:-1], score[1:]
    ma, mb = _mean(a), _mean(b)
    sab = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    saa = sum((x - ma) ** 2 for x in a)
    sbb = sum((y - mb) ** 2 for y in b)
    return round(sab / (saa * sbb) ** 0.5, 4) if saa > 0 and sbb > 0 else 0.0


def tail_successors(values):
    """The levels (rank / n, among the run's values) of the batches that followed the run's
    slowest 1/64 (at least 8 of them, else none): whether a slow batch's successor was slow too
    (a heavy query holding the scheduler's CPU workers, a stalled thread), which the normal
    scores' correlation, dominated by the body of the distribution, does not tell."""
    n = len(values)
    top = n // 64
    if top < 8:
        return []
    order = sorted(range(n), key=lambda i: values[i])
    level = [0.0] * n
    for r, i in enumerate(order):
        level[i] = (r + 1) / n
    return sorted(round(level[i + 1], 4) for i in order[n - top:] if i + 1 < n)


def same_isn_tail_successors(per_batch_max, per_isn):
    """tail_successors for a stage the simulator queues on each ISN (compute, occupancy), with
    several ISNs: the levels, among the per-batch maxima, of the next batch's value on the ISN
    that was slow (every (batch, ISN) whose value is at least the slowest 1/64's smallest
    maximum). The model serves a slow batch on every ISN (the slowest's time, the others' share
    of it) and queues the next batch behind it there; a successor slow on another ISN ran in
    parallel with it (the scheduler's 2- and 4-ISN points at 2,000/s: the slow batch after a
    slow one was on the other ISN in most such pairs), and taken from the maxima it was
    serialized behind it (p99 +26..+38%). per_isn: per batch, {ISN: value}. One ISN:
    tail_successors."""
    n = len(per_batch_max)
    if len({r for row in per_isn for r in row}) <= 1:
        return tail_successors(per_batch_max)
    top = n // 64
    if top < 8:
        return []
    ranked = sorted(per_batch_max)
    threshold = ranked[n - top]
    out = []
    for k in range(n - 1):
        for r, v in per_isn[k].items():
            if v >= threshold and r in per_isn[k + 1]:
                out.append(round(bisect.bisect_right(ranked, per_isn[k + 1][r]) / n, 4))
    return sorted(out)


def _line(xs, ys):
    """Least-squares (slope, intercept) of ys against xs."""
    mx, my = _mean(xs), _mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    return slope, my - slope * mx


def _no_freeze(a, b, who):
    return 0.0


# The processes a stage interval belongs to: the aggregator's main thread (admission, cuts,
# sends, receiving the answers), its merge thread, and the ISNs (by rank, from 1).
MAIN, MERGE = 0, -1
FREEZE_THRESHOLD_MS = 10.0


def freeze_threshold_ms(metrics):
    import os
    return float(os.environ.get("STUDY_FREEZE_MS", FREEZE_THRESHOLD_MS))


def freeze_episodes(intervals, threshold):
    """The run's freezes: its stage intervals (a message in flight, an ISN opening, computing or
    encoding a batch, the main thread cutting, late or receiving, the merge thread late) longer
    than `threshold` ms are times a process did not run; per process their union. Episodes:
    freezes of any processes that overlap or follow each other within `threshold` (a host
    whose other work took the cores, the run's processes stopped in turn). Returns [{"start",
    "length", "frozen": {process: [[offset from the start, length], ...]}}], by start."""
    long = sorted((a, b, who) for a, b, who in intervals if b - a > threshold)
    groups = []
    for a, b, who in long:
        if groups and a <= groups[-1]["end"] + threshold:
            groups[-1]["end"] = max(groups[-1]["end"], b)
            groups[-1]["parts"].append((a, b, who))
        else:
            groups.append({"start": a, "end": b, "parts": [(a, b, who)]})
    episodes = []
    for g in groups:
        frozen = {}
        for a, b, who in sorted(g["parts"]):
            spans = frozen.setdefault(str(who), [])
            if spans and a <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], b)
            else:
                spans.append([a, b])
        episodes.append({"start": round(g["start"], 3), "length": round(g["end"] - g["start"], 3),
                         "frozen": {who: [[round(a - g["start"], 3), round(b - a, 3)] for a, b in spans]
                                    for who, spans in frozen.items()}})
    return episodes


def _frozen_time(episodes):
    """frozen(a, b, process): the time of [a, b] during which the process was frozen."""
    spans = {}
    for e in episodes:
        for who, parts in e["frozen"].items():
            spans.setdefault(who, []).extend((e["start"] + o, e["start"] + o + x) for o, x in parts)
    for s in spans.values():
        s.sort()

    def frozen(a, b, who):
        total = 0.0
        for s, e in spans.get(str(who), ()):
            if s >= b:
                break
            total += max(0.0, min(b, e) - max(a, s))
        return total

    return frozen


def summarize(metrics):
    """The summary of metrics["timeline"]["batches"], or None when the run has no timeline. With
    `freezes`: the run's host-wide freezes (freeze_spans) and every stage summarized again in
    running time (each stage interval less the frozen time within it)."""
    batches = (metrics.get("timeline") or {}).get("batches")
    if not batches:
        return None
    intervals = []
    out = _summarize(metrics, batches, _no_freeze, intervals)
    threshold = freeze_threshold_ms(metrics)
    episodes = freeze_episodes(intervals, threshold)
    running = _summarize(metrics, batches, _frozen_time(episodes))
    keep = ("isn_occupancy", "isn_open", "merge_delay", "cut_to_sent", "cut_stall", "stage_tails_ms",
            "stage_serial_correlation", "stage_tail_successors", "first_batch", "stages",
            "admission_ms_per_query", "admission_samples", "cut_to_sent_ms", "per_query_merge_ms",
            "isn_compute_mean_ms", "isn_compute_vs_batch_size", "isn_overlap_fraction")
    out["freezes"] = {
        "threshold_ms": threshold,
        "run_ms": round(max(b["merged"] for b in batches), 3),
        "episodes": episodes,
        "running": {k: running[k] for k in keep},
    }
    return out


def _summarize(metrics, batches, frozen, intervals=None):
    """summarize's body: every stage value is an interval's length less frozen(start, end); the
    intervals are appended to `intervals` where given."""
    pol = metrics.get("batch_policy", {})

    def span(a, b, who):
        if intervals is not None:
            intervals.append((a, b, who))
        return b - a - frozen(a, b, who)

    sizes = [float(b["queries"]) for b in batches]
    first = batches[0]
    compute, isn_encode = [], []
    for b in batches:
        per = [span(i["start"], i["end"], i["rank"]) for i in b["isn"] if not i.get("missing")]
        enc = [span(i["end"], i["encoded"], i["rank"]) for i in b["isn"] if not i.get("missing")]
        compute.append(per)
        isn_encode.extend(enc)
    mean_compute = [_mean(c) for c in compute]
    if len(set(sizes)) > 2:
        slope, fixed = _line(sizes, mean_compute)
        fit = {"fixed_ms": float(fixed), "per_query_ms": float(slope)}
    else:
        fit = None
    merge = [span(b["merge_start"], b["merged"], MERGE) for b in batches]
    admission = []
    if not pol.get("qps"):
        for k, b in enumerate(batches[3:], 3):
            merged = [x["merged"] for x in batches[:k] if x["merged"] <= b["cut"]]
            completed = [x["complete"] for x in batches[:k] if x["complete"] <= b["cut"]]
            if merged and completed and max(merged) > max(completed):
                admission.append(span(max(merged), b["cut"], MAIN) / b["queries"])
    # The first batch's own times per ISN (the run's warm-up), and whether each was the
    # maximum over the run's batches of that stage's per-batch maximum.
    stage = {
        "isn_compute": lambda b, i: span(i["start"], i["end"], i["rank"]),
        "to_isn": lambda b, i: span(b["sent"], i["received"], i["rank"]),
        "isn_encode": lambda b, i: span(i["end"], i["encoded"], i["rank"]),
        "from_isn": lambda b, i: span(i["encoded"], i["arrived"], MAIN),
    }
    present = [[i for i in b["isn"] if not i.get("missing")] for b in batches]
    # Occupancy (above): each ISN's batches in the order it started them.
    occupancy = [0.0] * len(batches)
    occupancy_per_isn = [{} for _ in batches]
    isn_open = [0.0] * len(batches)
    overlapped = pairs = 0
    previous_end, previous_start, encodes = {}, {}, {}
    for k, isn in enumerate(present):
        for i in isn:
            r = i["rank"]
            before = previous_end.get(r)
            if before is not None:
                pairs += 1
                overlapped += i["start"] < before
            occupancy_per_isn[k][r] = max(0.0, span(max(i["start"], before or i["start"]), i["end"], i["rank"]))
            occupancy[k] = max(occupancy[k], occupancy_per_isn[k][r])
            previous_end[r] = max(i["end"], before or i["end"])
            # The ISN's engine thread was free from its last batch start or encoding before this
            # batch's start (one at a time: the previous batch's encoding).
            free = max([previous_start.get(r, 0.0)] + [e for e in encodes.get(r, []) if e <= i["start"]])
            isn_open[k] = max(isn_open[k], max(0.0, span(max(i["received"], free), i["start"], i["rank"])))
            previous_start[r] = i["start"]
            encodes[r] = [e for e in encodes.get(r, []) if e > i["start"]][-3:] + [i["encoded"]]
    # The merge thread's delay: from the later of the batch's last answer and the previous
    # batch's merge end to this merge's start (a thread that was not running, the run file's
    # writes), per batch.
    merge_delay, merged_before = [], 0.0
    for b in batches:
        merge_delay.append(round(max(0.0, span(max(b["complete"], merged_before), b["merge_start"], MERGE)), 4))
        merged_before = max(merged_before, b["merged"])
    first_batch = {"queries": int(first["queries"]), "was_max": {}}
    tails, serial, successors, stages = {}, {}, {}, {}
    for name, f in stage.items():
        per_isn = [{i["rank"]: f(b, i) for i in isn} for b, isn in zip(batches, present)]
        per_batch_max = [max(row.values(), default=0.0) for row in per_isn]
        stages[name] = summary(per_batch_max)
        first_batch[f"{name}_ms"] = [round(f(first, i), 4) for i in present[0]]
        first_batch["was_max"][name] = bool(per_batch_max[0] >= max(per_batch_max))
        tails[name] = [round(x, 4) for x in sorted(per_batch_max, reverse=True)[:TAIL_SAMPLES]]
        serial[name] = serial_correlation(per_batch_max)
        if name == "isn_compute":
            successors[name] = same_isn_tail_successors(per_batch_max, per_isn)
        else:
            successors[name] = tail_successors(per_batch_max)
    occupancy = [round(x, 4) for x in occupancy]
    tails["isn_occupancy"] = sorted(occupancy, reverse=True)[:TAIL_SAMPLES]
    isn_open = [round(x, 4) for x in isn_open]
    tails["isn_open"] = sorted(isn_open, reverse=True)[:TAIL_SAMPLES]
    tails["merge_delay"] = sorted(merge_delay, reverse=True)[:TAIL_SAMPLES]
    cut_to_sent = [round(span(b["cut"], b["sent"], MAIN), 4) for b in batches]
    # At a fixed rate, query i arrives at i / rate: a batch is due when its oldest query has
    # waited max_wait or it is full, once a place in the pipeline is free and the previous batch
    # has been sent; the main thread's lateness past that (its polling sleeps; a thread that
    # was not running) is cut_stall. Only where every query went into a batch (no query
    # answered at admission), so that the batches' first queries are known.
    cut_stall = None
    q = metrics.get("queries", {})
    rate = pol.get("qps") or 0.0
    if rate and not q.get("no_known_terms") and not q.get("cache_hits"):
        depth = pol.get("max_in_flight") or 0
        wait_ms = pol.get("max_wait_us", 0) / 1000.0
        cut_stall, queued = [], 0
        for k, b in enumerate(batches):
            ready = min(queued / rate * 1000.0 + wait_ms,
                        (queued + pol.get("batch_size", 1) - 1) / rate * 1000.0)
            if depth and k >= depth:
                ready = max(ready, batches[k - depth]["complete"])
            if k:
                ready = max(ready, batches[k - 1]["sent"])
            cut_stall.append(round(max(0.0, span(ready, b["cut"], MAIN)), 4))
            queued += int(b["queries"])
        tails["cut_stall"] = sorted(cut_stall, reverse=True)[:TAIL_SAMPLES]
    tails["cut_to_sent"] = sorted(cut_to_sent, reverse=True)[:TAIL_SAMPLES]
    for name, values in (("isn_occupancy", occupancy), ("isn_open", isn_open), ("merge_delay", merge_delay),
                         ("cut_to_sent", cut_to_sent), ("cut_stall", cut_stall or [])):
        serial[name] = serial_correlation(values)
        successors[name] = tail_successors(values)
    successors["isn_occupancy"] = same_isn_tail_successors(
        occupancy, [{r: round(v, 4) for r, v in row.items()} for row in occupancy_per_isn])
    first_batch["isn_occupancy_ms"] = occupancy[0]
    first_batch["isn_open_ms"] = isn_open[0]
    for name, values in (("isn_occupancy", occupancy), ("isn_open", isn_open)):
        first_batch["was_max"][name] = bool(values[0] >= max(values))
    return {
        "batches_summarized": len(batches),
        "first_cut_ms": float(first["cut"]),
        "closed_loop": not pol.get("qps"),
        "admission_ms_per_query": sorted(admission)[len(admission) // 2] if admission else None,
        "admission_samples": len(admission),
        "cut_to_sent_ms": _mean(cut_to_sent),
        "cut_to_sent_per_query_ms": sum(cut_to_sent) / sum(sizes),
        "per_query_merge_ms": sum(merge) / sum(sizes),
        "merge_wait_ms": _mean(b["merge_start"] - b["complete"] for b in batches),
        "mean_batch_size": _mean(sizes),
        "isn_compute_mean_ms": _mean(mean_compute),
        "isn_encode_mean_ms": _mean(isn_encode),
        "isn_compute_vs_batch_size": fit,
        "first_batch": first_batch,
        "isn_occupancy": summary(occupancy),
        "isn_overlap_fraction": overlapped / pairs if pairs else 0.0,
        "isn_open": summary(isn_open),
        "merge_delay": summary(merge_delay),
        "cut_to_sent": summary(cut_to_sent),
        "cut_stall": summary(cut_stall) if cut_stall is not None else None,
        "stage_tails_ms": tails,
        "stage_serial_correlation": serial,
        "stage_tail_successors": successors,
        # The per-batch maxima over the ISNs of the aggregator's stages (as in its stages_ms).
        "stages": stages,
    }
