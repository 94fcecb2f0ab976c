# SPDX-License-Identifier: Apache-2.0
# Sourced by check.sh and validate-trace.sh: finds TLC.
# Sets the array TLC_CMD. Without TLC: in CI (CI=true) prints why and exits 1, so that a CI run
# can never pass without model checking; elsewhere prints the skip line and exits 77 (CTest's
# "skipped"; scripts/test.sh repeats it in its summary).
if [[ -n "${TLA2TOOLS_JAR:-}" && -f "${TLA2TOOLS_JAR}" ]] && command -v java >/dev/null 2>&1; then
  TLC_CMD=(java -XX:+UseParallelGC -cp "${TLA2TOOLS_JAR}" tlc2.TLC)
elif command -v tlc >/dev/null 2>&1; then
  TLC_CMD=(tlc)
else
  why="TLC not found: set TLA2TOOLS_JAR to a tla2tools.jar (and install Java: apt-get install default-jre-headless) or put tlc on PATH"
  [[ -n "${TLA2TOOLS_JAR:-}" && ! -f "${TLA2TOOLS_JAR}" ]] && why="TLA2TOOLS_JAR=${TLA2TOOLS_JAR}: no such file"
  [[ -n "${TLA2TOOLS_JAR:-}" && -f "${TLA2TOOLS_JAR}" ]] && why="TLA2TOOLS_JAR is set but java is not installed (apt-get install default-jre-headless)"
  if [[ "${CI:-}" == true ]]; then
    echo "$why; CI=true, so this is a failure, not a skip"
    exit 1
  fi
  echo "$why; skipping"
  exit 77
fi
# TLC workers (tlc_workers, asked before each run): TLC_WORKERS when it is set; otherwise the
# cores that no other process wants right now, at least one: the fewest other runnable tasks seen
# in five looks 20 ms apart (/proc/loadavg), and at least one core for each other check.sh running
# (CTest runs the groups side by side, and at their common start neither TLC is runnable yet). On
# a busy machine a second worker only contends with the other work for the same cores, and costs
# more CPU for the same states.
tlc_workers() {
  if [[ -n "${TLC_WORKERS:-}" ]]; then
    echo "$TLC_WORKERS"
    return
  fi
  local cores others=1000000 runnable i peers
  cores=$(nproc 2>/dev/null || echo 1)
  if (( cores <= 1 )); then
    echo 1
    return
  fi
  for i in 1 2 3 4 5; do
    read -r _ _ _ runnable _ </proc/loadavg 2>/dev/null || { echo 1; return; }
    runnable=$(( ${runnable%/*} - 1 ))  # less the task reading it
    (( runnable < others )) && others=$runnable
    (( i < 5 )) && sleep 0.02
  done
  (( others < 0 )) && others=0
  peers=$(tlc_peer_scripts)
  (( peers > others )) && others=$peers
  (( cores - others >= 1 )) && echo $(( cores - others )) || echo 1
}

# The other check.sh invocations running now: processes whose command line runs a check.sh and
# whose parent does not (a check.sh's own subshells have its command line too), less this one.
tlc_peer_scripts() {
  local n=0 pid ppid pattern='(^|/| )check\.sh( |$)'
  for pid in $(pgrep -f "$pattern" 2>/dev/null); do
    [[ $pid == "$$" ]] && continue
    ppid=$(awk '{ print $4 }' "/proc/$pid/stat" 2>/dev/null) || continue
    [[ -z $ppid ]] && continue
    tr '\0' ' ' <"/proc/$ppid/cmdline" 2>/dev/null | grep -Eq "$pattern" && continue
    n=$(( n + 1 ))
  done
  echo "$n"
}
