#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Which leader-half steps do these simulator NDJSON traces take?

    trace_leader_steps.py [--require] TRACE.ndjson...

Prints, for each kind of step below, how many times the traces take it and the first
(trace, line). With --require, exits 1 unless every kind is taken at least once, so that the
trace validation of tests/tla/sim-traces.sh cannot quietly stop covering the leader half.

  preempted-leader  HandleLeaderHeartbeat at a leader, from a higher term (it steps down)
  transfer          TransferLeadership (the operator's hand-over, accepted by the leader)
  checkquorum-down  CheckQuorumFired at a leader that steps down
  cession           HandleLeadershipCession that changes the follower's state
  corroboration     HandleScoutingRequest at a follower that drops its leader (one check short)
"""
import json
import sys

KINDS = ["preempted-leader", "transfer", "checkquorum-down", "cession", "corroboration"]


def scan(path, found):
    before = {}  # node -> state after its previous step
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            obj = json.loads(line)
            if obj.get("kind") != "step":
                continue
            n, action, after = obj["node"], obj["action"], obj["state"]
            prev = before.get(n)
            kind = None
            if prev is not None and prev["role"] == "leader":
                if (action == "HandleLeaderHeartbeat" and obj["msg"]["term"] > prev["term"]
                        and after["role"] == "follower"):
                    kind = "preempted-leader"
                elif action == "TransferLeadership" and after["role"] == "follower":
                    kind = "transfer"
                elif action == "CheckQuorumFired" and after["role"] == "follower":
                    kind = "checkquorum-down"
            if action == "HandleLeadershipCession" and prev is not None and prev != after:
                kind = "cession"
            if (action == "HandleScoutingRequest" and prev is not None
                    and prev["role"] == "follower" and prev["leader"] is not None
                    and after["leader"] is None):
                kind = "corroboration"
            if kind:
                found.setdefault(kind, []).append((path, lineno))
            before[n] = after


def main(argv):
    require = argv[:1] == ["--require"]
    paths = argv[1:] if require else argv
    found = {}
    for p in paths:
        scan(p, found)
    missing = []
    for k in KINDS:
        hits = found.get(k, [])
        where = f"first: {hits[0][0]} line {hits[0][1]}" if hits else "NOT TAKEN"
        print(f"trace_leader_steps: {k:17} {len(hits):5}  {where}")
        if not hits:
            missing.append(k)
    if require and missing:
        print("trace_leader_steps: the traces miss " + ", ".join(missing))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
