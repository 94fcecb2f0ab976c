#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# leader-bounce's leader-crash and leader-pause scenarios with every daemon tracing its elector
# (leader-bounce --trace-elector): real conclaved processes behind leader-bounce's fault proxy,
# with the metadata write load, a SIGKILLed leader restarted, a SIGSTOPped leader whose lease
# expires. Each run's per-node traces are merged by message causality
# (tla/merge_daemon_traces.py) and the merged trace must be a behaviour of Elector.tla
# (tla/validate-trace.sh) and take the steps its fault makes (tla/trace_leader_steps.py): an
# election, the crash and the restart; a lease expiry.
#   tests/tla/bounce-traces.sh LEADER_BOUNCE CONCLAVED OUT_DIR
# Exit 77 (skipped) when TLC is not installed.
set -euo pipefail
bounce=$1
conclaved=$2
out=$3
here=$(cd "$(dirname "$0")" && pwd)
tla=$(cd "$here/../../tla" && pwd)
source "$tla/tlc-env.sh"   # exits 77 without TLC
rm -rf "$out"
mkdir -p "$out"
status=0
for run in "leader-crash:elected,crash,restart" "leader-pause:elected,lease-expiry"; do
  scenario=${run%%:*}
  require=${run#*:}
  dir="$out/$scenario"
  echo "==> leader-bounce $scenario --trace-elector $dir"
  if ! "$bounce" "$scenario" --quiet --conclaved "$conclaved" --trace-elector "$dir" \
      >"$out/$scenario.log" 2>&1; then
    echo "leader-bounce $scenario failed:"; tail -20 "$out/$scenario.log"; status=1; continue
  fi
  python3 "$tla/merge_daemon_traces.py" "$dir/merged.ndjson" "$dir"/n*.ndjson || { status=1; continue; }
  python3 "$tla/trace_leader_steps.py" --require="$require" "$dir/merged.ndjson" \
      | grep -v 'NOT TAKEN' || { echo "$scenario: a required step is missing"; status=1; }
  "$tla/validate-trace.sh" "$dir/merged.ndjson" || status=1
done
exit $status
