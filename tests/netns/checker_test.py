#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The checks of tests/netns/history.py on fabricated histories: a clean one passes, and each
planted violation (a lost write, a duplicate, a reordering, logs that differ, two leaders in one
term, a fencing token reused by another node, a leaderless gap, two leaders of one term in the
daemons' logs) is reported; etcd's status answers are parsed, and the agreement read from them,
as for conclaved. Exit 1 otherwise."""
import json
import os
import sys
import tempfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import history  # noqa: E402
import netbed  # noqa: E402
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


def etcd_answer(member, leader, term):
    doc = {"header": {"cluster_id": "7", "member_id": member, "raft_term": term},
           "version": "3.4.23", "raftTerm": term, "raftIndex": "9"}
    if leader:
        doc["leader"] = leader
    return doc


class FakeEtcdBed(netbed.EtcdBed):
    """An EtcdBed without namespaces or members: its answers come from `answers` (node -> doc)."""

    def __init__(self):
        self.ids, self.names, self.procs, self.answers = ["n1", "n2", "n3"], {}, {}, {}
        self.addr = {nid: nid for nid in self.ids}


def check_etcd():
    parse = netbed.parse_etcd_status
    expect(parse(etcd_answer("11", "22", "5")) == ("11", "22", 5), "an etcd status is parsed")
    expect(parse(etcd_answer("11", None, "5")) == ("11", None, 5),
           "an etcd status without `leader` (left out when 0) names no leader")
    expect(parse(etcd_answer("11", "0", "5")) == ("11", None, 5), "leader 0 is no leader")
    for bad, what in ((None, "no answer"), ("text", "text"),
                      ({"error": "x", "code": 14}, "an error"),
                      (etcd_answer("x1", "22", "5"), "a member id that is no number"),
                      (etcd_answer("0", "22", "5"), "member id 0"),
                      (etcd_answer("11", "22", 5), "a term that is no decimal string"),
                      (etcd_answer("11", ["22"], "5"), "a leader that is no string")):
        expect(parse(bad) is None, "%s is no etcd status" % what)

    bed, request = FakeEtcdBed(), netbed.request
    netbed.request = lambda host, *a, **kw: (200, bed.answers[host], {})
    try:
        check_etcd_agreement(bed)
    finally:
        netbed.request = request


def check_etcd_agreement(bed):
    bed.answers = {"n1": etcd_answer("11", "22", "5"), "n2": etcd_answer("22", "22", "5"),
                   "n3": etcd_answer("33", "22", "5")}
    expect(bed.agreed_leader(bed.ids) is None,
           "etcd: no agreement while the leader's own status (its member id) is not yet seen")
    expect(bed.agreed_leader(bed.ids) == ("n2", 5), "etcd: n2 leads term 5, agreed by all three")
    expect(bed.status("n1") == {"role": "follower", "term": 5, "leader": "n2"} and
           bed.status("n2") == {"role": "leader", "term": 5, "leader": "n2"},
           "etcd: a status in conclaved's terms (leader when it names itself)")
    expect(bed.agreed_leader(["n1", "n3"]) is None,
           "etcd: the survivors still name the vanished n2")
    bed.answers.update(n1=etcd_answer("11", "11", "6"), n3=etcd_answer("33", "11", "6"))
    expect(bed.agreed_leader(["n1", "n3"]) == ("n1", 6),
           "etcd: n1 leads term 6, agreed by n1 and n3")
    bed.answers.update(n3=etcd_answer("33", "11", "5"))
    expect(bed.agreed_leader(["n1", "n3"]) is None, "etcd: no agreement across two terms")
    bed.answers.update(n1=etcd_answer("11", "33", "6"), n3=etcd_answer("33", "11", "6"))
    expect(bed.agreed_leader(["n1", "n3"]) is None, "etcd: no agreement on two leaders")


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
    check_etcd()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
