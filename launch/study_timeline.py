"""A compact summary of an aggregator run's per-batch timeline (metrics "timeline.batches").

The timeline holds every batch's cut, send, per-ISN receive/start/end/encode/arrival and merge
times: megabytes per point, so copies kept in the repository leave it out (`launch/study-strip`).
What the simulator (launch/study-simulate) needs from it is summarized here and stored in the
point's `derived.timeline` by the driver, so it survives the stripping:

- first_cut_ms: from the run's start to the first batch's cut. In a closed loop the aggregator
  admits a whole window (batch x (in-flight + 1) queries) before it cuts, so this over the window
  is its admission cost per query (resolving the terms in its vocabulary), on the main thread,
  cold (page faults in the vocabulary; on a busy host, waiting for a core).
- admission_ms_per_query, admission_samples: the same cost in the run's steady state, per query
  of a batch, over the batches whose cut waited for the window's room (a merge end was the last
  event before it, not a receipt that freed a place in the pipeline); the median. From the
  latest of the window's room for the batch's queries (window_room), the main thread's send of
  the previous batch and its last receipt of answers, to the cut: when the main thread began
  admitting them (until session 28 from the last merge end, which on a slowed host gave room to
  the next batch's queries while these were still being admitted).
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
- merge: the merge thread's per-batch time, summarized as common/metrics does.
- slow_stretches (slow_stretches): runs of consecutive batches whose own time (every stage, no
  queueing) was at or above the run's p95 around its slowest 1/64, a host slowed in every stage
  at once; each batch's stage values in them (batch_records), and `rest`: every stage summarized
  again over the other batches. Absent where there is none.

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


STRETCH_STAGES = ("to_isn", "isn_open", "isn_compute", "isn_occupancy", "isn_encode", "from_isn")


def batch_records(batches, per_isn_of, occupancy_per_isn, isn_open_per_isn, cut_to_sent, merge_delay, merge,
                  cut_stall, admitted):
    """Every batch's own stage values, for the slow stretches' replay: the main thread's
    cut-to-sent (and, at a fixed rate, its lateness in cutting), per ISN in rank order the
    message delays, opening, compute, occupancy and encoding, the merge thread's delay and merge,
    the admission cost per query before its cut (closed loop, where its cut waited for the
    window's room), and own_ms: the batch's own time, every stage it went through and no
    queueing (cut-to-sent + the slowest ISN's to-ISN, opening, occupancy, encoding and from-ISN
    + the merge's delay and the merge)."""
    out = []
    for k, b in enumerate(batches):
        ranks = sorted(per_isn_of["isn_compute"][k])
        per = {"to_isn": per_isn_of["to_isn"][k], "isn_open": isn_open_per_isn[k],
               "isn_compute": per_isn_of["isn_compute"][k], "isn_occupancy": occupancy_per_isn[k],
               "isn_encode": per_isn_of["isn_encode"][k], "from_isn": per_isn_of["from_isn"][k]}
        path = max((sum(per[s].get(r, 0.0) for s in STRETCH_STAGES if s != "isn_compute") for r in ranks),
                   default=0.0)
        rec = {"queries": int(b["queries"]), "cut_to_sent": round(cut_to_sent[k], 4),
               "cut_stall": round(cut_stall[k], 4) if cut_stall is not None else None,
               "admission_ms_per_query": round(admitted[k], 6) if k in admitted else None,
               "merge_delay": round(merge_delay[k], 4), "merge": round(merge[k], 4),
               "own_ms": round(cut_to_sent[k] + path + merge_delay[k] + merge[k], 4)}
        rec.update({s: [round(per[s].get(r, 0.0), 4) for r in ranks] for s in STRETCH_STAGES})
        out.append(rec)
    return out


STRETCH_MIN_BATCHES = 20


def slow_stretches(records):
    """The run's host-wide slow stretches: consecutive batches slow in their own time (own_ms:
    every stage, no queueing) together. Seeds: the slowest 1/64 of the batches by own_ms (at
    least one); each extended to its neighbours while their own_ms is at or above the run's p95
    (nearest rank); a stretch is two batches or more (one slow batch alone is the per-stage
    draws' business). The first batch (the warm-up, simulated from its own times) is never in
    one. Returns (p95, [(first, end), ...]) by first batch, end excluded; none in a run of fewer
    than STRETCH_MIN_BATCHES batches (its p95 is its maximum)."""
    n = len(records)
    if n < STRETCH_MIN_BATCHES:
        return None, []
    own = [r["own_ms"] for r in records]
    p95 = sorted(own)[max(1, -(-95 * n // 100)) - 1]
    seeds = sorted(range(1, n), key=lambda k: own[k], reverse=True)[:max(1, n // 64)]
    spans = []
    for k in seeds:
        a, b = k, k + 1
        while a > 1 and own[a - 1] >= p95:
            a -= 1
        while b < n and own[b] >= p95:
            b += 1
        spans.append((a, b))
    merged = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return p95, [(a, b) for a, b in merged if b - a >= 2]


def summarize(metrics):
    """The summary of metrics["timeline"]["batches"], or None when the run has no timeline. With
    `freezes`: the run's host-wide freezes (freeze_spans) and every stage summarized again in
    running time (each stage interval less the frozen time within it)."""
    batches = (metrics.get("timeline") or {}).get("batches")
    if not batches:
        return None
    intervals, records = [], []
    out = _summarize(metrics, batches, _no_freeze, intervals, records)
    threshold = freeze_threshold_ms(metrics)
    episodes = freeze_episodes(intervals, threshold)
    running = _summarize(metrics, batches, _frozen_time(episodes))
    keep = ("isn_occupancy", "isn_open", "merge_delay", "cut_to_sent", "cut_stall", "stage_tails_ms",
            "stage_serial_correlation", "stage_tail_successors", "first_batch", "stages",
            "admission_ms_per_query", "admission_samples", "cut_to_sent_ms", "per_query_merge_ms",
            "isn_compute_mean_ms", "isn_compute_vs_batch_size", "isn_overlap_fraction")
    p95, stretches = slow_stretches(records)
    if stretches:
        # The stretches replayed as measured (launch/study_sim.py SlowStretches), every stage
        # summarized again over the other batches.
        exclude = frozenset(k for a, b in stretches for k in range(a, b))
        rest = _summarize(metrics, batches, _no_freeze, exclude=exclude)
        out["slow_stretches"] = {
            "threshold_ms": p95,
            "batches": len(batches),
            "stretches": [{"first_batch": a, "start_ms": round(batches[a]["cut"], 3), "batches": records[a:b]}
                          for a, b in stretches],
            "rest": {k: rest[k] for k in keep + ("merge", "isn_encode_mean_ms", "merge_wait_ms", "mean_batch_size")},
        }
    out["freezes"] = {
        "threshold_ms": threshold,
        "run_ms": round(max(b["merged"] for b in batches), 3),
        "episodes": episodes,
        "running": {k: running[k] for k in keep},
    }
    return out


def window_room(metrics, batches):
    """room(k): in a closed loop, when the admission window had room for batch k's last query:
    the merge end that brought the queries merged to the batch's last query's place less the
    window (queries are admitted in order and leave the window when their batch's merge ends;
    the window is the run's, else batch size x (pipeline depth + 1), as the aggregator sets it).
    None before the first window filled. Queries answered at admission (no known terms) are in
    no batch and leave the window at once: not counted."""
    pol = metrics.get("batch_policy", {})
    depth = pol.get("max_in_flight") or round((metrics.get("pipeline_depth") or {}).get("p50") or 2)
    window = pol.get("window") or pol.get("batch_size", 1) * (depth + 1)
    ends = sorted((b["merged"], int(b["queries"])) for b in batches)
    times, done = [], []
    total = 0
    for t, q in ends:
        total += q
        times.append(t)
        done.append(total)
    through = []
    total = 0
    for b in batches:
        total += int(b["queries"])
        through.append(total)

    def room(k):
        need = through[k] - window
        if need <= 0:
            return None
        i = bisect.bisect_left(done, need)
        return times[i] if i < len(times) else None

    return room


def _summarize(metrics, batches, frozen, intervals=None, records=None, exclude=frozenset()):
    """summarize's body: every stage value is an interval's length less frozen(start, end); the
    intervals are appended to `intervals` where given, and every batch's own stage values to
    `records` (batch_records). `exclude`: batch indices left out of every summary (the slow
    stretches, replayed as measured; their stage values still computed in the timeline's order,
    so that a batch after one keeps its measured occupancy and opening)."""
    pol = metrics.get("batch_policy", {})

    def kept(values):
        return [v for k, v in enumerate(values) if k not in exclude] if exclude else list(values)

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
        isn_encode.append(enc)
    mean_compute = [_mean(c) for c in compute]
    isn_encode = [x for enc in kept(isn_encode) for x in enc]
    if len(set(kept(sizes))) > 2:
        slope, fixed = _line(kept(sizes), kept(mean_compute))
        fit = {"fixed_ms": float(fixed), "per_query_ms": float(slope)}
    else:
        fit = None
    merge = [span(b["merge_start"], b["merged"], MERGE) for b in batches]
    admission, admitted = [], {}
    if not pol.get("qps"):
        room_for = window_room(metrics, batches)
        for k, b in enumerate(batches[3:], 3):
            merged = [x["merged"] for x in batches[:k] if x["merged"] <= b["cut"]]
            completed = [x["complete"] for x in batches[:k] if x["complete"] <= b["cut"]]
            if merged and completed and max(merged) > max(completed):
                # The main thread admitted this batch's queries from the latest of: the window's
                # room for them, its send of the previous batch, its last receipt of answers.
                # Not from the last merge before the cut: on a slowed host that merge gave room
                # to the next batch's queries while these were still being admitted (the GPU
                # host's 1-ISN saturation stretch: 9-12 ms counted of 17-19).
                room = room_for(k)
                if room is None or room > b["cut"]:
                    room = max(merged)
                start = max(room, batches[k - 1]["sent"], max(completed))
                cost = span(start, b["cut"], MAIN) / b["queries"]
                if records is not None:
                    admitted[k] = cost
                if k not in exclude:
                    admission.append(cost)
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
    isn_open_per_isn = [{} for _ in batches]
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
            isn_open_per_isn[k][r] = max(0.0, span(max(i["received"], free), i["start"], i["rank"]))
            isn_open[k] = max(isn_open[k], isn_open_per_isn[k][r])
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
    tails, serial, successors, stages, per_isn_of = {}, {}, {}, {}, {}
    for name, f in stage.items():
        per_isn = [{i["rank"]: f(b, i) for i in isn} for b, isn in zip(batches, present)]
        per_isn_of[name] = per_isn
        per_batch_max = kept([max(row.values(), default=0.0) for row in per_isn])
        stages[name] = summary(per_batch_max)
        first_batch[f"{name}_ms"] = [round(f(first, i), 4) for i in present[0]]
        first_batch["was_max"][name] = bool(per_batch_max[0] >= max(per_batch_max))
        tails[name] = [round(x, 4) for x in sorted(per_batch_max, reverse=True)[:TAIL_SAMPLES]]
        serial[name] = serial_correlation(per_batch_max)
        if name == "isn_compute":
            successors[name] = same_isn_tail_successors(per_batch_max, kept(per_isn))
        else:
            successors[name] = tail_successors(per_batch_max)
    occupancy = [round(x, 4) for x in occupancy]
    isn_open = [round(x, 4) for x in isn_open]
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
    if records is not None:
        records.extend(batch_records(batches, per_isn_of, occupancy_per_isn, isn_open_per_isn, cut_to_sent,
                                     merge_delay, merge, cut_stall, admitted))
    first_batch["isn_occupancy_ms"] = occupancy[0]
    first_batch["isn_open_ms"] = isn_open[0]
    # Per ISN too: the maximum on every ISN joined one ISN's opening to another's encoding (the
    # 4-ISN run1 point: 11.7 ms of ISN 1 on ISN 2's 19.4 ms encoding; its first batch 11 ms late).
    first_batch["isn_open_per_isn_ms"] = [round(isn_open_per_isn[0].get(i["rank"], 0.0), 4) for i in present[0]]
    all_occupancy_per_isn = occupancy_per_isn
    occupancy, isn_open, merge_delay, cut_to_sent, merge, sizes, occupancy_per_isn = (
        kept(x) for x in (occupancy, isn_open, merge_delay, cut_to_sent, merge, sizes, all_occupancy_per_isn))
    cut_stall = kept(cut_stall) if cut_stall is not None else None
    for name, values in (("isn_occupancy", occupancy), ("isn_open", isn_open), ("merge_delay", merge_delay),
                         ("cut_stall", cut_stall), ("cut_to_sent", cut_to_sent)):
        if values is not None:
            tails[name] = sorted(values, reverse=True)[:TAIL_SAMPLES]
    for name, values in (("isn_occupancy", occupancy), ("isn_open", isn_open), ("merge_delay", merge_delay),
                         ("cut_to_sent", cut_to_sent), ("cut_stall", cut_stall or [])):
        serial[name] = serial_correlation(values)
        successors[name] = tail_successors(values)
    successors["isn_occupancy"] = same_isn_tail_successors(
        occupancy, [{r: round(v, 4) for r, v in row.items()} for row in occupancy_per_isn])
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
        "merge_wait_ms": _mean(kept(b["merge_start"] - b["complete"] for b in batches)),
        "mean_batch_size": _mean(sizes),
        "isn_compute_mean_ms": _mean(kept(mean_compute)),
        "isn_encode_mean_ms": _mean(isn_encode),
        "isn_compute_vs_batch_size": fit,
        "first_batch": first_batch,
        "isn_occupancy": summary(occupancy),
        "merge": summary(merge),
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
