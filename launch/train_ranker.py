#!/usr/bin/env python3
"""Trains LambdaMART rankers with XGBoost under k-fold cross-validation by query
(launch/train-ranker.sh): one ranker per fold, trained on the other folds' queries, written into a
gpusearch ranker store as NAME.trees.json (XGBoost's JSON model) and NAME.ranker.json (the
feature map: every catalog feature, in the order `gpusearch features` writes them), and the query
file with each query's held-out fold ranker in the third column.

  train_ranker.py FEATURES.tsv QRELS QUERIES.tsv STORE_DIR OUT_QUERIES.tsv [--folds 5] [--prefix P]
"""
import argparse
import json
import math
import sys

import numpy as np
import xgboost as xgb


def read_features(path):
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        names = header[2:]
        qids, docs, rows = [], [], []
        for line in f:
            parts = line.rstrip("\n").split("\t")
            qids.append(parts[0])
            docs.append(parts[1])
            rows.append([math.nan if v == "nan" else float(v) for v in parts[2:]])
    return names, qids, docs, np.array(rows, dtype=np.float32)


def read_qrels(path):
    grades = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 4:
                grades[(parts[0], parts[2])] = max(0, int(parts[3]))
    return grades


# Candidate settings; each outer fold picks one by an inner cross-validation on its own training
# queries (nested: the held-out fold never influences its ranker).
GRID = [
    {"objective": "rank:pairwise", "max_depth": 2, "eta": 0.1, "rounds": 100},
    {"objective": "rank:ndcg", "max_depth": 2, "eta": 0.1, "rounds": 100},
    {"objective": "rank:pairwise", "max_depth": 3, "eta": 0.05, "rounds": 150, "min_child_weight": 5},
]


def groups_of(qids):
    sizes = []
    for i, q in enumerate(qids):
        if i == 0 or q != qids[i - 1]:
            sizes.append(0)
        sizes[-1] += 1
    return sizes


def ndcg10(scores, labels, ideal):
    order = np.argsort(-scores, kind="stable")[:10]
    dcg = sum(labels[i] / math.log2(r + 2) for r, i in enumerate(order))
    idcg = sum(g / math.log2(r + 2) for r, g in enumerate(sorted(ideal, reverse=True)[:10]))
    return dcg / idcg if idcg > 0 else 0.0


def train(x, y, qids, setting, names, seed):
    params = {"objective": setting["objective"], "max_depth": setting["max_depth"],
              "eta": setting["eta"], "min_child_weight": setting.get("min_child_weight", 1),
              "subsample": 0.8, "colsample_bytree": 0.8, "seed": seed, "tree_method": "hist",
              "nthread": 2}
    d = xgb.DMatrix(x, label=y, missing=np.nan, feature_names=names)
    d.set_group(groups_of(qids))
    return xgb.train(params, d, num_boost_round=setting["rounds"]), params


def inner_score(x, y, qids, setting, names, seed, ideal, folds=3):
    uniq = list(dict.fromkeys(qids))
    fold_of = {q: i % folds for i, q in enumerate(uniq)}
    scores = []
    for f in range(folds):
        tr = np.array([fold_of[q] != f for q in qids])
        booster, _ = train(x[tr], y[tr], qids[tr], setting, names, seed)
        te = ~tr
        pred = booster.predict(xgb.DMatrix(x[te], missing=np.nan, feature_names=names))
        tq = qids[te]
        for q in dict.fromkeys(tq):
            m = tq == q
            scores.append(ndcg10(pred[m], y[te][m], ideal.get(q, [])))
    return float(np.mean(scores))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("features")
    ap.add_argument("qrels")
    ap.add_argument("queries")
    ap.add_argument("store")
    ap.add_argument("out_queries")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--prefix", default="cranfield-lambdamart")
    ap.add_argument("--seed", type=int, default=12)
    args = ap.parse_args()

    names, qids, docs, x = read_features(args.features)
    grades = read_qrels(args.qrels)
    y = np.array([grades.get((q, d), 0) for q, d in zip(qids, docs)], dtype=np.float32)
    # Folds by query, in query-file order: query i goes to fold i % folds.
    order = []
    with open(args.queries) as f:
        for line in f:
            if line.strip():
                order.append(line.split("\t", 1)[0])
    fold_of = {q: i % args.folds for i, q in enumerate(order)}
    qid_arr = np.array(qids)
    report = {"folds": args.folds, "features": names, "rows": int(len(y)),
              "relevant_rows": int((y > 0).sum()), "rankers": []}
    ideal = {}
    for (q, _), g in grades.items():
        ideal.setdefault(q, []).append(g)
    for fold in range(args.folds):
        # Rows of a query are contiguous in `gpusearch features` output: groups in order.
        tr = np.array([fold_of.get(q, -1) not in (fold, -1) for q in qids])
        inner = [inner_score(x[tr], y[tr], qid_arr[tr], s, names, args.seed, ideal) for s in GRID]
        best = GRID[int(np.argmax(inner))]
        print(f"fold {fold + 1}: inner nDCG@10 {['%.4f' % v for v in inner]} -> {best}",
              file=sys.stderr, flush=True)
        booster, params = train(x[tr], y[tr], qid_arr[tr], best, names, args.seed)
        tq = qid_arr[tr]
        name = f"{args.prefix}-fold{fold + 1}"
        booster.save_model(f"{args.store}/{name}.trees.json")
        with open(f"{args.store}/{name}.ranker.json", "w") as f:
            json.dump({"format": "gpusearch-ranker", "version": 1, "name": name,
                       "features": names,
                       "inputs": [{"type": "trees", "xgboost": f"{name}.trees.json"}]}, f, indent=1)
        report["rankers"].append({"name": name, "fold": fold + 1, "train_queries": len(set(tq)),
                                  "setting": best, "inner_ndcg10": inner})
    with open(args.queries) as f, open(args.out_queries, "w") as out:
        for line in f:
            if not line.strip():
                continue
            qid, text = line.rstrip("\n").split("\t", 1)
            out.write(f"{qid}\t{text}\t{args.prefix}-fold{fold_of[qid] + 1}\n")
    report["grid"] = GRID
    report["selection"] = "per outer fold, by 3-fold inner cross-validation on its training queries"
    print(json.dumps(report))


if __name__ == "__main__":
    main()
