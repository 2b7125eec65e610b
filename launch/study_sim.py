"""The discrete-event model behind launch/study-simulate: the aggregator's loop and N ISNs.

What it models (README, "Scaling studies: the simulator"), following aggregator/aggregator.cpp:

- The aggregator's main thread is one server. Each round it admits queries (closed loop: up to
  the window, batch x (in-flight + 1), less the queries waiting, in flight or being merged; open
  loop: every query whose arrival time has passed), paying its admission cost per query
  (resolving the terms), then cuts batches while fewer than `max_in_flight` are unanswered (a
  batch is due at `batch_size` queries, when its oldest waited `max_wait_us`, or at the end),
  paying its cut-to-send cost per batch.
- A batch crosses to every ISN (the to-ISN delay), waits in the ISN's queue (first come first
  served), is computed (the service model below), encoded, and crosses back (the from-ISN delay,
  which includes the aggregator's polling). Between hosts the network's latency and the
  aggregator link's bandwidth come on top, the N copies serialized on the link both ways.
- A batch whose answers are all in goes to the merge thread, a second server, once the main
  thread has received them: its loop receives after admitting and cutting, so an answer that
  came during an admission waits for its end (on a slowed host an admission takes 18 ms: the
  merge that would free the window's room then comes after it, and the next batch is cut
  before more queries are admitted, as measured). Its queries' latencies are taken when their
  merge starts (after decoding, as aggregator/batch_merger.cpp does), and their window places
  are freed when it ends.
- Service: the batch's cost is `fixed + per_query x size` (ms; fitted over the points of the same
  configuration at different batch sizes, e.g. saturation and a fixed rate, so small open-loop
  batches are not priced per query at the saturation rate), times a draw from the measured shape
  of the per-batch slowest-ISN compute (mean 1). Each ISN draws from the distribution F^(1/N),
  where F is the measured distribution of the slowest of the N: the slowest of N draws then has
  exactly the measured distribution (validation). For prediction past one host, ISN i's time is
  the batch's cost x a log-normal shard-to-shard factor (sigma fitted to the measured
  multi-ISN points), so the tail of the slowest of N grows with N.
- The message delays and the ISN's encoding are drawn the same way from their measured
  per-batch maxima (stages to_isn, from_isn, isn_encode). Points measured before those stages
  existed use one software message latency fitted to the mean round trip and the shape of the
  gather overhead.
- Host-wide freezes (a shared host whose other work takes the cores: every process of the run
  stopped at once, for up to hundreds of ms): the measured freezes (launch/study_timeline.py,
  freeze_spans) are placed at random times in each simulated run, and every activity (admission,
  cut, send, messages, the ISNs' opening, compute and encoding, the merge) runs in running time:
  a stage that meets a freeze ends that much later, and nothing starts during one. The stages'
  draws are then their running times (the frozen time taken out), so that a freeze counts once
  and stops the whole pipeline, as it did.
- Host-wide slow stretches (the default; study-simulate --without stretches leaves them out): a
  host slowed, not stopped, for several consecutive batches, every stage of them slow at once
  (the GPU host's 1-ISN saturation runs: compute 3.5x, from-ISN 10-40x, merge 10x and the next
  admission 4x for 4-5 batches). Independent per-stage draws do not join them, and with 98
  batches a run has too few slow batches for the tail successors. The measured stretches
  (launch/study_timeline.py slow_stretches) are replayed whole, every stage of every batch in
  them and the admission before their cuts, from a random batch of each simulated run; the
  other batches draw from the distributions less the stretches' batches.
"""

import bisect

import math
from collections import deque
from statistics import NormalDist

import numpy as np


