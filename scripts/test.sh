#!/usr/bin/env bash
# Installs the dependencies, builds Conclave, and runs every test: first the optimised build,
# then the whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer.
#   scripts/test.sh            everything (what CI runs)
#   scripts/test.sh --quick    the optimised build only
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

flavours=(release asan)
[ "${1:-}" = "--quick" ] && flavours=(release)

for flavour in "${flavours[@]}"; do
  echo "==> build ($flavour)"
  scripts/build.sh "$flavour"
  echo "==> test ($flavour)"
  ctest --test-dir "build/$flavour" --output-on-failure -j "$(nproc)"
done
