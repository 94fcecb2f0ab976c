#!/usr/bin/env bash
# Runs every TLC model of the elector and log specs and checks each gives the expected result.
#   tla/check.sh [MODEL.cfg...]     (default: every model below)
# Prints distinct states, depth and time per model. Exit 0 when every result is the expected
# one, 1 otherwise, 77 when TLC is not installed (CTest reports the test as skipped).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/tlc-env.sh"

# model config : module : expected result ("ok" or the invariant/property TLC must report violated)
models=(
  "ElectorSafety.cfg:MCElector:ok"
  "ElectorTransfer.cfg:MCElector:ok"
  "ElectorLoss.cfg:MCElector:ok"
  "ElectorLiveness.cfg:MCElectorLive:ok"
  "ElectorDurableLost.cfg:MCElector:OneLeaderPerTerm"
  "ElectorDoubleVote.cfg:MCElector:OneVotePerTerm"
  "LogSafety.cfg:MCReplicatedLog:ok"
  "LogCommitWithoutQuorum.cfg:MCReplicatedLog:LeaderCompleteness"
  "LogSkipSync.cfg:MCReplicatedLog:LeaderCompleteness"
)
if [[ $# -gt 0 ]]; then
  selected=()
  for want in "$@"; do
    for entry in "${models[@]}"; do
      [[ "${entry%%:*}" == "$(basename "$want")" ]] && selected+=("$entry")
    done
  done
  if [[ ${#selected[@]} -ne $# ]]; then
    echo "check.sh: unknown model in: $*" >&2
    exit 2
  fi
  models=("${selected[@]}")
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/conclave-tlc.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$here"/*.tla "$here"/*.cfg "$work/"

failed=0
for entry in "${models[@]}"; do
  IFS=: read -r cfg module expect <<<"$entry"
  log="$work/${cfg%.cfg}.log"
  start=$(date +%s)
  (cd "$work" && "${TLC_CMD[@]}" -workers "$TLC_WORKERS" -noGenerateSpecTE \
      -metadir "$work/states-${cfg%.cfg}" -config "$cfg" "$module.tla" >"$log" 2>&1)
  rc=$?
  secs=$(( $(date +%s) - start ))
  distinct=$(grep -o '[0-9,]* distinct states found' "$log" | tail -1 | cut -d' ' -f1)
  depth=$(grep -o 'depth of the complete state graph search is [0-9]*' "$log" | grep -o '[0-9]*$')
  violated=$(grep -o -m1 '\(Invariant\|Temporal property\|Action property\|Property\) [A-Za-z_]* is violated' "$log" \
             | head -1)
  [[ -z "$violated" ]] && grep -q 'Temporal properties were violated' "$log" \
      && violated="Temporal properties were violated"
  if [[ "$expect" == ok ]]; then
    if [[ $rc -eq 0 ]] && grep -q 'No error has been found' "$log"; then
      result="ok"
    else
      result="UNEXPECTED: ${violated:-TLC exit $rc}"
    fi
  else
    if grep -q "Invariant $expect is violated" "$log"; then
      result="ok (expected violation: $expect)"
      depth=$(grep -c '^State [0-9]*:' "$log")  # length of the counterexample
    else
      result="UNEXPECTED: expected $expect to be violated, got ${violated:-no violation (TLC exit $rc)}"
    fi
  fi
  printf '%-24s distinct=%-9s depth=%-4s time=%4ss  %s\n' "$cfg" "${distinct:-?}" "${depth:-?}" \
      "$secs" "$result"
  if [[ "$result" != ok* ]]; then
    failed=1
    grep -E 'Error|violated|Exception' "$log" | head -5
    cp "$log" "${TMPDIR:-/tmp}/conclave-tlc-${cfg%.cfg}.log"
    echo "  full log: ${TMPDIR:-/tmp}/conclave-tlc-${cfg%.cfg}.log"
  fi
done
exit $failed
