"""Study specs: reading, checking and expanding them into points (launch/study.sh).

A spec is JSON (README, "Scaling studies"). Every key is checked against the lists below and a
bad one is reported with its place in the spec, so a typo never silently falls back to a
default. Expansion turns every series into concrete points; points with the same settings are
one run, shared by every series that names them (weak-scaling N = 1 is also the first point of
vertical partition growth).
"""

import hashlib
import json
import math

# Axes of a point, with their defaults. `None` means "not passed; the programs' default".
POINT_DEFAULTS = {
    "isns": 1,                # ISN processes (ranks 1..N); one shard each
    "gpus_per_isn": 1,        # --gpus-per-isn (GPU engine)
    "docs_per_shard": None,   # synthetic collections: the index has isns * docs_per_shard docs
    "docs": None,             # ... or this many documents in total, cut into `isns` shards
    "engine": "cpu",          # reference | cpu | gpu
    "algorithm": None,        # --algorithm
    "scheduler": None,        # --scheduler (ISN; needs a build that has it)
    "batch_size": 64,
    "max_wait_us": 2000,
    "max_in_flight": 2,
    "cost_buckets": False,
    "cache_entries": 0,
    "qps": 0,                 # arrival rate (queries/s); 0: closed loop, i.e. saturation
    "mode": "and-or",
    "k": 10,
    "scoring": "bm25",
    "threads_per_isn": None,  # --threads; default cores / isns on one host
    "queries": None,          # the first N of the study's queries; default all (queries.count)
    "extra": [],              # more cluster.sh flags, verbatim
}
TOP_KEYS = {"name", "description", "collection", "queries", "defaults", "series", "hostfile",
            "machine_note", "repeat"}
COLLECTION_KEYS = {"synthetic", "index"}
SYNTHETIC_KEYS = {"seed", "params"}
QUERY_KEYS = {"source", "count"}
SERIES_KEYS = {"name", "scaling", "points", "each"}
SCALINGS = {
    # scaling kind -> (the axis that grows, how efficiency against the first point is defined)
    "horizontal-weak": ("isns", "throughput(N) / throughput(1): the index grows with the ISNs"),
    "horizontal-strong": ("isns", "throughput(N) / (N x throughput(1)): one index, more cuts"),
    "vertical-partition": ("docs_per_shard",
                           "throughput(D) x D / (throughput(D1) x D1): documents served per second"),
    "vertical-gpus": ("gpus_per_isn", "throughput(G) / (G x throughput(1))"),
    "custom": (None, "none"),
}
ENGINES = {"reference", "cpu", "gpu"}
MODES = {"and", "or", "and-or"}


class SpecError(Exception):
    pass


def _check_keys(where, obj, known):
    if not isinstance(obj, dict):
        raise SpecError(f"{where}: expected an object, got {json.dumps(obj)[:60]}")
    bad = sorted(set(obj) - set(known))
    if bad:
        raise SpecError(f"{where}: unknown key{'s' if len(bad) > 1 else ''} "
                        f"{', '.join(repr(b) for b in bad)} (known: {', '.join(sorted(known))})")


def _positive_int(where, key, v, allow_none=False):
    if v is None and allow_none:
        return
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise SpecError(f"{where}: {key} must be a positive integer, got {json.dumps(v)}")


def check_point(where, p):
    _check_keys(where, p, POINT_DEFAULTS)
    for key in ("isns", "gpus_per_isn", "batch_size", "max_in_flight", "k"):
        _positive_int(where, key, p[key])
    for key in ("docs_per_shard", "docs", "threads_per_isn", "queries"):
        _positive_int(where, key, p[key], allow_none=True)
    for key in ("max_wait_us", "cache_entries"):
        if not isinstance(p[key], int) or p[key] < 0:
            raise SpecError(f"{where}: {key} must be a non-negative integer, got {json.dumps(p[key])}")
    if not isinstance(p["qps"], (int, float)) or p["qps"] < 0:
        raise SpecError(f"{where}: qps must be a non-negative number, got {json.dumps(p['qps'])}")
    if p["engine"] not in ENGINES:
        raise SpecError(f"{where}: engine {p['engine']!r} is not one of {', '.join(sorted(ENGINES))}")
    if p["mode"] not in MODES:
        raise SpecError(f"{where}: mode {p['mode']!r} is not one of {', '.join(sorted(MODES))}")
    if p["scoring"] not in ("bm25", "bm25-pr"):
        raise SpecError(f"{where}: scoring {p['scoring']!r} is not bm25 or bm25-pr")
    if p["docs_per_shard"] is not None and p["docs"] is not None:
        raise SpecError(f"{where}: give docs_per_shard or docs, not both")
    if not isinstance(p["extra"], list) or not all(isinstance(x, str) for x in p["extra"]):
        raise SpecError(f"{where}: extra must be a list of strings (cluster.sh flags)")
    if not isinstance(p["cost_buckets"], bool):
        raise SpecError(f"{where}: cost_buckets must be true or false")


