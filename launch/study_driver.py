#!/usr/bin/python3
"""The scaling-study driver behind launch/study.sh (README, "Scaling studies").

For every point of a spec: build or re-use the index (one synthetic index per collection size,
re-sharded with `gpusearch partition`), run the cluster with launch/cluster.sh, check its run
against the in-process reference engine's (`gpusearch compare-runs`), and write one JSON per
point into OUT/points/. A point whose JSON exists with the same settings is skipped, so an
interrupted study resumes where it stopped. Ends with the report (launch/study-report).
"""

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import study_spec
import study_timeline

ROOT = Path(__file__).resolve().parent.parent


def log(msg):
    print(msg, flush=True)


def fail(msg, code=2):
    print(f"study: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


def machine_description():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpus = []
    if shutil.which("nvidia-smi"):
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
        gpus = [l.strip() for l in r.stdout.splitlines() if l.strip()]
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"host": platform.node(), "cpu": cpu, "cores": os.cpu_count(),
            "memory_gib": round(mem, 1), "gpus": gpus, "kernel": platform.release()}


def run_logged(cmd, log_path, timeout_s=None, stdin=None):
    """Runs cmd in its own process group (so a timeout ends mpirun and every rank), output to
    log_path; returns the exit code (124 on timeout)."""
    with open(log_path, "a") as out:
        out.write("+ " + " ".join(str(c) for c in cmd) + "\n")
        out.flush()
        p = subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT,
                             stdin=stdin or subprocess.DEVNULL, start_new_session=True)
        try:
            return p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            return 124


def tail(path, n=15):
    try:
        return "".join(open(path, errors="replace").readlines()[-n:])
    except OSError:
        return ""


