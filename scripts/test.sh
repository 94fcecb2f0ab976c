#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the dependencies, builds Conclave, and runs every test: first the optimised build,
# then the whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer, then the
# networking tests (the only multi-threaded-capable code: Asio, TLS) and the Node API called from
# several threads (node_thread_tests) under ThreadSanitizer. Run as root (CI's container), the
# release suite also builds, installs and purges the Debian package (conclave_deb_test).
#   scripts/test.sh            everything (what CI runs)
#   scripts/test.sh --quick    the optimised build only
# Each sanitizer build runs in the background, at the lowest CPU priority, beside the tests of
# the flavour before it. Each phase prints its wall time ("--> phase: N s") and a summary table at
# the end, so that CI logs show where the time goes.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
phases=()
# cpu_seconds VAR: sets VAR to the CPU time (user + system, whole seconds) used so far by this
# script's finished children. `times` runs in this shell (a command substitution would fork a
# fresh process whose children's times start at zero), its output goes through a file.
times_file=$(mktemp)
cpu_seconds() {
  times >"$times_file"
  # Last line: "XmY.YYYs XmY.YYYs" (user, system).
  printf -v "$1" '%s' "$(awk 'END { s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]);
                                      s += a[1] * 60 + a[2] } printf "%d", s }' "$times_file")"
}
# phase NAME COMMAND...: runs the command, prints and records its wall time and the CPU time it
# used (CPU time hardly depends on what else the machine runs, so it shows the real cost).
phase() {
  local name=$1
  shift
  echo "==> $name"
  local t0=$SECONDS c0 c1
  cpu_seconds c0
  "$@"
  cpu_seconds c1
  local took=$((SECONDS - t0)) cpu=$((c1 - c0))
  echo "--> $name: ${took} s wall, ${cpu} s CPU"
  phases+=("$(printf '%-58s %5d s wall %6d s CPU' "$name" "$took" "$cpu")")
}
summary() {
  echo "==> time per phase"
  printf '  %s\n' "${phases[@]}"
  local c
  cpu_seconds c
  printf '  %-58s %5d s wall %6d s CPU\n' total "$((SECONDS - start))" "$c"
  rm -f "$times_file"
  if [ -n "${tlc_missing:-}" ]; then echo "$tlc_missing" >&2; fi
}
trap summary EXIT

phase "install dependencies" scripts/install-deps.sh --tests

# TLC (the TLA+ model checker) is in no Debian package: tests/tla runs it from TLA2TOOLS_JAR (a
# tla2tools.jar) or a `tlc` on PATH. Without one the TLA+ tests are skipped on a user's machine
# (said here and again at the end) and fail in CI (tla/tlc-env.sh).
tlc_missing=""
if ! { [ -n "${TLA2TOOLS_JAR:-}" ] && [ -f "${TLA2TOOLS_JAR}" ]; } && ! command -v tlc >/dev/null; then
  tlc_missing="WARNING: no TLC (set TLA2TOOLS_JAR to a tla2tools.jar, built from the public tlaplus/tlaplus repository): the TLA+ model checks (tla_models_*, tla_trace_*) are SKIPPED"
  echo "$tlc_missing" >&2
fi

# Formatting: every tracked C++ file as .clang-format says (Debian's clang-format 14).
format_check() {
  local bad
  bad=$(git ls-files '*.cpp' '*.hpp' '*.h' | xargs clang-format --dry-run -Werror 2>&1 \
        | grep -o '^[^: ]*\.[ch]pp' | sort -u || true)
  if [ -n "$bad" ]; then
    echo "clang-format disagrees with (run clang-format -i on them):" >&2
    echo "$bad" >&2
    return 1
  fi
}
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  phase "format check" format_check
fi

# The next flavour's build runs in the background while this flavour's tests run, at the lowest
# CPU priority (nice 19): it takes only the CPU the tests leave idle (the real-process tests
# mostly wait), and the tests keep theirs. Its output goes to build/<flavour>-build.log, printed
# when the build is waited for; its phase's CPU time is the whole build's.
# It runs in a session of its own, so that a failed phase can kill all of it. Where the kernel
# groups the scheduling of a session (sched(7), "The autogroup feature"), a new session weighs as
# much as the tests' and a nice value counts only within its group: the build would take half the
# machine. So the group's own nice value is set to 19 too (/proc/self/autogroup).
bg_pid=""
bg_build() {  # bg_build FLAVOUR [TARGET...]
  mkdir -p build
  setsid nice -n 19 bash -c '{ echo 19 >/proc/self/autogroup; } 2>/dev/null; exec scripts/build.sh "$@"' \
    bg_build "$@" >"build/$1-build.log" 2>&1 &
  bg_pid=$!
}
bg_wait() {  # bg_wait FLAVOUR: the background build's log, and its exit status
  local status=0
  wait "$bg_pid" || status=$?
  bg_pid=""
  cat "build/$1-build.log"
  return "$status"
}
# A failed phase ends the script: its background build goes with it.
trap '[ -n "$bg_pid" ] && kill -- "-$bg_pid" 2>/dev/null; summary' EXIT

tests() {  # tests FLAVOUR [ctest args]: the flavour's suite, as many at once as there are cores
  local flavour=$1
  shift
  ctest --test-dir "build/$flavour" --output-on-failure -j "$(nproc)" "$@"
}
# node_thread_tests: the Node API called from several threads while the node runs.
# client_tests: the admin client against a test server on another thread.
tsan_tests=(net_unit_tests net_cluster_tests net_bad_input_tests net_tls_tests node_thread_tests
            client_tests)
tsan_regex="^($(IFS='|'; echo "${tsan_tests[*]}"))\$"

phase "build (release)" scripts/build.sh release
if [ "${1:-}" = "--quick" ]; then
  phase "test (release)" tests release
else
  bg_build asan
  phase "test (release; asan build beside)" tests release
  phase "build (asan: the rest)" bg_wait asan
  bg_build tsan "${tsan_tests[@]}"
  phase "test (asan; tsan build beside)" tests asan
  phase "build (tsan: net + node thread tests + client; the rest)" bg_wait tsan
  phase "test (tsan)" tests tsan -R "$tsan_regex"
fi
echo "==> all tests passed in $((SECONDS - start)) s"
