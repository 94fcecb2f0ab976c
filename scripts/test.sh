#!/usr/bin/env bash
# Installs the dependencies, builds Conclave, and runs every test: first the optimised build,
# then the whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer, then the
# networking tests (the only multi-threaded-capable code: Asio, TLS) under ThreadSanitizer.
#   scripts/test.sh            everything (what CI runs)
#   scripts/test.sh --quick    the optimised build only
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

start=$SECONDS
flavours=(release asan)
[ "${1:-}" = "--quick" ] && flavours=(release)

for flavour in "${flavours[@]}"; do
  echo "==> build ($flavour)"
  scripts/build.sh "$flavour"
  echo "==> test ($flavour)"
  ctest --test-dir "build/$flavour" --output-on-failure -j "$(nproc)"
done

if [ "${1:-}" != "--quick" ]; then
  tsan_tests=(net_unit_tests net_cluster_tests net_bad_input_tests net_tls_tests)
  echo "==> build (tsan: ${tsan_tests[*]})"
  scripts/build.sh tsan "${tsan_tests[@]}"
  echo "==> test (tsan)"
  regex="^($(IFS='|'; echo "${tsan_tests[*]}"))\$"
  ctest --test-dir build/tsan --output-on-failure -j "$(nproc)" -R "$regex"
fi
echo "==> all tests passed in $((SECONDS - start)) s"
