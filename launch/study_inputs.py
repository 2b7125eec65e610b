"""The simulator's inputs from a study's measured points (launch/study-simulate).

Every input is a statistic of the point's own measurements: the aggregator's stage summaries
(metrics stages_ms) and the summary of its per-batch timeline (derived.timeline,
launch/study_timeline.py); the one taken across points is the cost line's slope (cost_models).
"""

import json

import numpy as np

import study_timeline
from study_sim import Draw, quantile_table, simulate, zero_draw



# Elements of the model left out (--without), to measure each one's share of the accuracy.
MODEL_ELEMENTS = {
    "pipelining": "a pipelining ISN's batches served for their compute, one at a time",
    "tails": "the stages' exact largest values (the summaries' top cell interpolated to the maximum)",
    "stalls": "the ISN's opening of a batch, the merge thread's delay, the cut's send and (at a "
              "fixed rate) the main thread's lateness in cutting, drawn per batch (0, 0, the send's "
              "mean and 0)",
    "serial": "the stages' serial dependence (every batch's draws independent)",
    "freezes": "the host-wide freezes (every stage drawn as measured, the frozen time in it, per batch)",
    "stretches": "the host-wide slow stretches (their batches' stages drawn independently with the others')",
    "receipt": "the answers' receipt by the main thread after its admission and cuts (the merge "
               "starts when the last answer is in, whatever the main thread is doing)",
    "warmup": "the warm-up's slow stretch (one that began at the run's second batch) replayed after the "
              "first batch, where it was measured (at a random place like the others)",
}
WITHOUT = set()

def configuration_key(p):
    """Points that differ only in arrival rate and query count share a service-cost model."""
    c = dict(p["config"])
    for k in ("qps", "queries"):
        c.pop(k, None)
    return json.dumps(c, sort_keys=True)


def service_summary(p):
    """(summary, tail, pipelined): the distribution of a batch's service at its slowest ISN. An
    ISN that runs one batch at a time serves a batch for its compute (stage isn_compute_max); one
    that pipelines its batches (--scheduler: the next batch's jobs are queued while the previous
    batch's run) overlaps them, and its compute times add up to more than the time it was busy:
    there a batch's service is its occupancy (launch/study_timeline.py: its compute less the part
    under the previous batch's), the per-batch values from the timeline summary, or, for a point
    summarized before it had them, the compute scaled by the ISNs' busy time over their summed
    compute."""
    m = p["metrics"]
    tl = model_timeline(p) or {}
    tails = {} if "tails" in WITHOUT else tl.get("stage_tails_ms") or {}
    if "pipelining" in WITHOUT:
        return stages_of(p)["isn_compute_max"], tails.get("isn_compute"), False
    if tl.get("isn_overlap_fraction", 0.0) > 0 and (tl.get("isn_occupancy") or {}).get("count"):
        return tl["isn_occupancy"], tails.get("isn_occupancy"), True
    mx = stages_of(p)["isn_compute_max"]
    summed = sum(i["compute_seconds"] for i in m["isn"])
    busy = sum(i.get("stats", {}).get("compute_seconds", i["compute_seconds"]) for i in m["isn"])
    if not tl.get("isn_occupancy") and summed > 0 and busy < 0.99 * summed:
        r = busy / summed
        scaled = {k: (v * r if isinstance(v, float) else [x * r for x in v] if k == "order_statistics" else v)
                  for k, v in mx.items()}
        return scaled, None, True
    return mx, tails.get("isn_compute"), False


def cost_models(points):
    """Per point: the batch's slowest-ISN compute as fixed + per_query x size (ms), fitted over
    the points of its configuration at different mean batch sizes (saturation and a fixed rate:
    a small batch costs mostly the fixed part). The line is moved to pass through the point's own
    mean, so each point keeps its measured mean cost. A point alone in its configuration is
    priced per query (fixed part 0)."""
    groups = {}
    for pid, p in points.items():
        m = p["metrics"]
        groups.setdefault(configuration_key(p), []).append(
            (pid, m["batches"]["size"].get("mean", 1.0), service_summary(p)[0].get("mean", 0.0)))
    models = {}
    for members in groups.values():
        xs = np.array([x for _, x, _ in members])
        ys = np.array([y for _, _, y in members])
        slope = None
        if len(members) > 1 and xs.max() > 1.5 * xs.min():
            slope = max(0.0, float(np.polyfit(xs, ys, 1)[0]))
        for pid, x, y in members:
            fixed = 0.0 if slope is None else max(0.0, y - slope * x)
            models[pid] = (fixed, (y - fixed) / max(1.0, x))
    return models


