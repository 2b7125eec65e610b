# Sourced at the top of a device-tool call's script (.gpuhost/sNN-X.sh, copied into the results
# folder as the record of what ran): unpacks the carried binaries (gzipped or xz-compressed, to
# keep the tree and carry under the tool's 64 MiB: xz -9e takes a third off gzip -9), exports
# GPUSEARCH_BIN for launch/gpu-host.sh's steps, unpacks the runtime .debs carried in
# .gpuhost/rt-debs (`launch/gpu-host.sh runtime-debs` makes them) into /opt/deps and puts them on
# the loader's path. NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
#
#   source launch/device-env.sh .gpuhost/s41a/bin [more binary folders...]
#   device_results s48a   # the results folder $res (/tmp/s48a); device_pack tars it into $OUT
export NCCL_NVLS_ENABLE=0
for device_env_bin in "$@"; do
  if compgen -G "$device_env_bin/*.gz" > /dev/null; then gunzip -f "$device_env_bin"/*.gz; fi
  for device_env_xz in "$device_env_bin"/*.xz; do  # python's lzma where the image lacks xz
    [ -f "$device_env_xz" ] || continue
    if command -v unxz > /dev/null; then unxz -f "$device_env_xz"
    else python3 -c 'import lzma, os, sys; p = sys.argv[1]
open(p[:-3], "wb").write(lzma.open(p).read()); os.remove(p)' "$device_env_xz"; fi
  done
  chmod +x "$device_env_bin"/* 2>/dev/null || true
done
export GPUSEARCH_BIN=${1:?usage: source launch/device-env.sh BIN_DIR [more...]}
export GPUSEARCH_DEBS=${GPUSEARCH_DEBS:-.gpuhost/rt-debs}
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PATH=/opt/deps/usr/bin:$PATH
launch/gpu-host.sh deps > /dev/null 2>&1 || true
unset device_env_bin device_env_xz

# device_results NAME: the call's results folder /tmp/NAME (exported as res), and device_pack,
# which copies the calling script in (the record of what ran) and tars the folder's JSON,
# Markdown, logs, texts, scripts, plots and the benches' answer checks (*.answers: what
# `bench-cluster-overhead.sh --summarize-only` reads back) into $OUT/NAME.tar.gz, leaving out
# indexes and files of 20 MB or more. Call device_pack after each part of a call, so that a call
# cut short by its time limit still returns what it finished.
device_results() {
  device_results_name=${1:?usage: device_results NAME}
  export res=/tmp/$device_results_name
  mkdir -p "$res"
}
device_pack() {
  cp "$0" "$res/"
  (cd /tmp && find "$device_results_name" -type f \( -name '*.json' -o -name '*.json.gz' -o -name '*.md' \
     -o -name '*.log' -o -name '*.txt' -o -name '*.sh' -o -name '*.png' -o -name '*.answers' \) \
     -size -20M -not -path '*/index*' -print0 |
     tar --null -T - -czf "$OUT/$device_results_name.tar.gz")
}
