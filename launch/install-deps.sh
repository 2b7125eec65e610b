#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages gpusearch builds with, if any is missing. Idempotent.
set -euo pipefail
packages=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libcapnp-dev capnproto
          libtbb-dev libgtest-dev libgmock-dev libcli11-dev libfmt-dev libspdlog-dev
          nlohmann-json3-dev zlib1g-dev libxxhash-dev libbenchmark-dev python3-matplotlib lz4
          python3-xgboost libxgboost-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
