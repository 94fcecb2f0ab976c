#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The folder graph reads bottom-up: a file under a folder may include conclave/<area>/ headers only
# of the areas listed for that folder below (and its own). Top-level users (tools/, bench/,
# examples/, tests/, fuzz/, bounce/) are not checked. Prints each backward edge and fails on any.
#   layers_test.sh <source root>            the check (CTest: layering_test)
#   layers_test.sh --canary <fixture root>  must find the three edges planted in tests/tools/
#                                           layers_canary (CTest: layering_canary): the check bites
set -u
canary=0
if [ "${1:-}" = "--canary" ]; then
  canary=1
  shift
fi
root=${1:?usage: layers_test.sh [--canary] <source root>}

allowed() {
  case $1 in
    core) echo "core" ;;
    elector) echo "core elector" ;;
    replication) echo "core elector replication" ;;
    codec) echo "core elector replication codec" ;;
    runtime) echo "core elector replication runtime" ;;
    net) echo "core elector codec net" ;;
    drivers) echo "core elector replication codec runtime net drivers" ;;
    sim) echo "core elector replication codec runtime sim" ;;
    admin) echo "core elector replication codec runtime net drivers admin" ;;
    node) echo "core elector replication codec runtime net drivers admin node" ;;
    client) echo "core client" ;;
  esac
}

bad=0
for folder in core elector replication codec runtime net drivers sim admin node client; do
  [ -d "$root/$folder" ] || continue
  # One grep and one awk per folder: "file:line:#include "conclave/<area>/..."" for every
  # conclave include whose area is not in the folder's list.
  out=$(find "$root/$folder" -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \) \
          -exec grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]conclave/[a-z_]+/' {} + |
        awk -v ok=" $(allowed "$folder") " -v folder="$folder" -v root="$root/" '{
          area = $0
          sub(/.*[<"]conclave\//, "", area)
          sub(/\/.*/, "", area)
          if (index(ok, " " area " ") == 0) {
            line = $0
            if (index(line, root) == 1) line = substr(line, length(root) + 1)
            print "backward edge: " folder " -> " area ": " line
          }
        }')
  if [ -n "$out" ]; then
    printf '%s\n' "$out"
    bad=$((bad + $(printf '%s\n' "$out" | wc -l)))
  fi
done

if [ "$canary" = 1 ]; then
  # Every planted edge must be reported (net -> drivers, core -> elector, admin -> node).
  if [ "$bad" -ge 3 ]; then
    echo "canary: the check found the $bad planted backward edges"
    exit 0
  fi
  echo "canary: the check found only $bad of the 3 planted backward edges"
  exit 1
fi
if [ "$bad" -ne 0 ]; then
  echo "$bad backward include edge(s); see the layer table in $0 and drivers/README.md"
  exit 1
fi
echo "folder graph: no backward include edge"
