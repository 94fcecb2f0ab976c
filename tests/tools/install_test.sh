#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then configures and builds a consumer project
# with find_package(conclave), runs it, and checks the pkg-config file.
#   install_test.sh <build-dir> <consumer-source-dir>
set -euo pipefail
build=$1
consumer=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$consumer" -B "$tmp/build" "${generator[@]}" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/build" >/dev/null
"$tmp/build/consumer"
if command -v pkg-config >/dev/null; then
  PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs conclave | grep -q lconclave_node
fi
ls "$tmp/prefix/bin/conclaved" >/dev/null
echo "install test ok"
