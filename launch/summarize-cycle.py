#!/usr/bin/env python3
"""Where a just-in-time cluster's batch cycle goes, leg by leg, from each run's timeline
(the aggregator's metrics JSON, --metrics; launch/bench-cluster-overhead.sh keeps them in
OUT/runs). Issue 16's question: what an ISN waits between batches, and why.

  launch/summarize-cycle.py RUNS... (metrics files *.json[.gz], or folders of them)

Per run, over its batches (the first 10 and the last 3 left out), in ms:
  cycle     from one batch's cut to the next one's (mean)
  c         an ISN's compute, end - start (mean over ISNs and batches)
  skew      the batch's critical path (first start to last end) less c (mean)
  idle      an ISN's wait from its end of one batch to its start of the next (mean)
and the legs of that wait (medians over ISNs and batches):
  enc       the ISN encodes its answer (end -> encoded)
  back      the answer reaches the aggregator's receive loop (encoded -> arrived)
  cut>1st   the next batch's cut after the batch's first answer arrived (negative: before)
  post      the aggregator encodes and posts the next batch (cut -> sent)
  to-isn    it reaches the ISN (sent -> received)
  dec       the ISN decodes it and starts (received -> start)
and, where the ISNs report them (session 45 on), their own view of `back`'s first part (p50 of
the ISNs' p50s, us):
  isn-post  encoded -> the ISN's MPI thread posted the send (with --answer-thread mpi, the
            default since session 49: the search's end -> posted, the encoding included)
  isn-send  posted -> the send completed (MPI_Test on the ISN)
A `back` far above isn-post + isn-send points at the aggregator's receive loop; a large
isn-post at the ISN's MPI thread waking late (its core taken by other ISNs' workers); a large
isn-send at the transfer itself (Open MPI's rendezvous above the eager limit).
And, where the metrics have them (session 46 on), why an MPI thread polled late, in ms per batch
over the whole run:
  a-delay   the aggregator's main thread runnable without a core (its run delay)
  a-yield   ... in yields that came back 200 us or more after they began
  a-round   ... in its own rounds of 200 us or more between polls (admission, broadcast)
  i-delay   an ISN's MPI thread runnable without a core (the mean over ISNs)
and the aggregator main thread's own work, in ms per batch (main_thread_work_seconds):
  a-admit   admitting queries (reading, resolving, batching)
  a-send    cutting and posting batches
  a-recv    receiving answers (the rounds that received one)
Timestamps from the ISNs are mapped onto the aggregator's clock with offsets measured at start.
"""
import glob
import gzip
import json
import os
import statistics as st
import sys


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def files(args):
    for a in args:
        if os.path.isdir(a):
            yield from sorted(glob.glob(os.path.join(a, "*.json")) +
                              glob.glob(os.path.join(a, "*.json.gz")))
        else:
            yield a


def med(values):
    values = list(values)
    return st.median(values) if values else float("nan")


def isn_view(m, key):
    p50s = [i["stats"][key]["p50"] for i in m.get("isn", [])
            if isinstance(i.get("stats", {}).get(key), dict) and "p50" in i["stats"][key]]
    return med(p50s) if p50s else float("nan")


def per_batch_ms(m, seconds):
    """seconds over the run's batches, in ms; nan where the metrics lack them."""
    batches = m.get("batches", {}).get("count") or 0
    return 1000 * seconds / batches if batches and seconds is not None else float("nan")


def thread_views(m):
    progress, cpu = m.get("progress", {}), m.get("cpu_seconds", {})
    work = m.get("main_thread_work_seconds", {})
    isn_delays = [i["stats"]["cpu_seconds"]["mpi_thread_run_delay"] for i in m.get("isn", [])
                  if "mpi_thread_run_delay" in i.get("stats", {}).get("cpu_seconds", {})]
    return {
        "a-delay": per_batch_ms(m, cpu.get("main_thread_run_delay")),
        "a-yield": per_batch_ms(m, progress.get("long_yield_seconds")),
        "a-round": per_batch_ms(m, progress.get("long_round_seconds")),
        "i-delay": per_batch_ms(m, st.mean(isn_delays) if isn_delays else None),
        "a-admit": per_batch_ms(m, work.get("admission")),
        "a-send": per_batch_ms(m, work.get("cut_and_send")),
        "a-recv": per_batch_ms(m, work.get("receive")),
    }


def summarize(path, several):
    try:
        m = load(path)
    except (OSError, ValueError) as e:
        sys.exit(f"summarize-cycle: cannot read {path}: {e}")
    keys = ("received", "start", "end", "encoded", "arrived")
    # Batches every ISN answered (one that missed its deadline has no times).
    b = [e for e in m.get("timeline", {}).get("batches", [])
         if e.get("isn") and all(all(k in x for k in keys) for x in e["isn"])]
    if len(b) < 16:
        return None
    b = b[10:-3]
    pairs = list(zip(b, b[1:]))
    isns = range(len(b[0]["isn"]))
    c = st.mean(x["end"] - x["start"] for e in b for x in e["isn"])
    crit = st.mean(max(x["end"] for x in e["isn"]) - min(x["start"] for x in e["isn"]) for e in b)
    return {
        "run": (path if several else os.path.basename(path)).replace(".json.gz", "").replace(
            ".json", ""),
        "q/s": m.get("queries_per_second", float("nan")),
        "cycle": (b[-1]["cut"] - b[0]["cut"]) / (len(b) - 1),
        "c": c,
        "skew": crit - c,
        "idle": st.mean(n["isn"][j]["start"] - p["isn"][j]["end"] for p, n in pairs for j in isns),
        "enc": med(x["encoded"] - x["end"] for e in b for x in e["isn"]),
        "back": med(x["arrived"] - x["encoded"] for e in b for x in e["isn"]),
        "cut>1st": med(n["cut"] - min(x["arrived"] for x in p["isn"]) for p, n in pairs),
        "post": med(e["sent"] - e["cut"] for e in b if "sent" in e),
        "to-isn": med(x["received"] - e["sent"] for e in b if "sent" in e for x in e["isn"]),
        "dec": med(x["start"] - x["received"] for e in b for x in e["isn"]),
        "isn-post": isn_view(m, "answer_post_us"),
        "isn-send": isn_view(m, "answer_send_us"),
        **thread_views(m),
    }


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    # Several inputs: each run named by its path, so that runs of the same name stay apart.
    several = len(sys.argv) > 2
    rows = [r for r in (summarize(p, several) for p in files(sys.argv[1:])) if r]
    if not rows:
        sys.exit("summarize-cycle: no metrics file with a timeline of 16 batches or more")
    cols = ["q/s", "cycle", "c", "skew", "idle", "enc", "back", "cut>1st", "post", "to-isn",
            "dec", "isn-post", "isn-send", "a-delay", "a-yield", "a-round", "i-delay", "a-admit",
            "a-send", "a-recv"]
    whole_us = ("isn-post", "isn-send")
    width = max(len(r["run"]) for r in rows)
    print(f"{'run':<{width}} " + " ".join(f"{k:>8}" for k in cols))
    for r in rows:
        cells = [f"{r['q/s']:8.0f}"] + [f"{r[k]:8.0f}" if k in whole_us else f"{r[k]:8.2f}"
                                        for k in cols[1:]]
        print(f"{r['run']:<{width}} " + " ".join(cells))


if __name__ == "__main__":
    main()