def quantile_table(summary, scale=1.0, tail=None):
    """(levels, values, count) of a common/metrics summary: the minimum at level 0, the i-th of m
    order statistics at i/m (the last is the maximum); draws interpolate between them. count:
    the samples summarized. The top cell (from the (m-1)-th order statistic to the maximum) holds
    count/m samples of which the maximum is one: with `tail` (the largest values, exact, from the
    timeline summary) those values are the knots there, each at its own rank, so that a run
    draws about one batch near the maximum, as it measured one. Without (points measured before
    the timeline), the cell is interpolated linearly up to the maximum, which gives a run count/m
    batches spread up to the maximum: too many where the maximum was one outlier (a fixed-rate
    GPU point's p99 came out +59% so), about right on a host whose delays are often long."""
    order = list(summary.get("order_statistics") or [])
    count = int(summary.get("count", 0) or 0)
    if not order:
        v = summary.get("mean", 0.0)
        return np.array([0.0, 1.0]), np.array([v, v]) * scale, count
    values = [summary.get("min", order[0])] + order
    levels = list(np.arange(0, len(values)) / (len(values) - 1))
    tail = sorted(tail or [], reverse=True)[:count]
    if count > len(order) >= 2 and tail:
        # The j-th largest (j from 1) at rank count - j + 1; the order statistics below the
        # smallest of them stay.
        lowest = (count - len(tail) + 1) / count
        keep = [i for i, lv in enumerate(levels) if lv < lowest]
        levels = [levels[i] for i in keep] + [(count - j) / count for j in range(len(tail) - 1, -1, -1)]
        values = [values[i] for i in keep] + tail[::-1]
    return np.array(levels), np.array(values, dtype=float) * scale, count


class Draw:
    """Draws from a quantile table. `of_max` n: a draw of one of n whose maximum has the table's
    distribution (inverse CDF at v^n). `without_max()`: the same table less its top sample (when
    the run's first batch, simulated from its own measured times, was the maximum). `rho`: the
    measured lag-1 correlation of the per-batch values' normal scores, and `successors`: the
    measured levels of the batches that followed the slowest 1/64, both kept by SerialDraws."""

    def __init__(self, table, top=1.0, per_isn=False, rho=0.0, successors=None):
        self.levels, self.values, self.count = table
        self.top = top
        self.per_isn = per_isn  # the table is one ISN's distribution: of_max does not apply
        self.rho = float(rho or 0.0)
        self.successors = np.array(successors or [], dtype=float)
        # A level above this is one of the slowest 1/64 (whose successors were measured).
        self.tail_level = 1.0 - len(self.successors) / self.count if len(self.successors) and self.count else 1.0

    def without_max(self):
        return Draw((self.levels, self.values, self.count),
                    1.0 - 1.0 / self.count if self.count > 1 else 1.0, self.per_isn, self.rho,
                    list(self.successors))

    def __call__(self, rng, n=1, of_max=1):
        v = rng.random(n)
        if of_max > 1 and not self.per_isn:
            v = v ** of_max
        return np.interp(v * self.top, self.levels, self.values)

    def at(self, u, rng, n=1, of_max=1):
        """The draw whose batch-level value is at level u: with of_max n, one ISN (at random) at
        u and the others from the same distribution below it (level u x U^n)."""
        if n == 1 or of_max <= 1 or self.per_isn:
            return np.interp(np.full(n, u) * self.top, self.levels, self.values)
        v = u * rng.random(n) ** of_max
        v[rng.integers(n)] = u
        return np.interp(v * self.top, self.levels, self.values)


class SerialDraws:
    """One simulated run's draws that keep each stage's measured serial dependence: the batch's
    level is Phi(z), z an AR(1) series of standard normals with the stage's rho (a Gaussian
    copula: the marginal stays the measured distribution); after a batch among the slowest 1/64,
    the next batch's level is one of the measured successors' levels. Draws without either, and
    per-ISN independent draws past one host, are plain."""

    normal = NormalDist()

    def __init__(self, rng):
        self.rng = rng
        self.state = {}  # id(draw) -> (z, level) of the previous batch

    def __call__(self, draw, n=1, of_max=1):
        if (not draw.rho and not len(draw.successors)) or (n > 1 and of_max <= 1):
            return draw(self.rng, n, of_max)
        e = self.rng.standard_normal()
        previous = self.state.get(id(draw))
        if previous is not None and previous[1] > draw.tail_level:
            u = float(self.rng.choice(draw.successors))
            z = self.normal.inv_cdf(min(max(u - 0.5 / draw.count, 1e-9), 1 - 1e-9))
        else:
            z = e if previous is None else draw.rho * previous[0] + math.sqrt(1.0 - draw.rho * draw.rho) * e
            u = 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))
        self.state[id(draw)] = (z, u)
        return draw.at(u, self.rng, n, of_max)


