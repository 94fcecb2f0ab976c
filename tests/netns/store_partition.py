#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The leader cut off from its store: conclaved on etcd beside the naive etcd lock recipe, in
network namespaces (stdlib + ip/nft).

    store_partition.py CONCLAVED LOCK_RECIPE [--runs N] [--ttl-ms T] [--keep]

n4 runs one etcd member (Debian's etcd-server); n1..n3 each run a conclaved whose "backend" is
that member (ttl_ms T) and a `lock-recipe etcd` candidate (bench/lock_recipe.cpp: put-if-absent
under a lease kept alive, TTL T rounded up to seconds). Each run, first for conclaved, then for
the recipe: wait for the one leader, drop every packet between its namespace and n4 (nftables, both
ways: silence, no RST), wait for another candidate to lead, keep the cut 2 s more, heal, and let
the old leader catch up. Beliefs: conclaved's from GET /status every 20 ms (a valid lease held
from the poll's send time until its arrival + remaining_ms: an overlap is overestimated, never
hidden), the recipe's from its own timestamped lines. Checked: conclaved never has two holders of
a valid lease (overlap 0) and fails over; the recipe, measured the same way in the same bed,
does show an overlap (the check is able to see one). Prints the failovers and overlaps.

Exit 0: checks hold; 1: a violation (printed); 77: skipped (not root, no ip/nft, no etcd).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netbed  # noqa: E402
import netns_faults  # noqa: E402

STORE = "n4"
CANDIDATES = ["n1", "n2", "n3"]
POLL_S = 0.02


class StoreBed(netbed.Bed):
    """n1..n3 conclaved with the etcd backend, n4 the etcd member."""

    def __init__(self, conclaved, etcd, root, ttl_ms):
        self.etcd, self.ttl_ms = etcd, ttl_ms
        super().__init__(conclaved, root, size=4)

    def write_config(self):
        super().write_config()
        with open(self.config) as f:
            doc = json.load(f)
        doc["cluster"] = "storecut"
        doc["nodes"] = [n for n in doc["nodes"] if n["id"] != STORE]
        doc["backend"] = {"kind": "etcd", "ttl_ms": self.ttl_ms,
                          "endpoints": ["%s:%d" % (self.addr[STORE], netbed.ETCD_CLIENT_PORT)]}
        with open(self.config, "w") as f:
            json.dump(doc, f)

    def start(self, nid):
        if nid != STORE:
            return super().start(nid)
        peer = "http://%s:%d" % (self.addr[STORE], netbed.ETCD_PEER_PORT)
        client = "http://%s:%d" % (self.addr[STORE], netbed.ETCD_CLIENT_PORT)
        self.spawn(STORE, [self.etcd, "--name", STORE, "--data-dir",
                           os.path.join(self.root, "etcd"), "--listen-peer-urls", peer,
                           "--initial-advertise-peer-urls", peer, "--listen-client-urls",
                           client, "--advertise-client-urls", client, "--initial-cluster",
                           "%s=%s" % (STORE, peer), "--logger", "zap", "--log-level", "warn"])

    def cut(self, nid):
        self.partition(nid, STORE, "storecut")

    def store_up(self):
        code, _, _ = netbed.request(self.addr[STORE], "POST", "/v3/maintenance/status", body={},
                                    port=netbed.ETCD_CLIENT_PORT)
        return code == 200


class ConclaveBeliefs:
    """GET /status of n1..n3 every POLL_S, each on a thread: (node, sent, arrived, remaining)."""

    def __init__(self, bed):
        self.bed, self.samples, self.lock = bed, [], threading.Lock()
        self.stopping = False
        self.threads = [threading.Thread(target=self.poll, args=(n,)) for n in CANDIDATES]
        for t in self.threads:
            t.start()

    def poll(self, nid):
        while not self.stopping:
            sent = time.monotonic()
            s = self.bed.status(nid, timeout_s=0.3)
            arrived = time.monotonic()
            if s is not None:
                lease = s.get("lease") if s.get("role") == "leader" else None
                remaining = lease["remaining_ms"] / 1000 if lease and lease.get("valid") else None
                with self.lock:
                    self.samples.append((nid, sent, arrived, remaining))
            time.sleep(max(0.0, POLL_S - (time.monotonic() - sent)))

    def stop(self):
        self.stopping = True
        for t in self.threads:
            t.join()

    def intervals(self, now):
        """Per node: the times it held a valid lease, as far as the answers bound them."""
        out = {n: [] for n in CANDIDATES}
        with self.lock:
            samples = sorted(self.samples, key=lambda x: x[1])
        for nid, sent, arrived, remaining in samples:
            held = out[nid]
            if remaining is None:
                if held and held[-1][1] > sent:
                    held[-1][1] = max(held[-1][0], sent)  # it ended before this answer at most
                continue
            if held and sent <= held[-1][1]:
                held[-1][1] = max(held[-1][1], arrived + remaining)
            else:
                held.append([sent, arrived + remaining])
        return {n: [(b, min(e, now)) for b, e in v if b < now] for n, v in out.items()}

    def leader(self, now):
        last = {}
        with self.lock:
            for nid, sent, _, remaining in self.samples:
                last[nid] = (sent, remaining)
        leaders = [n for n, (sent, rem) in last.items() if rem is not None and now - sent < 1]
        return leaders[0] if len(leaders) == 1 and len(last) == 3 else None


