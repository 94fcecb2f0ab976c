#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Unit tests of tla/merge_daemon_traces.py on small hand-made per-node traces (CTest
tla_merge_daemon_traces)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

MERGER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tla",
                      "merge_daemon_traces.py")


def header(node, wall=0, term=0, vote=None):
    return {"kind": "header", "version": 1, "nodes": 2, "quorum": 2, "scouting": True,
            "check_quorum": True, "heartbeat_check_misses": 6, "node": node, "pid": 1,
            "wall_ms": wall, "restored": {"term": term, "voted_for": vote}}


def state(term=0, vote=None, role="follower"):
    return {"role": role, "term": term, "voted_for": vote, "leader": None,
            "tentative_leader": None, "supporters": [], "refusals": [], "heard_since_check": [],
            "peers_up": [], "missed_checks": 0, "round": {"id": 0, "term": 0, "yes": [], "no": []},
            "last_round_id": 0, "lsn": {"term": 0, "counter": 0}, "armed_timers": [],
            "voters": [0, 1], "config_version": 0}


def msg(frm, to, rnd):
    return {"type": "ScoutingRequest", "from": frm, "to": to, "term": 1, "round": rnd}


def step(node, action, wall, sent=(), received=None, **st):
    s = {"kind": "step", "node": node, "action": action, "sent": list(sent), "state": state(**st),
         "wall_ms": wall}
    if received is not None:
        s["msg"] = received
    return s


class MergeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, records, tail=""):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in records) + tail)
        return path

    def merge(self, *paths):
        out = os.path.join(self.dir.name, "merged.ndjson")
        r = subprocess.run([sys.executable, MERGER, out, *paths], capture_output=True, text=True)
        steps = []
        if r.returncode == 0:
            with open(out) as f:
                steps = [json.loads(line) for line in f][1:]
        return r.returncode, r.stderr, steps

    def two_nodes(self, received, sends=(1, 2, 3)):
        a = self.write("a", [header(0), step(0, "Start", 500),
                             step(0, "InitialWaitFired", 600,
                                  sent=[msg(0, 1, r) for r in sends])])
        b = self.write("b", [header(1), step(1, "Start", 10)] +
                       [step(1, "HandleScoutingRequest", 20 + k, received=msg(0, 1, r))
                        for k, r in enumerate(received)])
        return a, b

    def test_receive_after_send_whatever_the_clocks(self):
        rc, err, steps = self.merge(*self.two_nodes([1]))
        self.assertEqual(rc, 0, err)
        order = [(s["node"], s["action"]) for s in steps]
        self.assertEqual(order, [(1, "Start"), (0, "Start"), (0, "InitialWaitFired"),
                                 (1, "HandleScoutingRequest")])
        self.assertEqual([s["step"] for s in steps], [1, 2, 3, 4])

    def test_lost_message_is_left_in_flight(self):
        rc, err, _ = self.merge(*self.two_nodes([1, 3]))
        self.assertEqual(rc, 0, err)

    def test_receive_without_send_is_refused(self):
        rc, err, _ = self.merge(*self.two_nodes([4]))
        self.assertEqual(rc, 1)
        self.assertIn("b:3", err)
        self.assertIn("sent no such message", err)

    def test_out_of_link_order_is_refused(self):
        rc, err, _ = self.merge(*self.two_nodes([3, 1]))
        self.assertEqual(rc, 1)
        self.assertIn("b:4", err)

    def test_torn_last_line_dropped_other_bad_lines_refused(self):
        a, b = self.two_nodes([1])
        with open(b, "a") as f:
            f.write('{"kind": "step", "node": 1, "act')
        rc, err, steps = self.merge(a, b)
        self.assertEqual(rc, 0, err)
        self.assertIn("incomplete last line dropped", err)
        self.assertEqual(len(steps), 4)
        with open(b, "a") as f:
            f.write("\n" + json.dumps(step(1, "Stop", 30)) + "\n")
        rc, err, _ = self.merge(a, b)
        self.assertEqual(rc, 2)
        self.assertIn("not JSON", err)

    def test_restart_becomes_crash_then_restart(self):
        a = self.write("a", [header(0), step(0, "Start", 1),
                             step(0, "InitialWaitFired", 2, term=3, vote=0),
                             header(0, wall=50, term=3, vote=0), step(0, "Start", 60, term=3,
                                                                      vote=0)])
        b = self.write("b", [header(1), step(1, "Start", 1)])
        rc, err, steps = self.merge(a, b)
        self.assertEqual(rc, 0, err)
        mine = [s for s in steps if s["node"] == 0]
        self.assertEqual([s["action"] for s in mine],
                         ["Start", "InitialWaitFired", "Crash", "Restart"])
        crash = mine[2]["state"]
        self.assertEqual((crash["role"], crash["term"], crash["voted_for"]), ("stopped", 3, 0))
        self.assertEqual(crash["peers_up"], [])

    def test_first_process_must_start_empty(self):
        a = self.write("a", [header(0, term=2), step(0, "Start", 1)])
        rc, err, _ = self.merge(a)
        self.assertEqual(rc, 2)
        self.assertIn("empty data", err)


if __name__ == "__main__":
    unittest.main()
