# SPDX-License-Identifier: Apache-2.0
"""The checks of a recorded history (pure functions: tests/netns/checker_test.py feeds them
fabricated histories).

A history is:
  acked    keys whose POST /metadata was answered 200, in the order the answers came (the writer
           has one write outstanding at a time, so this is also the order they were proposed in);
  logs     {node: [key, ...] or None}: the committed `w/` keys each node serves, in log order
           (None: the node's log could not be read);
  samples  [(t, node, status or None)]: the /status answers of the poller (None: no answer).
Each check returns a list of violations (strings); empty means it holds.
"""

STALE_S = 0.3  # a /status answer older than this says nothing about the present


def check_writes(acked, logs):
    """Every acknowledged write is on every node exactly once and in acknowledgement order; no
    key is on a node twice; every node serves the same log."""
    bad = []
    for nid, keys in sorted(logs.items()):
        if keys is None:
            bad.append("%s: its log could not be read" % nid)
            continue
        counts = {}
        for k in keys:
            counts[k] = counts.get(k, 0) + 1
        lost = [k for k in acked if k not in counts]
        if lost:
            bad.append("%s: %d acknowledged write(s) lost: %s" % (nid, len(lost), lost[:5]))
        twice = sorted(k for k, n in counts.items() if n > 1)
        if twice:
            bad.append("%s: key(s) committed more than once: %s" % (nid, twice[:5]))
        position = {k: i for i, k in reversed(list(enumerate(keys)))}
        present = [k for k in acked if k in position]
        swapped = [(a, b) for a, b in zip(present, present[1:]) if position[a] > position[b]]
        if swapped:
            bad.append("%s: acknowledged writes out of order: %s" % (nid, swapped[:3]))
    readable = {nid: keys for nid, keys in logs.items() if keys is not None}
    if len({tuple(k) for k in readable.values()}) > 1:
        sizes = {nid: len(k) for nid, k in sorted(readable.items())}
        bad.append("the nodes serve different logs (entries: %s)" % sizes)
    return bad


def check_one_leader_per_term(samples):
    """No two nodes ever said role `leader` in the same term."""
    claims = {}
    for _, nid, st in samples:
        if st and st.get("role") == "leader":
            claims.setdefault(st["term"], set()).add(nid)
    return ["term %d: %s all said leader" % (t, sorted(n)) for t, n in sorted(claims.items())
            if len(n) > 1]


def check_tokens(samples):
    """No fencing token was ever attached to two different leaders (by any node's view)."""
    holders = {}
    for _, nid, st in samples:
        if st and st.get("leader") and st.get("fencing_token"):
            holders.setdefault(st["fencing_token"], set()).add(st["leader"])
    return ["fencing token %d claimed for %s" % (tok, sorted(h)) for tok, h in
            sorted(holders.items()) if len(h) > 1]


def agreed_leader(latest, now, quorum):
    """The leader that says `leader` and that a quorum of fresh answers (its own included)
    name, at time `now`; None when there is none."""
    fresh = {nid: st for nid, (t, st) in latest.items() if st and now - t <= STALE_S}
    for nid, st in fresh.items():
        if st.get("role") == "leader":
            backers = [n for n, s in fresh.items() if s.get("leader") == nid]
            if len(backers) >= quorum:
                return nid
    return None


def longest_leaderless(samples, nodes):
    """The longest time (s) without a quorum-agreed leader, from the first agreement to the end
    of the samples, and when it began (seconds after the first sample); (0, None) if none."""
    quorum = len(nodes) // 2 + 1
    samples = sorted(samples, key=lambda s: s[0])
    latest, longest, since, began = {}, 0.0, None, None
    first_t, seen_leader = (samples[0][0] if samples else None), False
    for t, nid, st in samples:
        latest[nid] = (t, st)
        leader = agreed_leader(latest, t, quorum)
        if leader:
            if since is not None and t - since > longest:
                longest, began = t - since, since - first_t
            since, seen_leader = None, True
        elif seen_leader and since is None:
            since = t
    if since is not None and samples and samples[-1][0] - since > longest:
        longest, began = samples[-1][0] - since, since - first_t
    return longest, began