class Study:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out).resolve()
        self.build = Path(args.build_dir).resolve()
        self.gpusearch = self.build / "bin" / "gpusearch"
        os.environ["GPUSEARCH_BUILD_DIR"] = str(self.build)  # launch/cluster.sh runs these binaries
        try:
            self.spec, self.points, self.series = study_spec.load(args.spec)
        except study_spec.SpecError as e:
            fail(str(e))
        self.cache = Path(args.index_cache).resolve() if args.index_cache else self.out / "indexes"
        self.machine = machine_description()
        coll = self.spec["collection"]
        self.synthetic = coll.get("synthetic")
        self.fixed_index = Path(coll["index"]).resolve() if "index" in coll else None
        if self.fixed_index and not (self.fixed_index / "manifest.json").is_file():
            fail(f"collection.index: no index at {self.fixed_index} (no manifest.json)")
        if self.spec.get("hostfile") and not Path(self.spec["hostfile"]).is_file():
            fail(f"hostfile: cannot read {self.spec['hostfile']}")
        self.check_program_flags()

    def check_program_flags(self):
        """A spec axis the built programs do not know is an error before anything runs."""
        if any(p["scheduler"] for p in self.points.values()):
            h = subprocess.run([self.build / "bin" / "gpusearch-isn", "--help"],
                               capture_output=True, text=True)
            if "--scheduler" not in h.stdout + h.stderr:
                fail("the spec sets 'scheduler', but this build's gpusearch-isn has no --scheduler flag")

    # ---- indexes -------------------------------------------------------------------------------

    def synthetic_base(self, docs):
        """The 1-shard synthetic index with `docs` documents (built once, cached)."""
        seed = self.synthetic.get("seed", 7)
        params = self.synthetic.get("params", {})
        digest = ""
        if params:
            digest = "-" + hashlib.sha1(json.dumps(params, sort_keys=True).encode()).hexdigest()[:8]
        d = self.cache / f"syn-seed{seed}{digest}-docs{docs}"
        if (d / "manifest.json").is_file():
            return d
        self.cache.mkdir(parents=True, exist_ok=True)
        tmp = d.with_name(d.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        spec = ",".join([f"docs={docs}", f"seed={seed}"] + [f"{k}={v}" for k, v in params.items()])
        log(f"  building the synthetic index {d.name} ({docs} documents)")
        t0 = time.time()
        logf = self.cache / f"{d.name}.log"
        rc = run_logged([self.gpusearch, "-q", "index", "--synthetic", spec, "--out", tmp,
                         "--report", self.cache / f"{d.name}.report.json"], logf)
        if rc != 0:
            fail(f"building {d} failed (exit {rc}):\n{tail(logf)}", 1)
        tmp.rename(d)  # complete indexes only: an interrupted build starts over
        log(f"  built {d.name} in {time.time() - t0:.1f} s")
        return d

    def base_index(self, p):
        return self.fixed_index if self.fixed_index else self.synthetic_base(p["total_docs"])

    def index_for(self, p):
        """The index with exactly p['isns'] shards: the base one or a re-sharded copy."""
        base = self.base_index(p)
        shards = len(json.load(open(base / "manifest.json"))["shards"])
        if shards == p["isns"]:
            return base
        d = self.cache / f"{base.name}-s{p['isns']}"
        if (d / "manifest.json").is_file():
            return d
        self.cache.mkdir(parents=True, exist_ok=True)
        tmp = d.with_name(d.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        log(f"  re-sharding {base.name} into {p['isns']} shards (gpusearch partition)")
        logf = self.cache / f"{d.name}.log"
        rc = run_logged([self.gpusearch, "-q", "partition", "--index", base, "--out", tmp,
                         "--shards", p["isns"]], logf)
        if rc != 0:
            fail(f"re-sharding {base} into {p['isns']} failed (exit {rc}):\n{tail(logf)}", 1)
        tmp.rename(d)
        return d

    # ---- queries and the reference -------------------------------------------------------------

    def prepare_queries(self):
        """Checks the query source. "test" and "train" are the logs the synthetic generator
        writes beside each collection: every collection size is queried with its own log (a log
        drawn from another collection's vocabulary leaves many queries with no known term and
        changes the work per query, which would confound partition size with workload)."""
        q = self.spec.get("queries", {})
        self.query_source = q.get("source", "test")
        self.query_count = q.get("count", 1000)
        if self.query_source not in ("test", "train") and not Path(self.query_source).is_file():
            fail(f"queries.source: cannot read {self.query_source} (or use test or train)")
        self.queries_dir = self.out / "queries"
        self.queries_dir.mkdir(parents=True, exist_ok=True)

    def queries_for(self, p):
        """The point's query file: the first N queries (N = the point's queries, else
        queries.count) of its collection's log or of the spec's file."""
        n = min(p["queries"] or self.query_count, self.query_count)
        if self.query_source in ("test", "train"):
            base = self.base_index(p)
            src = base / f"queries.{self.query_source}.tsv"
            if not src.is_file():
                fail(f"queries.source {self.query_source!r}: the index {base} has no {src.name}")
            name = f"{base.name}-{self.query_source}-{n}.tsv"
        else:
            src = Path(self.query_source)
            name = f"{src.stem}-{n}.tsv"
        path = self.queries_dir / name
        lines = [l for l in open(src, errors="replace").read().splitlines() if l.strip()][:n]
        if len(lines) < n:
            log(f"  note: {src} has {len(lines)} queries, fewer than the {n} asked for")
        text = "\n".join(lines) + "\n"
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        return path

    def reference_run(self, p):
        """The exhaustive in-process reference engine's run on the point's collection (any
        sharding gives the same answers, so one per collection, mode, k and scoring)."""
        base = self.base_index(p)
        ref_dir = self.out / "reference"
        ref_dir.mkdir(parents=True, exist_ok=True)
        queries = self.queries_for(p)
        path = ref_dir / f"{base.name}-{p['mode']}-k{p['k']}-{p['scoring']}-{queries.stem}.run"
        if path.is_file():
            return path
        log(f"  reference run: {base.name}, {p['mode']}, k {p['k']}, {p['scoring']}")
        logf = path.with_suffix(".log")
        tmp = path.with_suffix(".run.tmp")
        rc = run_logged([self.gpusearch, "-q", "search", "--engine", "reference", "--index", base,
                         "--queries", queries, "--mode", p["mode"], "--k", p["k"],
                         "--scoring", p["scoring"], "--run", tmp, "--no-verify"], logf)
        if rc != 0:
            fail(f"the reference run on {base} failed (exit {rc}):\n{tail(logf)}", 1)
        tmp.rename(path)
        return path

    # ---- one point -----------------------------------------------------------------------------

    def cluster_command(self, p, index, run, metrics):
        cmd = [ROOT / "launch" / "cluster.sh", "--index", index, "--queries", self.queries_for(p),
               "--isns", p["isns"], "--gpus-per-isn", p["gpus_per_isn"], "--mode", p["mode"],
               "--k", p["k"], "--run", run, "--metrics", metrics, "--engine", p["engine"],
               "--scoring", p["scoring"], "--batch-size", p["batch_size"], "--max-wait-us",
               p["max_wait_us"], "--max-in-flight", p["max_in_flight"], "--cache-entries",
               p["cache_entries"], "--no-verify", "-q"]
        if p["qps"]:
            cmd += ["--qps", p["qps"]]
        else:
            # Closed loop: the study's points (and launch/study_sim.py's model of them) admit
            # a window of queries ahead at a fixed depth, as before the just-in-time default.
            cmd += ["--admission", "window"]
        if p["cost_buckets"]:
            cmd += ["--cost-buckets"]
        if p["algorithm"]:
            cmd += ["--algorithm", p["algorithm"]]
        if p["scheduler"]:
            cmd += ["--scheduler", p["scheduler"]]
            train = self.scheduler_training_queries(p)
            if train:
                cmd += ["--scheduler-train", train]
        if p["threads_per_isn"]:
            cmd += ["--threads", p["threads_per_isn"]]
        if self.spec.get("hostfile"):
            cmd += ["--hostfile", Path(self.spec["hostfile"]).resolve()]
        return cmd + p["extra"]

    def scheduler_training_queries(self, p):
        """The training log for a scheduler that predicts costs: the collection's own training
        log (the ISN looks for INDEX/queries.train.tsv, which a re-sharded index lacks), unless
        the point's extra flags name one."""
        if p["scheduler"] not in ("queues", "best-serial") or "--scheduler-train" in p["extra"]:
            return None
        train = self.base_index(p) / "queries.train.tsv"
        if not train.is_file():
            fail(f"point with scheduler {p['scheduler']}: {train} does not exist; give "
                 f"\"extra\": [\"--scheduler-train\", FILE] (training queries for its cost predictor)")
        return train

    def run_point(self, pid, p):
        index = self.index_for(p)
        ref = self.reference_run(p)
        run_dir = self.out / "runs" / pid
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        repeats = []
        for r in range(self.spec.get("repeat", 1)):
            run, metrics, logf = run_dir / f"run{r}.txt", run_dir / f"metrics{r}.json", run_dir / f"log{r}.txt"
            cmd = self.cluster_command(p, index, run, metrics)
            t0 = time.time()
            rc = run_logged(cmd, logf, timeout_s=self.args.point_timeout)
            wall = time.time() - t0
            if rc != 0 or not metrics.is_file():
                fail(f"point {pid}: the cluster failed (exit {rc}{', timed out' if rc == 124 else ''}); "
                     f"log {logf}:\n{tail(logf)}", 1)
            cmp_log = run_dir / f"compare{r}.txt"
            exact = run_logged([self.gpusearch, "compare-runs", ref, run], cmp_log) == 0
            m = json.load(open(metrics))
            repeats.append({"metrics": m, "wall_seconds": wall, "exact": exact,
                            "compare": tail(cmp_log, 3).strip(), "command": [str(c) for c in cmd]})
        # With repeats, the median-throughput run stands for the point; all are kept.
        order = sorted(range(len(repeats)), key=lambda i: repeats[i]["metrics"]["queries_per_second"])
        chosen = repeats[order[len(order) // 2]]
        shards = json.load(open(index / "manifest.json"))["shards"]
        docs = sum(s["num_docs"] for s in shards)
        return {
            "study": self.spec["name"],
            "point": pid,
            "config": p,
            "series": [s["name"] for s in self.series if pid in s["point_ids"]],
            "machine": self.machine,
            "index": {"path": str(index), "shards": len(shards), "docs": docs,
                      "docs_per_shard": [s["num_docs"] for s in shards]},
            "queries_file": str(self.queries_for(p)),
            "reference_run": str(ref),
            "exact": all(x["exact"] for x in repeats),
            "compare": chosen["compare"],
            "command": chosen["command"],
            "wall_seconds": chosen["wall_seconds"],
            "derived": derive(chosen["metrics"], p),
            "metrics": chosen["metrics"],
            "repeats": [{"queries_per_second": x["metrics"]["queries_per_second"],
                         "latency_ms": {k: x["metrics"]["latency_ms"].get(k) for k in ("p50", "p95", "p99")},
                         "exact": x["exact"]} for x in repeats],
            "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    def run(self):
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "points").mkdir(exist_ok=True)
        shutil.copy(self.args.spec, self.out / "spec.json")
        ids = list(self.points)
        if self.args.only:
            ids = [i for i in ids if self.args.only in i]
            if not ids:
                fail(f"--only {self.args.only!r} matches no point of the spec")
        log(f"study {self.spec['name']}: {len(ids)} point(s) in {len(self.series)} series, "
            f"output {self.out}; machine: {self.machine['host']}, {self.machine['cores']} cores "
            f"{self.machine['cpu']}, {self.machine['memory_gib']} GiB"
            + (f", GPUs: {'; '.join(self.machine['gpus'])}" if self.machine["gpus"] else ", no GPU"))
        self.prepare_queries()
        log(f"  queries: the first {self.query_count} of "
            + (f"each collection's {self.query_source} log" if self.query_source in ("test", "train")
               else self.query_source) + f", in {self.queries_dir}")
        done_times, inexact = [], []
        t_study = time.time()
        for n, pid in enumerate(ids, 1):
            p = self.points[pid]
            path = self.out / "points" / f"{pid}.json"
            head = f"[{n}/{len(ids)}] {pid}"
            if path.is_file():
                try:
                    old = json.load(open(path))
                except json.JSONDecodeError:
                    old = {}
                if old.get("config") == p:
                    log(f"{head}: done before, skipped")
                    if not old.get("exact", False):
                        inexact.append(pid)
                    continue
                fail(f"{path} was written with other settings than the spec's for this point; "
                     f"remove it or use a new --out")
            desc = (f"{p['isns']} ISN(s), {p['docs_per_shard']} docs/shard, {p['engine']} engine, "
                    f"batch {p['batch_size']}, " + (f"{p['qps']:g} arrivals/s" if p["qps"] else "closed loop"))
            log(f"{head}: {desc}")
            t0 = time.time()
            result = self.run_point(pid, p)
            tmp = path.with_suffix(".json.tmp")
            with open(tmp, "w") as f:
                json.dump(result, f, indent=1)
            tmp.rename(path)  # a point exists only once complete: an interrupted one reruns
            dt = time.time() - t0
            done_times.append(dt)
            left = len(ids) - n
            eta = statistics.mean(done_times) * left
            d = result["derived"]
            if not result["exact"]:
                inexact.append(pid)
            log(f"    {d['queries_per_second']:.1f} q/s, latency p50 {d['latency_ms']['p50']:.1f} "
                f"p99 {d['latency_ms']['p99']:.1f} ms, {'exact' if result['exact'] else 'ANSWERS DIFFER'}"
                f"{' (an ISN fell back to the CPU engine)' if d['isn_fallback'] else ''}; "
                f"{dt:.1f} s; {left} left, about {eta / 60:.1f} min")
        log(f"study {self.spec['name']}: {len(ids)} point(s) in {(time.time() - t_study) / 60:.1f} min")
        if not self.args.no_report:
            rc = subprocess.run([ROOT / "launch" / "study-report", self.out]).returncode
            if rc != 0:
                fail("the report failed", 1)
        if inexact:
            fail(f"{len(inexact)} point(s) differ from the reference: {', '.join(inexact)} "
                 f"(see runs/<point>/compare*.txt)", 1)


def derive(m, p):
    """What the report needs from one aggregator metrics JSON: throughput, latency, cost per
    1,000 queries and the aggregator's overheads."""
    q = max(1, m["queries"]["run"])
    seconds = m["seconds"]
    isns = m.get("isn", [])
    hosts = {i.get("hello", {}).get("host") for i in isns} - {None}
    gpus = {(i["hello"].get("host"), i["hello"].get("gpu_device")) for i in isns
            if str(i.get("hello", {}).get("engine", "")).startswith("gpu")}
    stages = m.get("stages_ms", {})

    def mean(name):
        return stages.get(name, {}).get("mean", 0.0)

    batches = m.get("batches", {}).get("count", 0)
    return {
        "queries": m["queries"]["run"],
        "seconds": seconds,
        "queries_per_second": m["queries_per_second"],
        "latency_ms": {k: m["latency_ms"].get(k) for k in ("mean", "p50", "p95", "p99", "max")},
        "hosts": max(1, len(hosts)),
        "gpus": len(gpus),
        # Cost: every host that ran an ISN (the aggregator shares one) and every GPU an ISN used,
        # for the run's wall time, per 1,000 answered queries.
        "node_seconds_per_1k_queries": max(1, len(hosts)) * seconds / q * 1000,
        "isn_seconds_per_1k_queries": len(isns) * seconds / q * 1000,
        "gpu_seconds_per_1k_queries": len(gpus) * seconds / q * 1000,
        "batches": batches,
        "aggregator_ms_per_batch": {
            "merge": mean("merge"),
            "broadcast": mean("broadcast"),
            "gather_overhead": mean("gather_overhead"),
            "isn_compute_max": mean("isn_compute_max"),
            "round_trip": mean("round_trip"),
        },
        "merge_share_of_wall": mean("merge") * batches / 1000 / seconds if seconds > 0 else 0,
        # An ISN whose engine failed finished on the CPU fallback: its point is no GPU point.
        "isn_fallback": any(i.get("fallback_seen", False) for i in isns),
        "isn_compute_seconds": [i.get("compute_seconds", 0) for i in isns],
        "isn_idle_seconds": [i.get("idle_seconds", 0) for i in isns],
        # What the simulator needs from the per-batch timeline, kept when copies drop it.
        "timeline": study_timeline.summarize(m),
        "scheduler": scheduler_summary(isns),
    }


def scheduler_summary(isns):
    """With --scheduler: the share of queries each processor ran, over all ISNs (the ISNs'
    `stats.scheduler.processors`), and the predictor's report of the first ISN. None without."""
    jobs, policy, predictor = {}, None, None
    for i in isns:
        sched = (i.get("stats") or {}).get("scheduler")
        if not sched:
            continue
        policy = sched.get("policy", policy)
        predictor = predictor or sched.get("predictor")
        for name, proc in (sched.get("processors") or {}).items():
            jobs[name] = jobs.get(name, 0) + proc.get("jobs", 0)
    if policy is None:
        return None
    total = sum(jobs.values())
    return {"policy": policy, "jobs": jobs,
            "share": {k: v / total for k, v in jobs.items()} if total else {},
            "predictor": predictor}


def main():
    ap = argparse.ArgumentParser(prog="launch/study.sh", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec", help="study spec (JSON; launch/studies/*.json)")
    ap.add_argument("--out", required=True, help="output folder: points/, runs/, report.md, *.png")
    ap.add_argument("--index-cache", help="where indexes are built and kept (default OUT/indexes)")
    ap.add_argument("--only", help="run only the points whose id contains this text")
    ap.add_argument("--no-report", action="store_true", help="skip launch/study-report at the end")
    ap.add_argument("--point-timeout", type=float, default=1800, help="seconds per cluster run")
    ap.add_argument("--build-dir", default=os.environ.get("GPUSEARCH_BUILD_DIR", str(ROOT / "build")))
    args = ap.parse_args()
    Study(args).run()


if __name__ == "__main__":
    main()
