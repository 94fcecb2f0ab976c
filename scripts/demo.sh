#!/usr/bin/env bash
# Installs the dependencies, builds Conclave and runs the leader-election demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release >/dev/null
exec build/release/tools/conclave-demo "$@"