class RecipeBeliefs:
    """A lock-recipe candidate per namespace; beliefs from their lines (bounce/lease.hpp)."""

    def __init__(self, bed, recipe):
        self.bed, self.procs, self.logs = bed, [], {}
        endpoint = "%s:%d" % (bed.addr[STORE], netbed.ETCD_CLIENT_PORT)
        for nid in CANDIDATES:
            self.logs[nid] = os.path.join(bed.root, nid + ".recipe.log")
            with open(self.logs[nid], "ab") as log:
                self.procs.append(subprocess.Popen(
                    ["ip", "netns", "exec", bed.ns(nid), recipe, "etcd", "--endpoint", endpoint,
                     "--ttl-ms", str(bed.ttl_ms)], stdout=log, stderr=subprocess.DEVNULL))

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait(timeout=5)

    def intervals(self, now):
        out = {}
        for nid in CANDIDATES:
            out[nid], since = [], None
            with open(self.logs[nid]) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) < 2 or not parts[0].isdigit():
                        continue
                    at = int(parts[0]) / 1e6  # CLOCK_MONOTONIC, as time.monotonic()
                    if parts[1] == "lead" and since is None:
                        since = at
                    elif parts[1] != "lead" and since is not None:
                        out[nid].append((since, at))
                        since = None
            if since is not None:
                out[nid].append((since, now))
        return out

    def leader(self, now):
        believers = [n for n, v in self.intervals(now).items() if v and v[-1][1] >= now]
        return believers[0] if len(believers) == 1 else None


def longest_overlap(intervals, since):
    best = 0.0
    for i, a in enumerate(CANDIDATES):
        for b in CANDIDATES[i + 1:]:
            for x in intervals[a]:
                for y in intervals[b]:
                    lo, hi = max(x[0], y[0], since), min(x[1], y[1])
                    best = max(best, hi - lo)
    return best


def cut_once(bed, beliefs, ttl_s):
    """(failover s or None, longest overlap s) of one cut of the leader from the store."""
    leader = netns_faults.wait_for(lambda: beliefs.leader(time.monotonic()), 30 + 3 * ttl_s)
    if leader is None:
        raise RuntimeError("no single leader within %.0f s" % (30 + 3 * ttl_s))
    start = time.monotonic()
    bed.cut(leader)
    cut_at = time.monotonic()

    def successor():
        for nid, held in beliefs.intervals(time.monotonic()).items():
            for begin, _ in held:
                if nid != leader and begin >= cut_at:
                    return begin
        return None
    began = netns_faults.wait_for(successor, 3 * ttl_s + 10)
    time.sleep(2.0)
    bed.heal()
    time.sleep(2 * ttl_s + 1)  # the old leader reaches the store again and learns
    overlap = longest_overlap(beliefs.intervals(time.monotonic()), start)
    return (None if began is None else began - cut_at), overlap


def measure(bed, recipe, runs):
    ttl_s = bed.ttl_ms / 1000
    failed = []
    for system in ("conclaved", "recipe"):
        beliefs = ConclaveBeliefs(bed) if system == "conclaved" else RecipeBeliefs(bed, recipe)
        try:
            for run in range(runs):
                failover, overlap = cut_once(bed, beliefs, ttl_s)
                print("%-9s run %d: new leader %s after the cut, two believed they led %.0f ms"
                      % (system, run + 1, "never" if failover is None else
                         "%.0f ms" % (failover * 1000), overlap * 1000), flush=True)
                if system == "conclaved" and (failover is None or overlap > 0):
                    failed.append("conclaved run %d: failover %s, overlap %.3f s" %
                                  (run + 1, failover, overlap))
                if system == "recipe" and overlap <= 0:
                    failed.append("recipe run %d: no overlap seen: the check sees nothing" %
                                  (run + 1))
        finally:
            beliefs.stop()
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("conclaved")
    ap.add_argument("lock_recipe")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--ttl-ms", type=int, default=2000)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    reason = netns_faults.skip_reason()
    etcd = shutil.which("etcd")
    if not reason and not etcd:
        reason = "no `etcd` on PATH (apt-get install -y etcd-server)"
    if reason:
        print("SKIP: store partition not run: " + reason, flush=True)
        return 77
    left = netbed.cleanup_leftovers()
    if left:
        print("removed the leftovers of dead runs %s" % left)
    root = netbed.make_root()
    failed = ["the bed did not finish"]
    try:
        with StoreBed(args.conclaved, etcd, root, args.ttl_ms) as bed:
            bed.start(STORE)
            if not netns_faults.wait_for(bed.store_up, 30):
                raise RuntimeError("etcd did not answer within 30 s")
            for nid in CANDIDATES:
                bed.start(nid)
            failed = measure(bed, args.lock_recipe, args.runs)
    finally:
        netbed.remove_root(root, args.keep or failed)
    for f in failed:
        print("FAIL: " + f)
    print("PASS" if not failed else "FAILED", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
