#!/usr/bin/env bash
# Runs a scaling study: every point of a spec (launch/studies/*.json) on the cluster, one JSON
# per point, then the report (tables and plots). Resumes: points already done are skipped.
#
#   launch/study.sh SPEC --out DIR [--index-cache DIR] [--only TEXT] [--no-report]
#                   [--point-timeout S] [--build-dir DIR]
#
# Builds what is missing first (launch/build.sh). Details: README, "Scaling studies";
# launch/study_driver.py --help.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GPUSEARCH_BUILD_DIR:-$root/build}
# Debian's python3 (launch/install-deps.sh installs matplotlib and numpy for it), not whatever
# python3 comes first on PATH.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
for a in "$@"; do
  case "$a" in -h|--help) exec "$py" "$root/launch/study_driver.py" --help ;; esac
done
if [ ! -x "$build/bin/gpusearch" ] || [ ! -x "$build/bin/gpusearch-aggregator" ] ||
   [ ! -x "$build/bin/gpusearch-isn" ]; then
  echo "study: building gpusearch into $build"
  "$root/launch/build.sh"
fi
exec "$py" "$root/launch/study_driver.py" --build-dir "$build" "$@"
