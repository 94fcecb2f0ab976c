#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the build tree into a temporary prefix, one component at a time (the runtime and dev
# packages' contents), then against that prefix: configures and builds a consumer project with
# find_package(conclave) and runs it; builds examples/broker on its own, out of the tree; links the
# broker into a program and runs it; checks the pkg-config file.
#   install_test.sh <build-dir> <consumer-source-dir> <broker-source-dir>
set -euo pipefail
build=$1
consumer=$2
broker=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install test: $*" >&2; exit 1; }
cmake --install "$build" --prefix "$tmp/runtime" --component runtime >/dev/null
cmake --install "$build" --prefix "$tmp/prefix" --component dev >/dev/null
arch=$(sed -n "s/^CMAKE_INSTALL_LIBDIR:PATH=//p" "$build/CMakeCache.txt")
[ -n "$arch" ] || fail "no CMAKE_INSTALL_LIBDIR in $build"
if triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null); then
  [ "$arch" = "lib/$triplet" ] || fail "libraries go to $arch, not the multiarch lib/$triplet"
fi
[ -x "$tmp/runtime/bin/conclaved" ] || fail "the runtime component has no bin/conclaved"
[ -z "$(find "$tmp/runtime" -name '*.a' -o -name '*.hpp')" ] || fail "runtime component holds headers or libraries"
for lib in node admin; do
  [ -e "$tmp/prefix/$arch/libconclave_$lib.a" ] || fail "the dev component has no $arch/libconclave_$lib.a"
done
[ ! -e "$tmp/prefix/bin" ] || fail "the dev component holds programs"
grep -rq conclave_warnings "$tmp/prefix/$arch/cmake" && fail "the CMake package names conclave_warnings"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$consumer" -B "$tmp/build" "${generator[@]}" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCONSUMER_BROKER_DIR="$broker" >/dev/null
cmake --build "$tmp/build" >/dev/null
"$tmp/build/consumer"
"$tmp/build/broker_consumer"
cmake -S "$broker" -B "$tmp/broker" "${generator[@]}" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/broker" >/dev/null
echo "examples/broker built out of tree"
if command -v pkg-config >/dev/null; then
  PKG_CONFIG_PATH="$tmp/prefix/$arch/pkgconfig" pkg-config --cflags --libs conclave | grep -q lconclave_node
fi
echo "install test ok"
