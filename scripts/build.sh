#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configures and builds one flavour of Conclave.
#   scripts/build.sh [release|asan|tsan] [TARGET...]   -> build/<flavour> (all targets by default)
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
shift || true
# Sanitizer flavours leave the benchmarks out (their figures would mean nothing). The ASan build is
# unoptimised with line tables only (-g1): reports still name file and line, and the heaviest
# translation unit (admin/src/admin_server.cpp) compiles in 10 % less CPU than with -g; -O1 doubled it.
extra=()
case "$flavour" in
  # The release flavour is CMake's own Release (-O3 -DNDEBUG), what a packager builds, so that CI
  # proves it warning-free under -Werror.
  release) sanitize="" ; type=Release ;;
  asan)    sanitize="address,undefined" ; type=Debug
           extra=(-DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCONCLAVE_BUILD_BENCH=OFF) ;;
  # TSan at -O1 with line tables (-g1): reports name file, line and inlined frames; against
  # RelWithDebInfo's -O2 -g the heaviest translation unit compiles in 46 % less CPU.
  tsan)    sanitize="thread" ; type=RelWithDebInfo
           extra=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DCONCLAVE_BUILD_BENCH=OFF) ;;
  *) echo "build.sh: unknown flavour '$flavour' (expected release, asan or tsan)" >&2; exit 2 ;;
esac
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# ccache, when installed, is used; its base dir makes objects shareable between checkouts.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR=1
  # Precompiled headers (cmake/pch.cmake) are cacheable only with these (ccache manual,
  # "Precompiled headers"); the .gch is rebuilt just before its users, hence the mtime/ctime ones.
  export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
fi
cmake -S . -B "build/$flavour" "${generator[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE="$type" \
  -DCONCLAVE_SANITIZE="$sanitize" -DCONCLAVE_WERROR=ON "${extra[@]}" >/dev/null
targets=()
[ $# -gt 0 ] && targets=(--target "$@")
cmake --build "build/$flavour" -j "$(nproc)" "${targets[@]}"
