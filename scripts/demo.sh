#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the dependencies, builds conclaved and leader-bounce, and runs the demo: real conclaved
# processes on 127.0.0.1 behind leader-bounce's fault proxy, in the BlazingMQ article's scenarios.
#   1. ping-pong  (4 nodes, only the A-B link cut), scouting on vs off
#   2. non-sticky (4 nodes, B isolated then healed), scouting on vs off
#   3. leader-crash (3 nodes, SIGKILL the leader, restart it later)
# Pictures of the three runs are written to demo-out/ (self-contained HTML with an SVG timeline).
# Any extra arguments are passed to every leader-bounce run (see leader-bounce --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
echo "==> building conclaved and leader-bounce (first time: a few minutes)"
scripts/build.sh release conclaved leader-bounce >/dev/null
bounce=build/release/bounce/leader-bounce
out=demo-out
mkdir -p "$out"
status=0
"$bounce" ping-pong --compare --html "$out/ping-pong.html" "$@" || status=$?
"$bounce" non-sticky --compare --html "$out/non-sticky.html" "$@" || status=$?
"$bounce" leader-crash --html "$out/leader-crash.html" "$@" || status=$?
echo
echo "Timelines: $out/ping-pong.html  $out/non-sticky.html  $out/leader-crash.html"
echo "(The same scenarios in the deterministic simulator: build/release/tools/conclave-demo)"
exit "$status"
