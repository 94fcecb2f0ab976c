#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One command per benchmark figure; each prints the command, the machine and the figures.
# failover and cold-start compare with etcd and ZooKeeper when installed (interleaved run by run;
# each missing peer is skipped with a line saying how to install it).
# stores runs the naive lock recipes beside conclaved on one etcd cluster and one ZooKeeper
# ensemble (each store skipped with a line when not installed); not part of `all`.
#   bench/run.sh failover|cold-start|jitter|cost|restart|puts|stores|sim|log|all [options...]
# Binaries come from ${BUILD:-build/release}; build them with
#   scripts/build.sh release conclaved conclave-bench lock-recipe conclave-sim log_throughput
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/release}
figure=${1:-}
shift || true

usage() {
  echo "usage: bench/run.sh failover|cold-start|jitter|cost|restart|puts|stores|sim|log|all [options]" >&2
  echo "  options go to conclave-bench (see: $BUILD/bench/conclave-bench --help)," >&2
  echo "  or for log to log_throughput (see: $BUILD/bench/log_throughput --help)" >&2
  exit 2
}

machine() {
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), kernel $(uname -r), $(free -g | awk '/^Mem:/{print $2}') GiB RAM"
  echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  if awk '{exit !($1 > 1.5)}' /proc/loadavg; then
    echo "note:    the 1-minute load is above 1.5: other work on this machine disturbs the figures"
  fi
  if command -v etcd >/dev/null; then
    echo "etcd:    $(etcd --version 2>/dev/null | head -1)"
  fi
  if [ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null; then
    echo "zookeeper: $(dpkg-query -W -f='${Version}' zookeeper 2>/dev/null || echo installed)"
  fi
}

need() {
  for b in "$@"; do
    if [ ! -x "$BUILD/$b" ]; then
      echo "bench/run.sh: $BUILD/$b is missing; run: scripts/build.sh release conclaved conclave-bench lock-recipe conclave-sim log_throughput" >&2
      exit 1
    fi
  done
}

run_bench() {
  need tools/conclaved bench/conclave-bench
  if [ "${1:-}" = stores ]; then need bench/lock-recipe; fi
  echo "\$ $BUILD/bench/conclave-bench $*"
  "$BUILD/bench/conclave-bench" "$@"
}

run_sim() {
  need sim/conclave-sim
  for args in "--seeds 2000 --quiet" "--seeds 1000 --nodes 5 --quiet" "--seeds 2000 --faults none --quiet"; do
    echo "\$ $BUILD/sim/conclave-sim $args"
    # shellcheck disable=SC2086
    "$BUILD/sim/conclave-sim" $args | head -1
  done
  echo "(events/s: simulated network events and timer firings per wall-clock second, invariants"
  echo " checked after every step; seeds/s: random fault schedules per second; one core)"
}

run_log() {
  need bench/log_throughput
  # fsync never and batched at full size; always with fewer entries (one fsync per entry)
  if [ $# -gt 0 ]; then
    echo "\$ $BUILD/bench/log_throughput $*"
    "$BUILD/bench/log_throughput" "$@"
    return
  fi
  for args in "--fsync never,batched" "--entries 5000 --fsync always"; do
    echo "\$ $BUILD/bench/log_throughput $args"
    # shellcheck disable=SC2086
    "$BUILD/bench/log_throughput" $args
  done
}

one() {
  local f=$1
  shift
  echo "### bench/run.sh $f $*"
  machine
  case "$f" in
    failover|cold-start|jitter|cost|restart|puts|stores) run_bench "$f" "$@" ;;
    sim) run_sim ;;
    log) run_log "$@" ;;
    *) usage ;;
  esac
  echo
}

case "$figure" in
  failover|cold-start|jitter|cost|restart|puts|stores|sim|log) one "$figure" "$@" ;;
  all)
    status=0
    for f in sim log cost cold-start failover jitter restart; do
      if [ "$f" = sim ] || [ "$f" = log ]; then one "$f" || status=1; else one "$f" "$@" || status=1; fi
    done
    exit $status
    ;;
  *) usage ;;
esac
