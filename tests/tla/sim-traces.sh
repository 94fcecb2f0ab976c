#!/usr/bin/env bash
# Runs conclave-sim for a few seeds (fault-free and faulty schedules), writes their NDJSON traces
# and validates each against tla/Elector.tla.
#   tests/tla/sim-traces.sh CONCLAVE_SIM OUT_DIR
# Exit 77 (skipped) when TLC is not installed.
set -euo pipefail
sim=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
tla=$(cd "$here/../../tla" && pwd)
source "$tla/tlc-env.sh"   # exits 77 without TLC
mkdir -p "$out"
traces=()
# Seeds and extra options: fault-free, then with faults. Adjust the options to conclave-sim's
# command line (`conclave-sim --help`) if they change.
# 600 core steps each; seed 5 with all faults includes a crash and a restart.
runs=(
  "1:--faults none --steps 300"
  "3:--faults all --steps 600"
  "5:--faults all --steps 600"
  "6:--faults crash,cut,loss --steps 600"
)
for run in "${runs[@]}"; do
  seed=${run%%:*}
  extra=${run#*:}
  trace="$out/seed-$seed.ndjson"
  # shellcheck disable=SC2086
  "$sim" --seed "$seed" --quiet $extra --trace "$trace" >"$out/seed-$seed.log" 2>&1 || {
    echo "conclave-sim failed for seed $seed (see $out/seed-$seed.log)"
    tail -5 "$out/seed-$seed.log"
    exit 1
  }
  traces+=("$trace")
done
exec "$tla/validate-trace.sh" "${traces[@]}"