class Freezes:
    """One simulated run's freezes: each measured episode at a uniformly random start within the
    measured run's length, its processes' frozen spans at their measured offsets in it (merged
    per process where episodes overlap). warp(process)(t, d): the time at which d ms of that
    process's running time starting at t ends (a start inside a freeze waits for its end);
    process "0" the aggregator's main thread, "-1" its merge thread, "1".."n" the ISNs."""

    def __init__(self, episodes, run_ms, rng):
        spans = {}
        for e, s in zip(episodes, rng.random(len(episodes)) * run_ms):
            for who, parts in e["frozen"].items():
                spans.setdefault(who, []).extend((s + o, s + o + x) for o, x in parts)
        self.spans = {}
        for who, parts in spans.items():
            merged = []
            for a, b in sorted(parts):
                if merged and a <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], b)
                else:
                    merged.append([a, b])
            self.spans[who] = ([a for a, _ in merged], [b for _, b in merged])

    def warp(self, who):
        starts, ends = self.spans.get(who, ([], []))
        if not starts:
            return lambda t, d=0.0: t + d

        def one(t, d):
            i = bisect.bisect_right(starts, t) - 1
            if i >= 0 and t < ends[i]:
                t = ends[i]
            i += 1
            end = t + d
            while i < len(starts) and starts[i] < end:
                end += ends[i] - starts[i]
                i += 1
            return end

        def warp(t, d=0.0):
            if isinstance(t, np.ndarray) or isinstance(d, np.ndarray):
                t, d = np.broadcast_arrays(np.asarray(t, dtype=float), np.asarray(d, dtype=float))
                return np.array([one(float(a), float(b)) for a, b in zip(t, d)])
            return one(t, d)

        return warp

    def warp_isns(self, n):
        """warp for the n ISNs at once: element i of t and d in ISN i + 1's running time."""
        each = [self.warp(str(i + 1)) for i in range(n)]

        def warp(t, d=0.0):
            t, d = np.broadcast_arrays(np.asarray(t, dtype=float), np.asarray(d, dtype=float))
            return np.array([w(float(a), float(b)) for w, a, b in zip(each, t, d)])

        return warp


class SlowStretches:
    """One simulated run's slow stretches (launch/study_timeline.py slow_stretches: consecutive
    batches that were slow in every stage together, a host-wide slow state that independent
    per-stage draws do not make): each measured stretch replayed as measured, every stage of
    every batch in it and the admission before its cuts, from a uniformly random batch of the
    measured run's (never the first: the warm-up is simulated from its own times; a later
    stretch that would overlap an earlier one follows it). A stretch that began at the measured
    run's second batch is the warm-up going on (the first batch is never in one; cold caches,
    first messages): it is replayed there, after the first batch, where it was measured; at a
    random place as well as in the warm-up's queueing it counted twice (cpu-small run1's 4-ISN
    saturation point: p99 +25%). A shorter simulated run (a prediction of fewer queries) meets
    the stretches that fall within its batches. at(k): batch k's measured record, or None."""

    def __init__(self, inp, rng, warmup_in_place=True):
        self.records = {}
        n = inp["batches"]
        stretches = inp["stretches"]
        starts = [1 + int(rng.integers(0, max(1, n - len(s["batches"])))) for s in stretches]
        if warmup_in_place:
            starts = [1 if s.get("first_batch") == 1 else x for x, s in zip(starts, stretches)]
        free = 1
        for start, s in sorted(zip(starts, stretches), key=lambda x: x[0]):
            start = max(start, free)
            for j, rec in enumerate(s["batches"]):
                self.records[start + j] = rec
            free = start + len(s["batches"])

    def at(self, k):
        return self.records.get(k)