def timeline_of(p):
    return p["derived"].get("timeline") or study_timeline.summarize(p["metrics"])


# Freezes are modelled only where asked for (study-simulate --freezes): their threshold is an
# absolute 10 ms, right for the 2-core host's small batches, but a GPU host's 512-query CPU-engine
# batches take longer than that when nothing is frozen (NOTES-study.md, session 25).
WITH = set()


def uses_freezes(p):
    """Whether the point is modelled with its host-wide freezes: asked for, and its timeline
    summary has them (summarized since they existed)."""
    return ("freezes" in WITH and "freezes" not in WITHOUT
            and bool(((timeline_of(p) or {}).get("freezes") or {}).get("episodes")))


def uses_stretches(p):
    """Whether the point is modelled with its slow stretches (launch/study_timeline.py
    slow_stretches; the default since session 27): not left out, not a point modelled with its
    freezes (which model the host's stops their own way), and its timeline summary has them."""
    return ("stretches" not in WITHOUT and not uses_freezes(p)
            and bool(((timeline_of(p) or {}).get("slow_stretches") or {}).get("stretches")))


def model_timeline(p):
    """The timeline summary the model draws from: with freezes, every stage in running time (the
    frozen time taken out: the freezes add it back, once, to whatever meets them); with slow
    stretches, every stage over the batches outside them (the stretches are replayed whole)."""
    tl = timeline_of(p)
    if uses_freezes(p):
        merged = dict(tl)
        merged.update(tl["freezes"]["running"])
        return merged
    if uses_stretches(p):
        merged = dict(tl)
        merged.update(tl["slow_stretches"]["rest"])
        return merged
    return tl


# The aggregator's per-batch stages (metrics stages_ms) that the timeline summary also holds.
TIMELINE_STAGES = {"isn_compute_max": "isn_compute", "to_isn": "to_isn", "from_isn": "from_isn",
                   "isn_encode": "isn_encode"}


def stages_of(p):
    """The point's stage summaries: the aggregator's, or with freezes their running times."""
    st = dict(p["metrics"]["stages_ms"])
    if uses_freezes(p) or uses_stretches(p):
        st.update({k: model_timeline(p)["stages"][v] for k, v in TIMELINE_STAGES.items()})
    if uses_stretches(p):
        st["merge"] = model_timeline(p)["merge"]
    return st


def stretch_input(p):
    """The simulator's slow stretches: the measured batches of each and the run's batch count,
    or None."""
    if not uses_stretches(p):
        return None
    ss = timeline_of(p)["slow_stretches"]
    return {"batches": ss["batches"], "stretches": ss["stretches"]}


def freeze_input(p):
    """The simulator's freezes: the measured lengths and the run's length, or None."""
    if not uses_freezes(p):
        return None
    fz = timeline_of(p)["freezes"]
    return {"episodes": fz["episodes"], "run_ms": fz["run_ms"]}


def admission_cost(p, pol):
    """The aggregator's admission cost per query (ms) in a closed-loop run's steady state (the
    timeline's, from at least 5 batches whose cut waited for the window), else from its first
    cut (it admits a whole window before cutting; cold). None where the point cannot tell (open
    loop, or no timeline)."""
    tl = model_timeline(p)
    if not tl or not tl.get("closed_loop"):
        return None
    if tl.get("admission_ms_per_query") is not None and tl.get("admission_samples", 0) >= 5:
        return tl["admission_ms_per_query"]
    return first_admission_cost(p, pol)


def first_admission_cost(p, pol):
    """The first admission's cost per query (ms): the first cut over the window it admitted."""
    tl = model_timeline(p)
    if not tl or not tl.get("closed_loop"):
        return None
    return tl["first_cut_ms"] / max(1, min(pol["window"], p["metrics"]["queries"]["run"]))


def send_cost(p, points, tl):
    """The main thread's time from a cut to the batch handed to MPI: from the timeline, else the
    encode stage; points measured before both existed take the broadcast stage's median at a
    fixed rate with the same ISNs (there the ISNs are idle and every send completes at once, so
    it is the aggregator's own work; at saturation it includes the wait for busy ISNs)."""
    if tl:
        return tl["cut_to_sent_ms"]
    st = p["metrics"]["stages_ms"]
    if "encode" in st:
        return st["encode"].get("mean", 0.0)
    c = p["config"]
    twins = [q for q in points.values() if q["config"]["qps"] and q["config"]["isns"] == c["isns"]
             and q["config"]["engine"] == c["engine"]] or [p]
    return min(q["metrics"]["stages_ms"]["broadcast"].get("p50", 0.0) for q in twins)


