#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A plain CMake Release build, as a packager or a find_package user types it (no
# scripts/build.sh): the source tree configured afresh with -DCMAKE_BUILD_TYPE=Release and
# -DCONCLAVE_WERROR=ON, so that any warning fails it, tests and benchmarks left out, then every
# installed library and program built. ccache, when installed, serves what an earlier build with
# the same compile commands compiled (a tree at the same depth below the source, e.g. build/release
# and build/release-plain), so a run over an unchanged tree is cheap. The tree is removed after a
# success and kept after a failure.
#   plain_build_test.sh <source-dir> <build-dir> <c++-compiler> [--canary]
# --canary: the same configure with a header forced into every file that defines an unused
# function; passes only if the build fails on that warning (the check can fail).
set -euo pipefail
source=$1
build=$2
cxx=$3
canary=${4:-}
rm -rf "$build"
mkdir -p "$build"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$source" CCACHE_NOHASHDIR=1
  export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
fi
flags=()
targets=(conclave_core conclave_elector_model conclave_elector conclave_replication_model
  conclave_replication conclave_codec_json conclave_codec conclave_net conclave_net_frame
  conclave_drivers conclave_admin conclave_node conclave_client conclaved conclavectl
  conclave-certs)
if [ "$canary" = --canary ]; then
  printf 'static int conclave_plain_build_canary() { return 0; }\n' >"$build/canary.hpp"
  flags=(-DCMAKE_CXX_FLAGS="-include $build/canary.hpp")
  targets=(conclave_core)
fi
cmake -S "$source" -B "$build" "${generator[@]}" "${launcher[@]}" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=Release -DCONCLAVE_WERROR=ON -DCONCLAVE_BUILD_TESTS=OFF \
  -DCONCLAVE_BUILD_BENCH=OFF "${flags[@]}" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; echo "plain build test: configure failed" >&2; exit 1; }
status=0
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >"$build/build.log" 2>&1 || status=$?
if [ "$canary" = --canary ]; then
  if [ "$status" -ne 0 ] && grep -q "conclave_plain_build_canary" "$build/build.log"; then
    rm -rf "$build"
    echo "plain build canary ok: the planted warning failed the build"
    exit 0
  fi
  tail -20 "$build/build.log"
  echo "plain build canary: the planted warning did not fail the build" >&2
  exit 1
fi
if [ "$status" -ne 0 ]; then
  grep -E -B2 -A6 "(error|warning):" "$build/build.log" | head -80
  echo "plain build test: the Release build failed (warnings are errors here)" >&2
  exit 1
fi
rm -rf "$build"
echo "plain Release build ok with $cxx"
