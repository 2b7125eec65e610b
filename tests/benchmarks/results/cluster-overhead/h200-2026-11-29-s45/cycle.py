#!/usr/bin/env python3
"""A batch's cycle at batch 1,024, from each run's timeline (session 43, issue 16).

  python3 cycle.py callA callB ...   (folders holding b1024/runs/*.json[.gz])

Per run, means over the batches (the first 10 and last 3 left out), ms:
  cycle      from one batch's cut to the next one's
  c          an ISN's compute (end - start), mean over the ISNs
  crit       the first ISN's start to the last ISN's end
  cut-first  the next batch's cut after the first ISN's answer arrived (median)
  cut-last   the next batch's cut after the last ISN's answer arrived (median; negative: before)
  idle       an ISN's wait from its end of one batch to its start of the next, mean over the ISNs
"""
import glob, gzip, json, statistics as st, sys

def load(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        return json.load(f)

print("%-6s %-42s %7s %6s %6s %6s %9s %8s %6s" %
      ("call", "run", "q/s", "cycle", "c", "crit", "cut-first", "cut-last", "idle"))
for call in sys.argv[1:]:
    for path in sorted(glob.glob(call + "/b1024/runs/*isns*.json*")):
        m = load(path)
        if "timeline" not in m:
            continue
        b = m["timeline"]["batches"][10:-3]
        cycle = (b[-1]["cut"] - b[0]["cut"]) / (len(b) - 1)
        c = st.mean(st.mean(x["end"] - x["start"] for x in e["isn"]) for e in b)
        crit = st.mean(max(x["end"] for x in e["isn"]) - min(x["start"] for x in e["isn"]) for e in b)
        first = st.median(b[i]["cut"] - min(x["arrived"] for x in b[i - 1]["isn"]) for i in range(1, len(b)))
        last = st.median(b[i]["cut"] - max(x["arrived"] for x in b[i - 1]["isn"]) for i in range(1, len(b)))
        idle = st.mean(st.mean(b[i]["isn"][j]["start"] - b[i - 1]["isn"][j]["end"]
                               for j in range(len(b[i]["isn"]))) for i in range(1, len(b)))
        name = path.split("/")[-1].replace(".json.gz", "").replace(".json", "")
        print("%-6s %-42s %7d %6.2f %6.2f %6.2f %9.2f %8.2f %6.2f" %
              (call, name, m["queries_per_second"], cycle, c, crit, first, last, idle))