def point_inputs(p, points, cost, alpha_default):
    m = p["metrics"]
    st = stages_of(p)
    n = m["isns"]
    pol = effective_policy(m)
    q = m["queries"]
    size = m["batches"]["size"].get("mean", pol["batch_size"]) or 1.0
    instant = (q["no_known_terms"] + q.get("cache_hits", 0)) / max(1, q["run"])
    mx, mx_tail, pipelined = service_summary(p)
    tl = model_timeline(p)
    tails = {} if "tails" in WITHOUT else (tl or {}).get("stage_tails_ms") or {}
    serial, successors = ({}, {}) if "serial" in WITHOUT else (
        (tl or {}).get("stage_serial_correlation") or {}, (tl or {}).get("stage_tail_successors") or {})
    alpha = admission_cost(p, pol)
    inp = {
        "isns": n,
        "policy": pol,
        "queries": q["run"],
        "k": m["k"],
        "instant_fraction": instant,
        "admission_ms_per_query": alpha if alpha is not None else alpha_default,
        # The first admission as measured (cold), where known.
        "first_admission_ms_per_query": first_admission_cost(p, pol),
        "admission_measured": alpha is not None,
        # The cut's encode and hand-over to MPI, on the main thread.
        "send_ms": (send_cost(p, points, tl), 0.0),
        "cost_model": cost,
        "service_shape": Draw(quantile_table(mx, 1.0 / mx["mean"] if mx.get("mean") else 1.0, mx_tail),
                              rho=serial.get("isn_occupancy" if pipelined else "isn_compute"),
                              successors=successors.get("isn_occupancy" if pipelined else "isn_compute")),
        # A pipelining ISN takes the next batch when this one's service ends, not after its
        # encoding (another thread's).
        "pipelined": pipelined,
        "merge_ms": st["merge"].get("mean", 0.0),
        "mean_batch_size": size,
        "decode_ms_per_query": st.get("decode", {}).get("mean", 0.0) / size,
        "round_trip_ms": st["round_trip"].get("mean", 0.0),
        "fanout_ratio": fanout_ratio(m, st, model_timeline(p) if uses_freezes(p) or uses_stretches(p) else None),
        "freezes": freeze_input(p),
        "slow_stretches": stretch_input(p),
        # A slow stretch that began at the second batch (the warm-up going on) replayed there.
        "warmup_in_place": "warmup" not in WITHOUT,
        # The merge of a batch whose answers came during an admission after the main thread's receipt.
        "receipt_at_main": "receipt" not in WITHOUT,
    }
    # The other ISNs' compute against the slowest's, so that the mean is the measured one.
    inp["others_ratio"] = (float(np.clip((n / inp["fanout_ratio"] - 1) / (n - 1), 0.0, 1.0))
                           if n > 1 else 1.0)
    merge_per_q = inp["merge_ms"] / size
    inp["merge_ms_per_query"] = lambda isns, v=merge_per_q: v
    if "to_isn" in st and "from_isn" in st:
        inp["to_isn"] = Draw(quantile_table(st["to_isn"], tail=tails.get("to_isn")), rho=serial.get("to_isn"), successors=successors.get("to_isn"))
        inp["from_isn"] = Draw(quantile_table(st["from_isn"], tail=tails.get("from_isn")), rho=serial.get("from_isn"), successors=successors.get("from_isn"))
        inp["isn_encode"] = (Draw(quantile_table(st["isn_encode"], tail=tails.get("isn_encode")),
                                  rho=serial.get("isn_encode"), successors=successors.get("isn_encode"))
                             if "isn_encode" in st else zero_draw())
        inp["legacy_messages"] = False
    else:
        inp["isn_open"] = inp["merge_delay"] = None
        # Points measured before the message stages existed: the ISN's time per batch outside
        # the engine from its wall, compute and idle times, and one message latency fitted to
        # the mean round trip (fit_legacy_messages) with the shape of the gather overhead.
        isns = m["isn"]
        overhead = np.mean([max(0.0, (m["seconds"] - i["compute_seconds"] - i["idle_seconds"]) * 1000
                                / max(1, i["batches_answered"])) for i in isns])
        inp["isn_encode"] = Draw((np.array([0.0, 1.0]), np.array([overhead, overhead]), 0))
        inp["legacy_messages"] = True
    if not inp["legacy_messages"] and "stalls" not in WITHOUT:
        # The ISN's opening of a batch and the merge thread's delay: from the timeline summary
        # (0 for points measured before it had them).
        inp["isn_open"], inp["merge_delay"] = (
            Draw(quantile_table(tl[k], tail=tails.get(k)), rho=serial.get(k), successors=successors.get(k))
            if tl and (tl.get(k) or {}).get("count") else None
            for k in ("isn_open", "merge_delay"))
    if tl and (tl.get("cut_to_sent") or {}).get("count") and "stalls" not in WITHOUT:
        # The cut's encoding and hand-over drawn per batch (its stalls), not its mean.
        inp["send_draw"] = Draw(quantile_table(tl["cut_to_sent"], tail=tails.get("cut_to_sent")),
                                rho=serial.get("cut_to_sent"), successors=successors.get("cut_to_sent"))
    if tl and (tl.get("cut_stall") or {}).get("count") and "stalls" not in WITHOUT:
        # At a fixed rate: the main thread's lateness in cutting a due batch.
        inp["cut_stall"] = Draw(quantile_table(tl["cut_stall"], tail=tails.get("cut_stall")),
                                rho=serial.get("cut_stall"), successors=successors.get("cut_stall"))
    if tl and tl.get("first_batch") and not inp["legacy_messages"]:
        inp["first_batch"] = tl["first_batch"]
    return inp


