#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Which leader-half and leader-lease steps do these simulator NDJSON traces take?

    trace_leader_steps.py [--require | --require=KIND,KIND...] TRACE.ndjson...

Prints, for each kind of step below, how many times the traces take it and the first
(trace, line). With --require, exits 1 unless every kind of the leader half and the lease (the
list up to start-promise) is taken at least once, so that the trace validation of
tests/tla/sim-traces.sh cannot quietly stop covering the leader half; --require=KINDS requires
the kinds named (tests/tla/daemon-traces.py).

  preempted-leader  HandleLeaderHeartbeat at a leader, from a higher term (it steps down)
  transfer          TransferLeadership (the operator's hand-over, accepted by the leader: its
                    cession names the successor)
  checkquorum-down  CheckQuorumFired at a leader that steps down having heard from fewer than a
                    quorum of its voters (itself included) since the last check
  cession           HandleLeadershipCession that changes the follower's state
  corroboration     HandleScoutingRequest at a follower that drops its leader (its promise ended)
  lease-expiry      a leader that steps down on HeartbeatBroadcastFired, or on CheckQuorumFired
                    having heard from a quorum, or within its term on a message or a PeerUp: only
                    the lease check (LeaseExpires) ends a leadership there
  start-promise     a follower without a leader that does not stand when its wait fires, or
                    refuses a scouting request for a newer term with no membership refusal:
                    only a start promise withholds it
  elected           a node that becomes the leader
  crash             Crash (a process killed; merge_daemon_traces.py writes it between processes)
  restart           Restart (a new process of a crashed node starts)
  local-close       PeerDown that the node itself decided (conclaved's trace: "loss": "local")
  promise-refusal   HandleScoutingRequest of a newer term at a follower that keeps its leader
                    and refuses (its promise holds)
"""
import json
import sys

KINDS = ["preempted-leader", "transfer", "checkquorum-down", "cession", "corroboration",
         "lease-expiry", "start-promise"]
EXTRA_KINDS = ["elected", "crash", "restart", "local-close", "promise-refusal"]


def heard_quorum(node, state, quorum):
    heard = (set(state["heard_since_check"]) | {node}) & set(state["voters"])
    return len(heard) >= quorum


def withheld_by_start_promise(obj, prev, after):
    """A leaderless voter follower that neither stands nor supports a newer term."""
    n, action = obj["node"], obj["action"]
    if (prev["role"] != "follower" or prev["leader"] is not None
            or prev["tentative_leader"] is not None or n not in prev["voters"]):
        return False
    if action in ("InitialWaitFired", "RandomWaitFired"):
        return (obj["timer"] in prev["armed_timers"] and after["role"] == "follower"
                and after["round"]["id"] == 0)
    if action == "HandleScoutingRequest" and obj["msg"]["term"] > prev["term"]:
        return any(m["type"] == "ScoutingResponse" and not m["will_vote"] and "refusal" not in m
                   for m in obj["sent"])
    return False


def other_kind(obj, prev, after):
    if after["role"] == "leader" and (prev is None or prev["role"] != "leader"):
        return "elected"
    if obj["action"] in ("Crash", "Restart"):
        return obj["action"].lower()
    if obj["action"] == "PeerDown" and obj.get("loss") == "local":
        return "local-close"
    if (obj["action"] == "HandleScoutingRequest" and prev is not None
            and prev["role"] == "follower" and prev["leader"] is not None
            and after["leader"] == prev["leader"] and obj["msg"]["term"] > prev["term"]
            and any(m["type"] == "ScoutingResponse" and not m["will_vote"] for m in obj["sent"])):
        return "promise-refusal"
    return None


def scan(path, found):
    before = {}  # node -> state after its previous step
    quorum = None
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            obj = json.loads(line)
            if obj.get("kind") == "header":
                quorum = obj["quorum"]
            if obj.get("kind") != "step":
                continue
            n, action, after = obj["node"], obj["action"], obj["state"]
            prev = before.get(n)
            kind = None
            if prev is not None and prev["role"] == "leader":
                if (action == "HandleLeaderHeartbeat" and obj["msg"]["term"] > prev["term"]
                        and after["role"] == "follower"):
                    kind = "preempted-leader"
                elif (action == "TransferLeadership" and after["role"] == "follower"
                      and any(m.get("successor") is not None for m in obj["sent"])):
                    kind = "transfer"
                elif action == "CheckQuorumFired" and after["role"] == "follower":
                    kind = ("lease-expiry" if heard_quorum(n, prev, quorum)
                            else "checkquorum-down")
                elif action == "HeartbeatBroadcastFired" and after["role"] == "follower":
                    kind = "lease-expiry"
                elif ((action.startswith("Handle") or action == "PeerUp")
                      and after["role"] == "follower" and after["term"] == prev["term"]):
                    kind = "lease-expiry"  # no handler deposes a leader within its term
            if action == "HandleLeadershipCession" and prev is not None and prev != after:
                kind = "cession"
            if (action == "HandleScoutingRequest" and prev is not None
                    and prev["role"] == "follower" and prev["leader"] is not None
                    and after["leader"] is None):
                kind = "corroboration"
            if kind is None and prev is not None and withheld_by_start_promise(obj, prev, after):
                kind = "start-promise"
            if kind:
                found.setdefault(kind, []).append((path, lineno))
            extra = other_kind(obj, prev, after)
            if extra:
                found.setdefault(extra, []).append((path, lineno))
            before[n] = after


def main(argv):
    required = []
    paths = argv
    if argv[:1] == ["--require"]:
        required, paths = KINDS, argv[1:]
    elif argv[:1] and argv[0].startswith("--require="):
        required, paths = argv[0].split("=", 1)[1].split(","), argv[1:]
        unknown = [k for k in required if k not in KINDS + EXTRA_KINDS]
        if unknown:
            print(f"trace_leader_steps: unknown kinds {unknown}", file=sys.stderr)
            return 2
    found = {}
    for p in paths:
        scan(p, found)
    missing = []
    for k in KINDS + EXTRA_KINDS:
        hits = found.get(k, [])
        where = f"first: {hits[0][0]} line {hits[0][1]}" if hits else "NOT TAKEN"
        print(f"trace_leader_steps: {k:17} {len(hits):5}  {where}")
        if not hits and k in required:
            missing.append(k)
    if missing:
        print("trace_leader_steps: the traces miss " + ", ".join(missing))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
