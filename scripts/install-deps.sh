#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs Conclave's build and test dependencies from Debian's packages.
# Idempotent: does nothing (and says nothing) when everything is already installed.
#   scripts/install-deps.sh           what the build and the demo need
#   scripts/install-deps.sh --tests   also Java, which runs TLC (the TLA+ model checker) in the tests,
#                                     and ip, nft and libfaketime for tests/netns (the namespace test bed),
#                                     and the etcd and ZooKeeper servers of the store-backend tests
#   scripts/install-deps.sh --bench   also etcd 3.4 (etcd-server), the peer of bench/run.sh failover,
#                                     cold-start and puts
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libboost1.81-dev nlohmann-json3-dev catch2 libspdlog-dev libfmt-dev
  libssl-dev openssl python3 curl clang-format ccache libcli11-dev libzookeeper-mt-dev
  zlib1g-dev
)
# zookeeper: the server's jars and scripts only (the service is Debian's zookeeperd, not installed);
# the tests start a standalone server on loopback themselves.
[ "${1:-}" = "--tests" ] && packages+=(default-jre-headless iproute2 nftables faketime zookeeper)
[ "${1:-}" = "--bench" ] && packages+=(etcd-server)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "$(id -u)" -eq 0 ]; then sudo=(); else sudo=(sudo); fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# promtool (ctest metrics_promtool_test) comes from Debian's prometheus package (19 MB download).
# Only its promtool is taken, into /usr/local/bin: installing the package would also install the
# Prometheus server, whose postinst starts it through its init script where systemd does not run
# (a CI container), listening on port 9090. Without it the test is skipped, loudly.
if ! command -v promtool >/dev/null; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "install-deps: extracting promtool from Debian's prometheus package" >&2
  if (cd "$tmp" && apt-get download -qq prometheus 2>/dev/null ||
      { "${sudo[@]}" apt-get update -qq && apt-get download -qq prometheus 2>/dev/null; }) &&
     dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -x -C "$tmp" ./usr/bin/promtool; then
    "${sudo[@]}" install -m 0755 "$tmp/usr/bin/promtool" /usr/local/bin/promtool
  else
    echo "install-deps: WARNING: could not get promtool; metrics_promtool_test will be skipped" >&2
  fi
fi

# etcd (ctest store_backend_etcd_tests) comes from Debian's etcd-server package. Only its etcd binary
# is taken, into /usr/local/bin: the package's postinst starts the etcd service through its init
# script where systemd does not run (a CI container), listening on 127.0.0.1:2379. The tests start
# their own etcd on free loopback ports. Without it the test is skipped, loudly.
if [ "${1:-}" = "--tests" ] && ! command -v etcd >/dev/null; then
  tmp_etcd=$(mktemp -d)
  echo "install-deps: extracting etcd from Debian's etcd-server package" >&2
  if (cd "$tmp_etcd" && apt-get download -qq etcd-server 2>/dev/null ||
      { "${sudo[@]}" apt-get update -qq && apt-get download -qq etcd-server 2>/dev/null; }) &&
     dpkg-deb --fsys-tarfile "$tmp_etcd"/etcd-server_*.deb | tar -x -C "$tmp_etcd" ./usr/bin/etcd; then
    "${sudo[@]}" install -m 0755 "$tmp_etcd/usr/bin/etcd" /usr/local/bin/etcd
  else
    echo "install-deps: WARNING: could not get etcd; store_backend_etcd_tests will be skipped" >&2
  fi
  rm -rf "$tmp_etcd"
fi
