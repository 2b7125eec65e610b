#!/usr/bin/env bash
# Session 41, call B (issue 16): where the host's CPU time goes, one ISN against four, by
# sampling (perf record -a -e cpu-clock: this VM has no PMU, call A): by thread name and
# library, and by symbol. CPU engine, 1M documents, 240,000 queries, batch 1,024, just in time,
# round-robin shards.
set -u
source launch/device-env.sh .gpuhost/s41b/bin
bin=$GPUSEARCH_BIN
gunzip -f .gpuhost/perf/perf.gz .gpuhost/perf/lib/*.gz; chmod +x .gpuhost/perf/perf
perf="env LD_LIBRARY_PATH=$(pwd)/.gpuhost/perf/lib:$LD_LIBRARY_PATH $(pwd)/.gpuhost/perf/perf"
t0=$(date +%s)
res=/tmp/s41b; mkdir -p $res
$perf --version > $res/perf.txt 2>&1; cat $res/perf.txt
launch/bench-cluster-overhead.sh --out $res/bench --build $(cd .gpuhost/s41b && pwd) --engine cpu \
  --docs 1000000 --queries 240000 --batches 1024 --isns "1 4" --reps 1 --split round-robin \
  --variants "adaptive" --probe-reps 0 --latency-reps 0 > $res/bench.log 2>&1
echo "bench: exit $? ($(( $(date +%s) - t0 )) s)"; sed -n '/^variant /,/^in process/p' $res/bench.log
idx=$res/bench/index; q=$res/bench/queries.tsv
for rep in 1 2; do
for n in 1 4; do
  i=$idx; [ $n = 1 ] || i=$res/bench/index-s$n-round-robin
  $perf record -a -F 1999 -e cpu-clock -o $res/perf-$n-$rep.data -- \
    env GPUSEARCH_BUILD_DIR=$(cd .gpuhost/s41b && pwd) launch/cluster.sh -q --index $i --queries $q --isns $n \
    --engine cpu --batch-size 1024 --cache-entries 0 --no-verify --progress adaptive \
    --run $res/run-$n-$rep.run --metrics $res/metrics-$n-$rep.json > $res/cluster-$n-$rep.log 2>&1
  echo "isns $n rep $rep: exit $? $(grep -o '[0-9]* queries/s' $res/cluster-$n-$rep.log) ($(( $(date +%s) - t0 )) s)"
  $perf report -i $res/perf-$n-$rep.data --stdio --no-children --sort comm,dso 2>/dev/null | grep -v "^#" | grep -v "^$" | head -40 > $res/by-comm-dso-$n-$rep.txt
  $perf report -i $res/perf-$n-$rep.data --stdio --no-children --sort comm,sym 2>/dev/null | grep -v "^#" | grep -v "^$" | head -150 > $res/by-sym-$n-$rep.txt
  $perf report -i $res/perf-$n-$rep.data --stdio --no-children --sort pid 2>/dev/null | grep -v "^#" | grep -v "^$" | head -20 > $res/by-pid-$n-$rep.txt
  head -25 $res/by-comm-dso-$n-$rep.txt
  rm -f $res/perf-$n-$rep.data
done
done
cp "$0" $res/
(cd /tmp && find s41b -type f \( -name '*.json' -o -name '*.log' -o -name '*.txt' -o -name '*.sh' \) -size -20M \
  -not -path '*/index*' -print0 | tar --null -T - -czf "$OUT/s41b.tar.gz")
ls -la "$OUT"