def fanout_ratio(m, st, tl=None):
    """The mean slowest ISN's compute per batch against the mean ISN's (with freezes, both in
    running time, from the timeline)."""
    per_isn = (tl["isn_compute_mean_ms"] if tl else
               np.mean([i["compute_seconds"] * 1000 / max(1, i["batches_answered"]) for i in m["isn"]]))
    mx = st["isn_compute_max"].get("mean", 0.0)
    return mx / per_isn if per_isn > 0 else 1.0


def fit_sigma(n, ratio, rng_seed=1):
    """The log-normal sigma whose expected max of n draws (mean 1) equals ratio x the mean."""
    if n <= 1 or ratio <= 1.0:
        return 0.0
    z = np.random.default_rng(rng_seed).standard_normal((4000, n))
    lo, hi = 0.0, 3.0
    for _ in range(25):
        s = (lo + hi) / 2
        r = np.exp(s * z - s * s / 2).max(axis=1).mean()
        lo, hi = (s, hi) if r < ratio else (lo, s)
    return (lo + hi) / 2


def gather_shape(p):
    """The shape (mean 1) of the point's own gather overhead (round trip less the slowest ISN's
    compute) for points measured before the message stages existed. Its own, not a fixed-rate
    twin's: on a shared host the twin's bursts of interference, scaled to the saturation run's
    mean, put a tail into every message that the run did not have."""
    g = p["metrics"]["stages_ms"]["gather_overhead"]
    levels, values, count = quantile_table(g)
    mean = g.get("mean", 0.0)
    if mean <= 0:
        return levels, np.ones(len(levels)), count
    return levels, values / mean, count


def fit_legacy_messages(inp, shape, net, repeats):
    """For a point without message stages: the per-message latency (ms, times `shape`) for
    which the simulated mean round trip equals the measured one."""
    levels, values, count = shape

    def rt(x):
        inp["to_isn"] = inp["from_isn"] = Draw((levels, values * x, count), per_isn=True)
        return np.mean([simulate(inp, inp["isns"], net, seed=s)["round_trip_ms"] for s in range(repeats)])

    target = inp["round_trip_ms"]
    lo, hi = 0.0, max(1e-3, target)
    if rt(lo) >= target:
        hi = 0.0
    else:
        for _ in range(14):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if rt(mid) < target else (lo, mid)
    x = (lo + hi) / 2
    inp["to_isn"] = inp["from_isn"] = Draw((levels, values * x, count), per_isn=True)
    return x


def effective_policy(m):
    """The batch policy the aggregator actually ran: with automatic pipeline depth
    (max_in_flight 0) the depth it settled on (its median), and the admission window that
    follows from it when none was given (batch_size * (depth + 1), as the aggregator does)."""
    pol = dict(m["batch_policy"])
    if not pol.get("max_in_flight"):
        depth = m.get("pipeline_depth") or {}
        chosen = depth.get("p50") or depth.get("mean") or pol.get("max_depth") or 2
        pol["max_in_flight"] = max(1, int(round(chosen)))
    if not pol.get("window"):
        pol["window"] = pol["batch_size"] * (pol["max_in_flight"] + 1)
    return pol