def _run(t, d=0.0):
    """A process that is never frozen: d ms from t."""
    return t + d


def zero_draw():
    return Draw((np.array([0.0, 1.0]), np.array([0.0, 0.0]), 0))


def simulate(inp, n, net, queries=None, qps=None, seed=7, sigma=None):
    """One simulated run. inp: see study-simulate's point_inputs. n: ISNs. net: network on top
    of the measured delays (latency_ms, bandwidth in bytes/ms, per_send_ms, bytes per query and
    per result). sigma: None for validation (ISN draws from the measured maximum's
    distribution), else the log-normal shard-to-shard variation (prediction). Returns throughput,
    latency percentiles (nearest rank), the mean round trip and the mean batch size."""
    rng = np.random.default_rng(seed)
    draw = SerialDraws(rng)
    pol = inp["policy"]
    B, F, W = pol["batch_size"], pol["max_in_flight"], pol["window"]
    max_wait = pol["max_wait_us"] / 1e3
    Q = queries or inp["queries"]
    rate = pol["qps"] if qps is None else qps
    alpha = inp["admission_ms_per_query"]
    send_fixed, send_per_q = inp["send_ms"]
    fixed, per_q = inp["cost_model"]
    shape = inp["service_shape"]
    to_isn, from_isn, isn_encode = inp["to_isn"], inp["from_isn"], inp["isn_encode"]
    # Stages a point's summary may lack (None: 0, and no random numbers drawn, so that such a
    # point simulates as it did before they existed).
    isn_open = inp.get("isn_open")
    merge_delay = inp.get("merge_delay")
    pipelined = inp.get("pipelined", False)
    send_draw = inp.get("send_draw")
    # The main thread's lateness in cutting a batch that is due (fixed rate): None, not drawn.
    cut_stall = inp.get("cut_stall") if rate else None
    stall_until = None
    merge_per_q = inp["merge_ms_per_query"](n)
    decode_per_q = inp["decode_ms_per_query"]
    lat = net["latency_ms"]
    tx_q = net["query_bytes"] / net["bandwidth_bytes_per_ms"]
    rx_q = net["result_bytes_per_query"] / net["bandwidth_bytes_per_ms"]
    per_send = net["per_send_ms"] * n
    of_max = n if sigma is None else 1
    # Validation: the slowest ISN of a batch draws from the measured slowest-ISN distribution,
    # the others take `others` x its time, so that the mean ISN's compute is the measured one
    # (ISNs sharing a host or a GPU answer the same queries: their times go together).
    others = inp.get("others_ratio", 1.0)
    batches_cut = 0
    # The run's first batch: its measured times where the timeline was summarized (the warm-up:
    # first messages, cold caches, the GPU's first kernels), the other batches drawing from the
    # rest of each distribution. Measured with n ISNs; another n takes their values in turn.
    first_batch = inp.get("first_batch")
    if first_batch:
        first_cost = fixed + per_q * first_batch["queries"]
        shape, to_isn, from_isn, isn_encode, isn_open = (
            d.without_max() if d is not None and first_batch["was_max"].get(k) else d
            for k, d in (("isn_occupancy" if pipelined else "isn_compute", shape),
                         ("to_isn", to_isn), ("from_isn", from_isn),
                         ("isn_encode", isn_encode), ("isn_open", isn_open)))

    def per_isn(values):
        return np.resize(np.array(values, dtype=float), n)

    isn_free = np.zeros(n)   # the ISN's engine thread free (one batch at a time: its encoding done)
    isn_end = np.zeros(n)    # a pipelining ISN's last service end
    link_out_free = link_in_free = 0.0
    merge_free = 0.0
    merging = deque()        # (merge end, queries) of batches handed to the merge thread
    pending = deque()        # arrival times of admitted queries not yet in a batch
    in_flight = []           # [answers all in, arrival times] of batches sent
    instant = rng.random(Q) < inp["instant_fraction"]
    freezes = inp.get("freezes")
    if freezes:
        fz = Freezes(freezes["episodes"], freezes["run_ms"], rng)
        warp, warp_merge, warp_isn = fz.warp("0"), fz.warp("-1"), fz.warp_isns(n)
    else:
        warp = warp_merge = warp_isn = _run
    receipt_at_main = inp.get("receipt_at_main", True)
    stretches = (SlowStretches(inp["slow_stretches"], rng, inp.get("warmup_in_place", True))
                 if inp.get("slow_stretches") else None)

    def replayed(k):
        """Batch k's measured stage values where a slow stretch is replayed there, else None."""
        return stretches.at(k) if stretches else None

    latencies, round_trips, sizes = [], [], []
    next_q = answered = 0
    t = last = 0.0

    def cut(now):
        nonlocal link_out_free, link_in_free, batches_cut
        first = batches_cut == 0
        batches_cut += 1
        size = min(B, len(pending))
        arrivals = [pending.popleft() for _ in range(size)]
        rec = replayed(batches_cut - 1)
        send = rec["cut_to_sent"] if rec else float(draw(send_draw)[0]) if send_draw else send_fixed
        now = warp(now, send + send_per_q * size + per_send)
        cost = (fixed + per_q * size)
        if sigma is None:
            c = np.full(n, cost * draw(shape)[0] * others)
            c[rng.integers(n)] /= others
        else:
            c = cost * draw(shape)[0] * np.exp(sigma * rng.standard_normal(n) - sigma * sigma / 2)
        if first and first_batch:
            # The run's first batch as measured (its warm-up), the cost scaled to this size.
            c = per_isn(first_batch["isn_compute_ms"]) * cost / first_cost
        if rec:
            # A slow stretch's batch as measured, its service scaled to this size.
            c = per_isn(rec["isn_occupancy" if pipelined else "isn_compute"]) * cost / (fixed + per_q * rec["queries"])
        sent = np.maximum(now, link_out_free) + tx_q * size * np.arange(1, n + 1)
        link_out_free = float(sent[-1])
        warm = first and first_batch
        received = warp_isn(sent + lat, per_isn(first_batch["to_isn_ms"]) if warm else per_isn(rec["to_isn"]) if rec
                            else draw(to_isn, n, of_max))
        # The first batch's opening per ISN where the summary has it (else its maximum on every ISN).
        opened = (per_isn(first_batch.get("isn_open_per_isn_ms") or [first_batch.get("isn_open_ms", 0.0)]) if warm else per_isn(rec["isn_open"]) if rec
                  else draw(isn_open, n, of_max) if isn_open else 0.0)
        start = warp_isn(np.maximum(received, isn_free), opened)
        # A pipelining ISN's service follows its previous batch's (occupancy: the part not
        # overlapped); its engine thread takes the next batch once this one's jobs are queued.
        served = warp_isn(np.maximum(start, isn_end) if pipelined else start, c)
        done = warp_isn(served, per_isn(first_batch["isn_encode_ms"]) if warm else per_isn(rec["isn_encode"]) if rec
                        else draw(isn_encode, n, of_max))
        isn_end[:] = served
        isn_free[:] = start if pipelined else done
        ready = np.sort(warp(done + lat, per_isn(first_batch["from_isn_ms"]) if warm else per_isn(rec["from_isn"]) if rec
                             else draw(from_isn, n, of_max)))
        # A FIFO link taking `ready` (ascending) at rx each ends at
        # max(free + n rx, max over j of ready_j + (n - j) rx), j counted from 0.
        rx = rx_q * size
        t_in = max(link_in_free + n * rx, float(np.max(ready + rx * np.arange(n, 0, -1))))
        link_in_free = t_in
        round_trips.append(t_in - now)
        sizes.append(size)
        return now, [t_in, arrivals, rec]

    while answered < Q:
        while merging and merging[0][0] <= t:
            merging.popleft()
        progressed = False
        # Admission.
        admitted = 0
        if rate:
            while next_q < Q and next_q / rate * 1e3 <= t:
                if instant[next_q]:
                    latencies.append(0.0)
                    answered += 1
                else:
                    pending.append(next_q / rate * 1e3)
                next_q += 1
                admitted += 1
        else:
            room = W - len(pending) - sum(len(b[1]) for b in in_flight) - sum(m[1] for m in merging)
            while next_q < Q and room > 0:
                if instant[next_q]:
                    latencies.append(0.0)
                    answered += 1
                else:
                    pending.append(t)
                    room -= 1
                next_q += 1
                admitted += 1
        if admitted:
            first_admission = inp.get("first_admission_ms_per_query")
            # Before a slow stretch's cut: its measured admission, where its cut waited for it.
            upcoming = replayed(batches_cut)
            slow = upcoming["admission_ms_per_query"] if upcoming else None
            t = warp(t, admitted * (first_admission if t == 0.0 and first_admission is not None
                                    else slow if slow is not None else alpha))
            progressed = True
        exhausted = next_q >= Q
        # Cuts (at a fixed rate, each after the main thread's measured lateness).
        while len(in_flight) < F and pending and (
                len(pending) >= B or exhausted or t >= pending[0] + max_wait - 1e-12):
            if cut_stall is not None and stall_until is None:
                upcoming = replayed(batches_cut)
                late = upcoming["cut_stall"] if upcoming and upcoming["cut_stall"] is not None else None
                stall_until = warp(t, late if late is not None else float(draw(cut_stall)[0]))
            if stall_until is not None and t < stall_until - 1e-12:
                break
            stall_until = None
            t, batch = cut(t)
            in_flight.append(batch)
            progressed = True
        # Completions, to the merge thread.
        in_flight.sort(key=lambda b: b[0])
        while in_flight and in_flight[0][0] <= t:
            done, arrivals, rec = in_flight.pop(0)
            delay = rec["merge_delay"] if rec else float(draw(merge_delay)[0]) if merge_delay else 0.0
            # The main thread receives answers after its admission and cuts (its loop's order):
            # an answer that came during them goes to the merge thread at their end, and the
            # window's room its merge frees comes after that, not during the admission.
            received = t if receipt_at_main else done
            start = warp_merge(max(done, received, merge_free), delay)
            recorded = warp_merge(start, decode_per_q * len(arrivals))
            latencies.extend(recorded - a for a in arrivals)
            merge_free = warp_merge(start, (rec["merge"] / rec["queries"] if rec else merge_per_q) * len(arrivals))
            merging.append((merge_free, len(arrivals)))
            answered += len(arrivals)
            last = max(last, merge_free)
            progressed = True
        if answered >= Q:
            break
        if progressed:
            continue
        candidates = []
        if in_flight:
            candidates.append(in_flight[0][0])
        if rate and next_q < Q:
            candidates.append(next_q / rate * 1e3)
        if stall_until is not None:
            candidates.append(stall_until)  # a due batch waits for the main thread's lateness
        elif pending and len(in_flight) < F:
            candidates.append(pending[0] + max_wait)
        if not rate and next_q < Q and merging:
            candidates.append(merging[0][0])  # the merge thread's end frees window places
        if not candidates:
            break
        t = max(t, min(candidates))
    last = max(last, merge_free)
    lat_sorted = np.sort(np.array(latencies))

    def pct(p):
        if len(lat_sorted) == 0:
            return float("nan")
        return float(lat_sorted[min(len(lat_sorted), max(1, math.ceil(p / 100 * len(lat_sorted) - 1e-9))) - 1])

    seconds = last / 1e3 if last > 0 else float("nan")
    return {"queries_per_second": Q / seconds, "p50_ms": pct(50), "p95_ms": pct(95),
            "p99_ms": pct(99), "seconds": seconds,
            "round_trip_ms": float(np.mean(round_trips)) if round_trips else 0.0,
            "mean_batch_size": float(np.mean(sizes)) if sizes else 0.0}
