#!/usr/bin/env bash
# The main job on a built-in default: generate a synthetic GOV2-like collection, index it,
# answer its test queries with the reference engine, and print a summary.
# Environment: DEMO_DOCS (default 20000), DEMO_DIR (default build/demo).
set -euo pipefail
cd "$(dirname "$0")/.."
launch/install-deps.sh
launch/build.sh
docs=${DEMO_DOCS:-20000}
dir=${DEMO_DIR:-build/demo}
bin=build/bin/gpusearch
rm -rf "$dir"
mkdir -p "$dir"
echo "== index a synthetic collection of $docs documents (2 shards)"
$bin index --synthetic "docs=$docs,seed=7,train_queries=2000,test_queries=2000" --shards 2 \
  --out "$dir/index" --report "$dir/build.json"
echo "== search its test queries (reference engine, and-or, k=10, bm25)"
$bin search --index "$dir/index" --queries "$dir/index/queries.test.tsv" --mode and-or --k 10 \
  --run "$dir/run.txt" --metrics "$dir/metrics.json"
echo "== first results"
head -5 "$dir/run.txt"
