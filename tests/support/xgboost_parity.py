#!/usr/bin/env python3
"""XGBoost's own predictions for the parity tests (tests/unit/xgboost_parity_test.cpp,
tests/gpu/ranker_gpu_test.cpp).

  xgboost_parity.py train OUTDIR SEED
      trains models of several depths and objectives on random data with missing values (NaN)
      and writes, per model, NAME.json (XGBoost's JSON model) and NAME.pred.f32 (predictions
      with output_margin=True on test.f32); manifest.json lists them with the data's shape.
  xgboost_parity.py predict MODEL.json DATA.f32 COLS OUT.f32
      XGBoost's output_margin prediction of a model it did not train (our writer's output).

Data files are raw little-endian float32, row-major.
"""
import json
import sys

import numpy as np
import xgboost as xgb


def train(out, seed):
    rng = np.random.default_rng(seed)
    cols, rows_train, rows_test = 12, 2000, 500

    def data(n):
        x = rng.normal(size=(n, cols)).astype(np.float32)
        x[:, 3] = np.round(x[:, 3] * 2)  # ties on thresholds
        x[rng.random(size=x.shape) < 0.15] = np.nan  # missing features
        return x

    x_train, x_test = data(rows_train), data(rows_test)
    # An edge case: values exactly at learned thresholds come from the training data.
    x_test[:50] = x_train[:50]
    signal = np.nan_to_num(x_train[:, 0]) * 1.5 - np.nan_to_num(x_train[:, 1]) \
        + np.sin(np.nan_to_num(x_train[:, 2])) + 0.3 * np.nan_to_num(x_train[:, 3])
    x_test.tofile(f"{out}/test.f32")
    models = []
    specs = [
        ("reg-d2", "reg:squarederror", 2, {}),
        ("reg-d4", "reg:squarederror", 4, {}),
        ("reg-d8", "reg:squarederror", 8, {}),
        ("logistic-d6", "binary:logistic", 6, {"base_score": 0.3}),
        ("pairwise-d5", "rank:pairwise", 5, {}),
        ("ndcg-d3", "rank:ndcg", 3, {}),
    ]
    for name, objective, depth, extra in specs:
        if objective == "binary:logistic":
            y = (signal + rng.normal(size=rows_train) * 0.3 > 0).astype(np.float32)
        elif objective.startswith("rank:"):
            y = np.clip(np.round(signal + 2), 0, 4).astype(np.float32)
        else:
            y = signal.astype(np.float32)
        dtrain = xgb.DMatrix(x_train, label=y, missing=np.nan)
        if objective.startswith("rank:"):
            dtrain.set_group([100] * (rows_train // 100))
        params = {"objective": objective, "max_depth": depth, "eta": 0.2, "seed": seed,
                  "tree_method": "hist", "nthread": 1}
        params.update(extra)
        booster = xgb.train(params, dtrain, num_boost_round=40)
        booster.save_model(f"{out}/{name}.json")
        pred = booster.predict(xgb.DMatrix(x_test, missing=np.nan), output_margin=True)
        pred.astype(np.float32).tofile(f"{out}/{name}.pred.f32")
        models.append({"name": name, "objective": objective, "depth": depth})
    with open(f"{out}/manifest.json", "w") as f:
        json.dump({"rows": rows_test, "cols": cols, "models": models,
                   "xgboost": xgb.__version__}, f)


def predict(model, data, cols, out):
    x = np.fromfile(data, dtype=np.float32).reshape(-1, int(cols))
    booster = xgb.Booster(model_file=model)
    dmatrix = xgb.DMatrix(x, missing=np.nan, feature_names=booster.feature_names)
    booster.predict(dmatrix, output_margin=True) \
        .astype(np.float32).tofile(out)


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "predict":
        predict(*sys.argv[2:6])
    else:
        sys.exit("usage: xgboost_parity.py train OUTDIR SEED | predict MODEL DATA COLS OUT")
