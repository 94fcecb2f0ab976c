#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The checks of tests/netns/history.py on fabricated histories: a clean one passes, and each
planted violation (a lost write, a duplicate, a reordering, logs that differ, two leaders in one
term, a fencing token reused by another node, a leaderless gap, two leaders of one term in the
daemons' logs) is reported. Exit 1 otherwise."""
import json
import os
import sys
import tempfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import history  # noqa: E402
import netns_faults  # noqa: E402

failures = []


def expect(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        failures.append(what)


def st(role, term, leader):
    return {"role": role, "term": term, "leader": leader, "fencing_token": term if leader else 0}


def clean_samples():
    """n1 leads term 1; then for 0.5 s n1 still says leader, cut off (a minority of one), while
    the others know no leader; then n2 leads term 2 and n1 does not answer."""
    samples = []
    for i in range(10):
        t = i * 0.1
        samples += [(t, "n1", st("leader", 1, "n1")), (t, "n2", st("follower", 1, "n1")),
                    (t, "n3", st("follower", 1, "n1"))]
    for i in range(5):
        t = 1.0 + i * 0.1
        samples += [(t, "n1", st("leader", 1, "n1")), (t, "n2", st("candidate", 2, None)),
                    (t, "n3", st("follower", 2, None))]
    for i in range(5):
        t = 1.5 + i * 0.1
        samples += [(t, "n1", None), (t, "n2", st("leader", 2, "n2")),
                    (t, "n3", st("follower", 2, "n2"))]
    return samples


def main():
    acked = ["w/0", "w/1", "w/3"]
    good = ["w/0", "w/1", "w/2", "w/3"]
    expect(history.check_writes(acked, {"n1": good, "n2": good, "n3": good}) == [],
           "a clean log passes (an unacknowledged write may be committed)")
    lost = history.check_writes(acked, {"n1": good, "n2": ["w/0", "w/2", "w/3"], "n3": good})
    expect(any("n2: 1 acknowledged write(s) lost: ['w/1']" in b for b in lost),
           "a lost acknowledged write is reported with its node and key: %s" % lost)
    expect(any("different logs" in b for b in lost), "logs that differ are reported")
    dup = history.check_writes(acked, {n: good + ["w/1"] for n in ("n1", "n2", "n3")})
    expect(any("more than once: ['w/1']" in b for b in dup), "a duplicate is reported: %s" % dup)
    swapped = ["w/1", "w/0", "w/2", "w/3"]
    order = history.check_writes(acked, {n: swapped for n in ("n1", "n2", "n3")})
    expect(any("out of order: [('w/0', 'w/1')]" in b for b in order),
           "acknowledged writes out of order are reported: %s" % order)
    expect(any("could not be read" in b for b in history.check_writes(acked, {"n1": None})),
           "an unreadable log is a violation, not a pass")

    samples = clean_samples()
    expect(history.check_one_leader_per_term(samples) == [], "one leader per term: clean passes")
    expect(history.check_tokens(samples) == [], "fencing tokens: clean passes")
    gap, began = history.longest_leaderless(samples, ["n1", "n2", "n3"])
    expect(0.5 <= gap <= 0.7 and began is not None and 0.9 <= began <= 1.0,
           "a leader that only it names is no leader: the gap is measured (%.2f s from %s s)" % (gap, began))

    two = samples + [(2.0, "n3", st("leader", 2, "n3"))]
    bad = history.check_one_leader_per_term(two)
    expect(bad == ["term 2: ['n2', 'n3'] all said leader"], "two leaders in term 2: %s" % bad)
    reused = samples + [(2.0, "n1", {"role": "follower", "term": 3, "leader": "n3",
                                      "fencing_token": 2})]
    bad = history.check_tokens(reused)
    expect(bad == ["fencing token 2 claimed for ['n2', 'n3']"], "a reused token: %s" % bad)

    with tempfile.TemporaryDirectory() as d:
        logs = {}
        for nid in ("n1", "n2"):
            logs[nid] = os.path.join(d, nid + ".log")
            with open(logs[nid], "w") as f:
                f.write("not json\n")
                f.write(json.dumps({"msg": "leadership changed", "role": "leader", "term": 4,
                                    "leader": nid, "fencing_token": 4}) + "\n")
        logged = netns_faults.logged_leaderships(types.SimpleNamespace(logs=logs))
        bad = history.check_one_leader_per_term(logged) + history.check_tokens(logged)
        expect(bad == ["term 4: ['n1', 'n2'] all said leader",
                       "fencing token 4 claimed for ['n1', 'n2']"],
               "two leaders of one term in the daemons' logs are reported: %s" % bad)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
