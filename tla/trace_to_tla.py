#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Converts a simulator NDJSON trace (see TRACE format in tla/README.md) into
TraceData.tla and TraceElector.cfg for TraceElector.tla.

    trace_to_tla.py [--no-lease-steps] TRACE.ndjson OUT_DIR

TraceLeaseSteps (Elector's LeaseSteps: the leader lease's clock decisions as nondeterminism) is
TRUE, the core the simulator runs; --no-lease-steps sets it FALSE, the protocol without the
lease, which must reject a trace in which the lease decided a step (tests/tla/sim-traces.sh).

Bad input gives one error line naming the trace line and the field, exit 2.
"""
import json
import sys

ACTIONS = {
    "Start", "Stop", "Crash", "Restart", "IssueLsn", "PeerUp", "PeerDown",
    "TransferLeadership", "InitialWaitFired", "RandomWaitFired",
    "ScoutingResultFired", "ElectionResultFired", "HeartbeatBroadcastFired",
    "HeartbeatCheckFired", "CheckQuorumFired", "HandleScoutingRequest",
    "HandleScoutingResponse", "HandleElectionProposal", "HandleElectionResponse",
    "HandleLeaderHeartbeat", "HandleHeartbeatAck", "HandleHeartbeatResponse",
    "HandleLeadershipCession", "SetVoters",
}
PEER_ACTIONS = {"PeerUp", "PeerDown", "TransferLeadership"}
MSG_TYPES = {
    "ScoutingRequest", "ScoutingResponse", "ElectionProposal", "ElectionResponse",
    "LeaderHeartbeat", "HeartbeatAck", "HeartbeatResponse", "LeadershipCession",
}
ROLES = {"stopped", "follower", "candidate", "leader"}
TIMERS = {"InitialWait", "RandomWait", "ScoutingResult", "ElectionResult",
          "HeartbeatBroadcast", "HeartbeatCheck", "CheckQuorum"}
REFUSALS = {"none", "stale-term", "already-voted", "has-leader", "i-am-leader",
            "stale-config", "not-a-voter"}
# A ScoutingResponse names only the membership refusals (absent: none).
SCOUTING_REFUSALS = {"none", "stale-config", "not-a-voter"}


class TraceError(Exception):
    pass


class Converter:
    def __init__(self, lease_steps=True):
        self.line = 0
        self.nodes = 0
        self.lease_steps = lease_steps

    def fail(self, where, what):
        raise TraceError(f"line {self.line}: {where}: {what}")

    # ---- typed field readers --------------------------------------------------------------
    def get(self, obj, key, where):
        if not isinstance(obj, dict):
            self.fail(where, "expected an object")
        if key not in obj:
            self.fail(f"{where}.{key}", "missing")
        return obj[key]

    def nat(self, obj, key, where):
        v = self.get(obj, key, where)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            self.fail(f"{where}.{key}", f"expected a non-negative integer, got {v!r}")
        return str(v)

    def boolean(self, obj, key, where):
        v = self.get(obj, key, where)
        if not isinstance(v, bool):
            self.fail(f"{where}.{key}", f"expected true or false, got {v!r}")
        return "TRUE" if v else "FALSE"

    def node_value(self, v, where):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < self.nodes:
            self.fail(where, f"expected a node index 0..{self.nodes - 1}, got {v!r}")
        return str(v)

    def node(self, obj, key, where):
        return self.node_value(self.get(obj, key, where), f"{where}.{key}")

    def node_or_nil(self, obj, key, where):
        v = self.get(obj, key, where)
        return "Nil" if v is None else self.node_value(v, f"{where}.{key}")

    def node_set(self, obj, key, where):
        v = self.get(obj, key, where)
        if not isinstance(v, list):
            self.fail(f"{where}.{key}", f"expected an array of node indices, got {v!r}")
        return "{" + ", ".join(self.node_value(x, f"{where}.{key}") for x in v) + "}"

    def enum(self, obj, key, where, allowed):
        v = self.get(obj, key, where)
        if v not in allowed:
            self.fail(f"{where}.{key}", f"expected one of {sorted(allowed)}, got {v!r}")
        return json.dumps(v)

    def lsn(self, obj, key, where):
        v = self.get(obj, key, where)
        w = f"{where}.{key}"
        return f"[term |-> {self.nat(v, 'term', w)}, counter |-> {self.nat(v, 'counter', w)}]"

    # ---- messages and states --------------------------------------------------------------
    def message(self, m, where, default_to=None):
        if not isinstance(m, dict):
            self.fail(where, "expected a message object")
        mtype = self.enum(m, "type", where, MSG_TYPES)
        t = json.loads(mtype)
        to = self.node(m, "to", where) if ("to" in m or default_to is None) else default_to
        fields = {
            "type": mtype, "from": self.node(m, "from", where), "to": to,
            "term": self.nat(m, "term", where), "round": "0", "will_vote": "FALSE",
            "transfer": "FALSE", "granted": "FALSE", "refusal": '"none"',
            "voter_term": "0", "lsn": "[term |-> 0, counter |-> 0]", "successor": "Nil",
            "config_version": "0",
        }
        for key, (read, optional) in BODY_FIELDS[t].items():
            if read is None or (optional and key not in m):
                continue  # dropped, or written only when not at its default (codec/)
            fields[key] = read(self, m, key, where)
        return "[" + ", ".join(f"{k} |-> {v}" for k, v in fields.items()) + "]"

    def state(self, s, where, keep_config=None):
        """keep_config: (voters, config_version) JSON values to use instead of the record's
        (a Crash record: see convert())."""
        rnd = self.get(s, "round", where)
        rw = f"{where}.round"
        timers = self.get(s, "armed_timers", where)
        if not isinstance(timers, list) or any(t not in TIMERS for t in timers):
            self.fail(f"{where}.armed_timers", f"expected an array of {sorted(TIMERS)}")
        fields = {
            "role": self.enum(s, "role", where, ROLES),
            "term": self.nat(s, "term", where),
            "voted_for": self.node_or_nil(s, "voted_for", where),
            "leader": self.node_or_nil(s, "leader", where),
            "tentative_leader": self.node_or_nil(s, "tentative_leader", where),
            "supporters": self.node_set(s, "supporters", where),
            "refusals": self.node_set(s, "refusals", where),
            "heard_since_check": self.node_set(s, "heard_since_check", where),
            "peers_up": self.node_set(s, "peers_up", where),
            "missed_checks": self.nat(s, "missed_checks", where),
            "round": (f"[id |-> {self.nat(rnd, 'id', rw)}, term |-> {self.nat(rnd, 'term', rw)}, "
                      f"yes |-> {self.node_set(rnd, 'yes', rw)}, "
                      f"no |-> {self.node_set(rnd, 'no', rw)}]"),
            "last_round_id": self.nat(s, "last_round_id", where),
            "lsn": self.lsn(s, "lsn", where),
            "armed_timers": "{" + ", ".join(json.dumps(t) for t in timers) + "}",
        }
        # Traces written before the membership fields: the default configuration.
        cfg_src = {"voters": s.get("voters", list(range(self.nodes))),
                   "config_version": s.get("config_version", 0)}
        if keep_config is not None:
            cfg_src = {"voters": keep_config[0], "config_version": keep_config[1]}
        fields["voters"] = self.node_set(cfg_src, "voters", where)
        fields["config_version"] = self.nat(cfg_src, "config_version", where)
        return "[" + ", ".join(f"{k} |-> {v}" for k, v in fields.items()) + "]"

    # ---- the trace --------------------------------------------------------------------------
    def convert(self, lines):
        header = None
        steps = []
        step_lines = []
        misses_seen = 0          # largest missed_checks in any state
        misses_stepdown = None   # threshold implied by a HeartbeatCheckFired step-down
        last = {}                # node -> last state (JSON) seen
        configs = {}             # config_version -> voters, as first seen in a state
        for self.line, text in enumerate(lines, start=1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                self.fail("json", str(e))
            kind = self.get(obj, "kind", "record")
            if kind == "header":
                if header is not None:
                    self.fail("kind", "a second header")
                header = obj
                if self.get(obj, "version", "header") != 1:
                    self.fail("header.version", "only version 1 is understood")
                n = self.get(obj, "nodes", "header")
                if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 64:
                    self.fail("header.nodes", f"expected 1..64, got {n!r}")
                self.nodes = n
                continue
            if header is None:
                self.fail("kind", "the first record must be the header")
            if kind == "net":
                continue
            if kind != "step":
                self.fail("kind", f"expected header, step or net, got {kind!r}")
            w = "step"
            action = self.get(obj, "action", w)
            if action not in ACTIONS:
                self.fail("step.action", f"unknown action {action!r}")
            n = self.node(obj, "node", w)
            msg = "Nil"
            peer = "Nil"
            timer = '""'
            if action.startswith("Handle"):
                msg = self.message(self.get(obj, "msg", w), "step.msg", default_to=n)
            if action in PEER_ACTIONS:
                peer = self.node(obj, "peer", w)
            if action.endswith("Fired"):
                timer = self.enum(obj, "timer", w, TIMERS)
            if action == "PeerDown" and "loss" in obj:
                # conclaved's trace: a closure this node made itself (LinkLoss::Local) proves
                # nothing about the peer; Elector.tla's LocalClose (absent: a proven closure).
                self.enum(obj, "loss", w, {"local"})
                action = "LocalClose"
            sent = self.get(obj, "sent", w)
            if not isinstance(sent, list):
                self.fail("step.sent", "expected an array of messages")
            sent_tla = "{" + ", ".join(
                self.message(m, f"step.sent[{k}]") for k, m in enumerate(sent)) + "}"
            state = self.get(obj, "state", w)
            # A crashed core: the simulator records what the process leaves behind (term and
            # vote) with an empty voter set; the spec keeps the node's configuration (its log's,
            # which the runtime gives the next core before start: Restored in Elector.tla).
            # Before any record of the node: the default one (every node, version 0).
            keep = None
            if action == "Crash":
                prev = last.get(n)
                keep = ((prev["voters"], prev["config_version"]) if prev is not None
                        and "voters" in prev else (list(range(self.nodes)), 0))
            state_tla = self.state(state, "step.state", keep)
            if "voters" in state and "config_version" in state and action != "Crash":
                v = state["config_version"]
                if isinstance(v, int) and not isinstance(v, bool) and isinstance(
                        state["voters"], list):
                    configs.setdefault(v, state["voters"])
            if keep is not None:
                state = dict(state, voters=keep[0], config_version=keep[1])
            misses_seen = max(misses_seen, state["missed_checks"])
            before = last.get(n)
            if (action == "HeartbeatCheckFired" and before is not None
                    and before.get("role") == "follower"
                    and (before.get("leader") is not None
                         or before.get("tentative_leader") is not None)
                    and state["leader"] is None and state["tentative_leader"] is None):
                misses_stepdown = before["missed_checks"] + 1
            last[n] = state
            steps.append(f'[node |-> {n}, action |-> "{action}", msg |-> {msg}, '
                         f'peer |-> {peer}, timer |-> {timer}, sent |-> {sent_tla}, '
                         f'state |-> {state_tla}]')
            step_lines.append(str(self.line))
        if header is None:
            raise TraceError("the trace is empty (no header)")
        if configs and max(configs) > 1000:
            raise TraceError(f"a configuration version above 1000 ({max(configs)}): "
                             "TraceConfigs would be too long")
        self.line = 1
        quorum = self.nat(header, "quorum", "header")
        scouting = self.boolean(header, "scouting", "header")
        check_quorum = self.boolean(header, "check_quorum", "header")
        if "heartbeat_check_misses" in header:
            misses = self.nat(header, "heartbeat_check_misses", "header")
            misses_source = "header"
        elif misses_stepdown is not None:
            misses = str(misses_stepdown)
            misses_source = "inferred from a HeartbeatCheckFired step-down"
        else:
            misses = str(misses_seen + 1)
            misses_source = "inferred: no step-down seen, largest missed_checks + 1"
        data = [
            "---- MODULE TraceData ----",
            "\\* Generated by trace_to_tla.py; do not edit.",
            "EXTENDS Naturals, Sequences",
            "CONSTANT Nil",
            f"TraceNodes == {self.nodes}",
            f"TraceQuorum == {quorum}",
            f"TraceScouting == {scouting}",
            f"TraceCheckQuorum == {check_quorum}",
            f"\\* heartbeat_check_misses: {misses_source}",
            f"TraceCheckMisses == {misses}",
            "\\* Elector's LeaseSteps: the lease's clock decisions (trace_to_tla.py --no-lease-steps:",
            "\\* FALSE).",
            f"TraceLeaseSteps == {'TRUE' if self.lease_steps else 'FALSE'}",
            "\\* The configurations the trace's states hold, by version (versions never seen:",
            "\\* every node); read only by the invariant LeaderHadQuorum.",
            "TraceConfigs == <<" + ", ".join(
                "{" + ", ".join(str(x) for x in configs.get(v, range(self.nodes))) + "}"
                for v in range(max(configs, default=0) + 1)) + ">>",
            "\\* Line of the NDJSON file of each step.",
            "TraceLine == <<" + ", ".join(step_lines) + ">>",
            "Trace == <<",
            ",\n".join(steps),
            ">>",
            "====",
            "",
        ]
        return "\n".join(data), len(steps), misses, misses_source


CFG = """\\* Generated by trace_to_tla.py.
CONSTANT Nil = Nil
INIT Init
NEXT Next
INVARIANT TraceInvariants
"""


# Each body's fields, in the order of its BOOST_DESCRIBE_STRUCT list (elector/messages.hpp), with
# how the trace's JSON value becomes the TLA+ record field: (reader, optional). `optional`: the
# codec writes it only when not at its default (the record keeps the default when absent). Reader
# None: dropped; the heartbeat round ("round" on a LeaderHeartbeat and a HeartbeatAck) only feeds
# the lease's times, which Elector.tla abstracts (its messages have no such field; "The leader
# lease" in the spec). CTest tla_message_fields checks the keys against the C++ lists.
BODY_FIELDS = {
    "ScoutingRequest": {
        "round": (Converter.nat, False),
        "config_version": (Converter.nat, True),
    },
    "ScoutingResponse": {
        "round": (Converter.nat, False),
        "will_vote": (Converter.boolean, False),
        "refusal": (lambda c, m, k, w: c.enum(m, k, w, SCOUTING_REFUSALS), True),
        "config_version": (Converter.nat, True),
    },
    "ElectionProposal": {
        "transfer": (Converter.boolean, False),
        "config_version": (Converter.nat, True),
    },
    "ElectionResponse": {
        "granted": (Converter.boolean, False),
        "refusal": (lambda c, m, k, w: c.enum(m, k, w, REFUSALS), False),
        "voter_term": (Converter.nat, False),
        "config_version": (Converter.nat, True),
    },
    "LeaderHeartbeat": {
        "lsn": (Converter.lsn, False),
        "config_version": (Converter.nat, True),
        "round": (None, True),
    },
    "HeartbeatAck": {"round": (None, True)},
    "HeartbeatResponse": {},
    "LeadershipCession": {"successor": (Converter.node_or_nil, False)},
}


def main(argv):
    lease_steps = True
    if len(argv) > 1 and argv[1] == "--no-lease-steps":
        lease_steps = False
        argv = argv[:1] + argv[2:]
    if len(argv) != 3:
        print("usage: trace_to_tla.py [--no-lease-steps] TRACE.ndjson OUT_DIR", file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError as e:
        print(f"trace_to_tla: cannot read {argv[1]}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        data, count, misses, source = Converter(lease_steps).convert(lines)
    except TraceError as e:
        print(f"trace_to_tla: {argv[1]}: {e}", file=sys.stderr)
        return 2
    with open(f"{argv[2]}/TraceData.tla", "w", encoding="utf-8") as f:
        f.write(data)
    with open(f"{argv[2]}/TraceElector.cfg", "w", encoding="utf-8") as f:
        f.write(CFG)
    print(f"trace_to_tla: {count} steps, heartbeat_check_misses={misses} ({source})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
