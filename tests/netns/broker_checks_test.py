#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The checks of broker_faults.py on fabricated reports and logs (no root, no processes): clean
histories pass, and two brokers serving one partition at one instant, an interval left open by a
SIGKILL that overlaps the next primary's, and an acknowledged assignment missing from a log (or
there with another value, or a log unread) are each reported. Exit 0 when every verdict is right.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker_faults as bf  # noqa: E402

S = 1_000_000_000  # report times are nanoseconds


def up(t):
    return {"event": "up", "t": t * S}


def serve(event, p, t, token=1):
    return {"event": event, "partition": p, "token": token, "t": t * S}


def ack(node, p, lsn, primary, token):
    return {"event": "ack", "node": node, "partition": p, "lsn": lsn,
            "value": json.dumps({"primary": primary, "token": token})}


def overlaps(runs, end=100.0):
    return bf.overlaps(bf.intervals(runs, end), [], 0.0)


def check_overlaps():
    failures = []
    handover = {"n1": ([up(0), serve("start", 0, 1), serve("stop", 0, 5)], []),
                "n2": ([up(0), serve("start", 0, 5.001, 2), serve("stop", 0, 9, 2)], [])}
    cases = [
        ("a clean hand-over", handover, 0),
        ("two brokers sharing one instant", {
            "n1": ([up(0), serve("start", 0, 1), serve("stop", 0, 5)], []),
            "n2": ([up(0), serve("start", 0, 5, 2)], [])}, 1),
        ("one broker's own restarts", {
            "n1": ([up(0), serve("start", 0, 1), up(4), serve("start", 0, 4.5)], [3.0])}, 0),
        ("an interval open at a kill ends there", {
            "n1": ([up(0), serve("start", 0, 1), up(8)], [3.0]),
            "n2": ([up(0), serve("start", 0, 4, 2)], [])}, 0),
        ("a killed broker's interval overlapping its successor's", {
            "n1": ([up(0), serve("start", 0, 1), up(8)], [5.0]),
            "n2": ([up(0), serve("start", 0, 4, 2)], [])}, 1),
        ("an interval open at the end", {
            "n1": ([up(0), serve("start", 1, 1)], []),
            "n2": ([up(0), serve("start", 1, 50, 2)], [])}, 1),
        ("other partitions", {
            "n1": ([up(0), serve("start", 0, 1)], []),
            "n2": ([up(0), serve("start", 1, 1, 2)], [])}, 0),
    ]
    for what, runs, expected in cases:
        found = overlaps(runs)
        if len(found) != expected:
            failures.append("%s: %d overlaps reported, %d expected: %s" % (
                what, len(found), expected, found))
    return failures


def check_acks():
    failures = []
    acks = [ack("n1", 0, "1.1", "n1", 1), ack("n2", 0, "2.1", "n2", 2)]
    good = {"1.1": ("partitions/0", {"primary": "n1", "token": 1}),
            "2.1": ("partitions/0", {"primary": "n2", "token": 2}),
            "2.2": ("partitions/1", {"primary": "n3", "token": 2})}
    lost = dict(good)
    del lost["2.1"]
    other = dict(good)
    other["1.1"] = ("partitions/0", {"primary": "n3", "token": 1})
    cases = [
        ("every ack in every log", {"n1": good, "n2": good}, 0),
        ("an ack missing from one log", {"n1": good, "n2": lost}, 1),
        ("another value at an ack's LSN", {"n1": other, "n2": good}, 1),
        ("a log not read", {"n1": good, "n2": None}, 2),
    ]
    for what, logs, expected in cases:
        found = bf.missing_acks(acks, logs)
        if len(found) != expected:
            failures.append("%s: %d reported, %d expected: %s" % (what, len(found), expected,
                                                                  found))
    return failures


def main():
    failures = check_overlaps() + check_acks()
    for f in failures:
        print("FAIL: " + f)
    print("broker checks: %s" % ("ok" if not failures else "%d wrong verdicts" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
