#!/usr/bin/env bash
# Trains the real ranker of issue 12: LambdaMART (XGBoost; the objective and depth chosen per fold
# by an inner cross-validation on that fold's training queries, launch/train_ranker.py) on
# Cranfield's relevance judgements with 5-fold cross-validation by query, into a ranker store,
# and reports nDCG@10,
# MAP and P@10 of BM25 and of the ranker, both computed by `gpusearch eval` against the qrels.
#   launch/train-ranker.sh [OUT]        (default build/ranker-cranfield)
# Each query is ranked by the fold ranker that did not see it in training (the query file's
# third column). The first stage is BM25 (or mode) keeping CANDIDATES per query (default 100).
# Needs a Python with xgboost (Debian: python3-xgboost). Writes OUT/store (the rankers),
# OUT/cranfield-ranker.json and .md (the table); nothing is written into the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/ranker-cranfield}
data=${CRANFIELD:-../shared/data/cranfield}
[ -d "$data" ] || data=/work/shared/data/cranfield
candidates=${CANDIDATES:-100}
folds=${FOLDS:-5}
bin=build/bin
[ -x $bin/gpusearch ] || launch/build.sh
py=/usr/bin/python3
$py -c 'import xgboost' 2>/dev/null || py=python3
$py -c 'import xgboost' 2>/dev/null || { echo "train-ranker: no Python with xgboost (apt-get install python3-xgboost)" >&2; exit 1; }

rm -rf "$out" && mkdir -p "$out/store"
echo "== index Cranfield with its forward index"
$bin/gpusearch -q index --corpus "$data/corpus.jsonl" --out "$out/index" --forward-index > /dev/null
echo "== first-stage candidates ($candidates per query) and their features"
$bin/gpusearch -q features --index "$out/index" --queries "$data/queries.tsv" \
  --candidates "$candidates" --out "$out/features.tsv"
echo "== LambdaMART, $folds folds"
$py launch/train_ranker.py "$out/features.tsv" "$data/qrels.txt" "$data/queries.tsv" \
  "$out/store" "$out/queries-ranked.tsv" --folds "$folds" > "$out/training.json"
$bin/gpusearch ranker-store index --store "$out/store"
echo "== BM25 and the ranker, k = 10"
$bin/gpusearch -q search --index "$out/index" --queries "$data/queries.tsv" --k 10 \
  --run "$out/bm25.run" --tag bm25 > /dev/null
$bin/gpusearch -q search --index "$out/index" --queries "$out/queries-ranked.tsv" --k 10 \
  --ranker-store "$out/store" --candidates "$candidates" --ranker-backend cpu \
  --run "$out/ranker.run" --tag lambdamart --metrics "$out/ranker-metrics.json" > /dev/null
$bin/gpusearch eval --qrels "$data/qrels.txt" --run "$out/bm25.run" --k 10 --per-query > "$out/eval-bm25.json"
$bin/gpusearch eval --qrels "$data/qrels.txt" --run "$out/ranker.run" --k 10 --per-query > "$out/eval-ranker.json"
$py - "$out" "$candidates" "$folds" <<'PY'
import json, sys, math
out, candidates, folds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
bm25 = json.load(open(f"{out}/eval-bm25.json"))
rk = json.load(open(f"{out}/eval-ranker.json"))
training = json.load(open(f"{out}/training.json"))
metrics = json.load(open(f"{out}/ranker-metrics.json"))
keys = ["ndcg@10", "map", "p@10"]
# Per-query nDCG@10 wins/losses (paired), and a paired t statistic.
pq_b = bm25.get("per_query", {})
pq_r = rk.get("per_query", {})
nd = [k for k in keys if k.startswith("ndcg")][0]
diffs = [pq_r[q][nd] - pq_b[q][nd] for q in pq_b if q in pq_r]
n = len(diffs)
mu = sum(diffs) / n if n else 0
sd = math.sqrt(sum((d - mu) ** 2 for d in diffs) / (n - 1)) if n > 1 else 0
table = {
    "collection": "Cranfield 1400 (225 queries, qrels grades 1-4)",
    "protocol": f"{folds}-fold cross-validation by query (settings chosen per fold by an inner "
                f"3-fold cross-validation on its training queries); each query ranked by the fold ranker "
                f"trained without it; first stage BM25 top {candidates}; k = 10",
    "bm25": {k: bm25[k] for k in keys},
    "lambdamart": {k: rk[k] for k in keys},
    "queries_compared": n,
    "ndcg_wins_ties_losses": [sum(d > 1e-12 for d in diffs), sum(abs(d) <= 1e-12 for d in diffs),
                              sum(d < -1e-12 for d in diffs)],
    "ndcg_paired_t": mu / (sd / math.sqrt(n)) if sd > 0 else None,
    "training": {k: training[k] for k in ("rows", "relevant_rows", "grid", "selection", "rankers")},
    "ranker_fallback_queries": metrics["second_stage"]["ranker_fallback_queries"],
}
json.dump(table, open(f"{out}/cranfield-ranker.json", "w"), indent=1)
with open(f"{out}/cranfield-ranker.md", "w") as f:
    f.write(f"Cranfield, {table['protocol']}; computed by `gpusearch eval`.\n\n")
    f.write("| run | " + " | ".join(keys) + " |\n|---|" + "---|" * len(keys) + "\n")
    for name, e in (("BM25", table["bm25"]), ("LambdaMART (XGBoost)", table["lambdamart"])):
        f.write(f"| {name} | " + " | ".join(f"{e[k]:.4f}" for k in keys) + " |\n")
    w, t, l = table["ndcg_wins_ties_losses"]
    f.write(f"\nPer query ({nd}): {w} better, {t} equal, {l} worse; paired t = "
            f"{table['ndcg_paired_t']:.2f} over {n} queries.\n")
print(open(f"{out}/cranfield-ranker.md").read())
PY
