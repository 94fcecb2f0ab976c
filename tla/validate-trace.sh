#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks with TLC that simulator traces (NDJSON) are behaviours of Elector.tla.
#   tla/validate-trace.sh [--expect-fail] [--no-lease-steps] TRACE.ndjson...
# --no-lease-steps checks against Elector.tla with LeaseSteps = FALSE (the protocol without the
# leader lease's clock decisions), which must reject a trace whose steps the lease decided.
# Exit 0 when every trace validates (or, with --expect-fail, when every trace is rejected),
# 1 otherwise, 2 on bad usage or unreadable trace, 77 when TLC is not installed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
expect_fail=0
convert_opts=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --expect-fail) expect_fail=1; shift ;;
    --no-lease-steps) convert_opts+=(--no-lease-steps); shift ;;
    *) break ;;
  esac
done
if [[ $# -eq 0 ]]; then
  echo "usage: validate-trace.sh [--expect-fail] [--no-lease-steps] TRACE.ndjson..." >&2
  exit 2
fi
source "$here/tlc-env.sh"

status=0
for trace in "$@"; do
  work=$(mktemp -d "${TMPDIR:-/tmp}/conclave-trace.XXXXXX")
  cp "$here/Elector.tla" "$here/TraceElector.tla" "$work/"
  if ! python3 "$here/trace_to_tla.py" "${convert_opts[@]}" "$trace" "$work" >"$work/convert.log" 2>&1; then
    cat "$work/convert.log"
    rm -rf "$work"
    exit 2
  fi
  start=$(date +%s)
  (cd "$work" && "${TLC_CMD[@]}" -workers 1 -noGenerateSpecTE -metadir "$work/states" \
      -config TraceElector.cfg TraceElector.tla >"$work/tlc.log" 2>&1)
  rc=$?
  secs=$(( $(date +%s) - start ))
  steps=$(sed -n 's/^trace_to_tla: \([0-9]*\) steps.*/\1/p' "$work/convert.log")
  if [[ $rc -eq 0 ]] && grep -q "No error has been found" "$work/tlc.log"; then
    verdict=valid
  elif grep -q "Deadlock reached" "$work/tlc.log"; then
    # The last state printed holds i: the first trace step that did not match.
    i=$(grep -o '^/\\ i = [0-9]*' "$work/tlc.log" | tail -1 | grep -o '[0-9]*$')
    line=$(python3 - "$work/TraceData.tla" "${i:-0}" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
lines = re.search(r"TraceLine == <<(.*?)>>", text).group(1).split(",")
i = int(sys.argv[2])
print(lines[i - 1].strip() if 0 < i <= len(lines) else "?")
PY
)
    verdict="invalid: step $i (trace line $line) is not a behaviour of Elector.tla"
  elif grep -q "is violated" "$work/tlc.log"; then
    verdict="invalid: $(grep -m1 'is violated' "$work/tlc.log")"
  else
    verdict="error: TLC failed (exit $rc); log kept in $work/tlc.log"
    status=1
    echo "$trace: $verdict"
    tail -20 "$work/tlc.log"
    continue
  fi
  echo "$trace: ${steps:-?} steps, $verdict (${secs}s)"
  if [[ $expect_fail -eq 0 && "$verdict" != valid ]]; then
    grep -A3 '^State [0-9]*:' "$work/tlc.log" | tail -4 | cut -c1-400
    status=1
  elif [[ $expect_fail -eq 1 && "$verdict" == valid ]]; then
    echo "$trace: expected TLC to reject this trace"
    status=1
  fi
  rm -rf "$work"
done
exit $status