def point_id(p):
    """A readable, unique file name for a point's settings (the settings that differ from the
    defaults spelled out, in a fixed order)."""
    parts = [f"isns{p['isns']}"]
    if p["gpus_per_isn"] != 1:
        parts.append(f"gpus{p['gpus_per_isn']}")
    parts.append(f"docs{p['total_docs']}")
    parts.append(p["engine"] + (f"-{p['algorithm']}" if p["algorithm"] else ""))
    if p["scheduler"]:
        parts.append(f"sched-{p['scheduler']}")
    parts.append(f"b{p['batch_size']}")
    parts.append(f"qps{p['qps']:g}" if p["qps"] else "closed")
    parts.append(f"{p['mode']}-k{p['k']}")
    for key in ("max_wait_us", "max_in_flight", "cost_buckets", "cache_entries", "scoring",
                "threads_per_isn", "queries"):
        if p[key] != POINT_DEFAULTS[key]:
            parts.append(f"{key.replace('_', '')}{str(p[key]).lower()}")
    if p["extra"]:
        # A stable digest (Python's hash() changes between runs): the flags are in the point's JSON.
        parts.append("x" + hashlib.sha1(" ".join(p["extra"]).encode()).hexdigest()[:8])
    return "-".join(parts)


def load(path):
    """Reads and checks a spec; returns (spec, points, series). points: id -> settings; series:
    list of {name, scaling, point_ids}."""
    try:
        with open(path) as f:
            spec = json.load(f)
    except FileNotFoundError:
        raise SpecError(f"no study spec at {path}")
    except json.JSONDecodeError as e:
        raise SpecError(f"{path}: not valid JSON: {e}")
    where = str(path)
    _check_keys(where, spec, TOP_KEYS)
    for key in ("name", "collection", "series"):
        if key not in spec:
            raise SpecError(f"{where}: the key {key!r} is required")
    coll = spec["collection"]
    _check_keys(f"{where}: collection", coll, COLLECTION_KEYS)
    if len(coll) != 1:
        raise SpecError(f"{where}: collection needs exactly one of 'synthetic' or 'index'")
    if "synthetic" in coll:
        _check_keys(f"{where}: collection.synthetic", coll["synthetic"], SYNTHETIC_KEYS)
        params = coll["synthetic"].get("params", {})
        if not isinstance(params, dict):
            raise SpecError(f"{where}: collection.synthetic.params must be an object of generator keys")
        for bad in ("docs", "seed"):
            if bad in params:
                raise SpecError(f"{where}: collection.synthetic.params: {bad!r} is set by the study "
                                f"(seed in collection.synthetic, docs per point)")
    elif not isinstance(coll["index"], str):
        raise SpecError(f"{where}: collection.index must be the path of an index directory")
    queries = spec.get("queries", {})
    _check_keys(f"{where}: queries", queries, QUERY_KEYS)
    if "count" in queries:
        _positive_int(f"{where}: queries", "count", queries["count"])
    defaults = dict(POINT_DEFAULTS)
    given_defaults = spec.get("defaults", {})
    _check_keys(f"{where}: defaults", given_defaults, POINT_DEFAULTS)
    defaults.update(given_defaults)
    repeat = spec.get("repeat", 1)
    _positive_int(where, "repeat", repeat)
    if not isinstance(spec["series"], list) or not spec["series"]:
        raise SpecError(f"{where}: series must be a non-empty list")

    points, series = {}, []
    for si, s in enumerate(spec["series"]):
        sw = f"{where}: series[{si}]"
        _check_keys(sw, s, SERIES_KEYS)
        if "name" not in s or "points" not in s:
            raise SpecError(f"{sw}: 'name' and 'points' are required")
        scaling = s.get("scaling", "custom")
        if scaling not in SCALINGS:
            raise SpecError(f"{sw}: scaling {scaling!r} is not one of {', '.join(sorted(SCALINGS))}")
        # "each" multiplies the points: {axis: [values]} (every combination) or
        # [{axis: value, ...}, ...] (these variants).
        each = s.get("each", {})
        if isinstance(each, list):
            for vi, v in enumerate(each):
                _check_keys(f"{sw}.each[{vi}]", v, POINT_DEFAULTS)
            variants = [dict(v) for v in each] or [{}]
        else:
            _check_keys(f"{sw}.each", each, POINT_DEFAULTS)
            for key, values in each.items():
                if not isinstance(values, list) or not values:
                    raise SpecError(f"{sw}.each.{key}: must be a non-empty list of values")
            variants = [{}]
            for key, values in each.items():
                variants = [dict(v, **{key: x}) for v in variants for x in values]
        ids = []
        if not isinstance(s["points"], list) or not s["points"]:
            raise SpecError(f"{sw}: points must be a non-empty list")
        for pi, given in enumerate(s["points"]):
            pw = f"{sw}.points[{pi}]"
            _check_keys(pw, given, POINT_DEFAULTS)
            for v in variants:
                p = dict(defaults)
                p.update(given)
                p.update(v)
                check_point(pw, p)
                if "index" in coll:
                    if p["docs_per_shard"] is not None or p["docs"] is not None:
                        raise SpecError(f"{pw}: docs and docs_per_shard need a synthetic collection "
                                        f"(this study serves the fixed index {coll['index']})")
                    p["total_docs"] = "index"
                else:
                    if p["docs_per_shard"] is None and p["docs"] is None:
                        raise SpecError(f"{pw}: give docs_per_shard or docs (synthetic collection)")
                    p["total_docs"] = p["docs"] if p["docs"] is not None else p["isns"] * p["docs_per_shard"]
                    p["docs_per_shard"] = math.ceil(p["total_docs"] / p["isns"])
                    p["docs"] = p["total_docs"]
                if p["engine"] != "gpu" and p["gpus_per_isn"] != 1:
                    raise SpecError(f"{pw}: gpus_per_isn {p['gpus_per_isn']} needs engine gpu")
                pid = point_id(p)
                points[pid] = p
                if pid not in ids:
                    ids.append(pid)
        series.append({"name": s["name"], "scaling": scaling, "point_ids": ids,
                       "axis": SCALINGS[scaling][0], "efficiency": SCALINGS[scaling][1]})
    return spec, points, series
