#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The leader cut off from its store: conclaved on etcd or ZooKeeper beside the naive lock recipe
on the same store, in network namespaces (stdlib + ip/nft).

    store_partition.py CONCLAVED LOCK_RECIPE [--store etcd|zookeeper] [--runs N] [--ttl-ms T]
                       [--keep]

n4 runs the store: one etcd member (Debian's etcd-server) or one ZooKeeper server (Debian's
zookeeper, tickTime 500 ms); n1..n3 each run a conclaved whose "backend" is that store (ttl_ms T)
and a `lock-recipe` candidate on it (bench/lock_recipe.cpp: etcd, put-if-absent under a lease
kept alive, TTL T rounded up to seconds; ZooKeeper, the lowest ephemeral sequential znode, a
session of T). Each run, first for conclaved, then for
the recipe: wait for the one leader, drop every packet between its namespace and n4 (nftables, both
ways: silence, no RST), wait for another candidate to lead, keep the cut 2 s more, heal, and let
the old leader catch up. Beliefs: conclaved's from GET /status every 20 ms (a valid lease held
from the poll's send time until its arrival + remaining_ms: an overlap is overestimated, never
hidden), the recipe's from its own timestamped lines. Checked: conclaved never has two holders of
a valid lease (overlap 0) and fails over; the recipe, measured the same way in the same bed,
does show an overlap (the check is able to see one). Prints the failovers and overlaps.

Exit 0: checks hold; 1: a violation (printed); 77: skipped (not root, no ip/nft, no store).
"""
import argparse
import json
import os
import shutil
import socket
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
ZK_PORT = 2181
ZK_JAR = "/usr/share/java/zookeeper.jar"


def find_store(kind):
    """(argv prefix that runs the store, None) or (None, why it cannot run)."""
    if kind == "etcd":
        etcd = shutil.which("etcd")
        return ([etcd], None) if etcd else (None, "no `etcd` on PATH (apt-get install -y "
                                            "etcd-server)")
    java = shutil.which("java")
    if not java or not os.path.exists(ZK_JAR):
        return None, "no java or %s (apt-get install -y zookeeper)" % ZK_JAR
    return [java, "-Xmx256m", "-XX:+UseSerialGC", "-cp", "/etc/zookeeper/conf:" + ZK_JAR,
            "org.apache.zookeeper.server.quorum.QuorumPeerMain"], None


class StoreBed(netbed.Bed):
    """n1..n3 conclaved with a store backend, n4 the store (etcd or ZooKeeper)."""

    def __init__(self, conclaved, kind, store_argv, root, ttl_ms):
        self.kind, self.store_argv, self.ttl_ms = kind, store_argv, ttl_ms
        super().__init__(conclaved, root, size=4)

    def store_address(self):
        port = netbed.ETCD_CLIENT_PORT if self.kind == "etcd" else ZK_PORT
        return "%s:%d" % (self.addr[STORE], port)

    def write_config(self):
        super().write_config()
        with open(self.config) as f:
            doc = json.load(f)
        doc["cluster"] = "storecut"
        doc["nodes"] = [n for n in doc["nodes"] if n["id"] != STORE]
        doc["backend"] = {"kind": self.kind, "ttl_ms": self.ttl_ms}
        if self.kind == "etcd":
            doc["backend"]["endpoints"] = [self.store_address()]
        else:
            doc["backend"]["hosts"] = self.store_address()
        with open(self.config, "w") as f:
            json.dump(doc, f)

    def start(self, nid):
        if nid != STORE:
            return super().start(nid)
        if self.kind == "zookeeper":
            cfg = os.path.join(self.root, "zoo.cfg")
            with open(cfg, "w") as f:
                f.write("tickTime=500\ndataDir=%s\nclientPortAddress=%s\nclientPort=%d\n"
                        "admin.enableServer=false\n4lw.commands.whitelist=srvr\n" %
                        (os.path.join(self.root, "zk"), self.addr[STORE], ZK_PORT))
            return self.spawn(STORE, self.store_argv + [cfg])
        peer = "http://%s:%d" % (self.addr[STORE], netbed.ETCD_PEER_PORT)
        client = "http://" + self.store_address()
        self.spawn(STORE, self.store_argv + [
            "--name", STORE, "--data-dir", os.path.join(self.root, "etcd"),
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--initial-cluster", "%s=%s" % (STORE, peer), "--logger", "zap", "--log-level",
            "warn"])

    def cut(self, nid):
        self.partition(nid, STORE, "storecut")

    def store_up(self):
        if self.kind == "etcd":
            code, _, _ = netbed.request(self.addr[STORE], "POST", "/v3/maintenance/status",
                                        body={}, port=netbed.ETCD_CLIENT_PORT)
            return code == 200
        try:
            with socket.create_connection((self.addr[STORE], ZK_PORT), timeout=1) as c:
                c.sendall(b"srvr")
                return b"Mode: standalone" in c.recv(4096)
        except OSError:
            return False


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
        where = ["--endpoint" if bed.kind == "etcd" else "--hosts", bed.store_address()]
        for nid in CANDIDATES:
            self.logs[nid] = os.path.join(bed.root, nid + ".recipe.log")
            with open(self.logs[nid], "ab") as log:
                self.procs.append(subprocess.Popen(
                    ["ip", "netns", "exec", bed.ns(nid), recipe, bed.kind] + where +
                    ["--ttl-ms", str(bed.ttl_ms)], stdout=log, stderr=subprocess.DEVNULL))

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
    ap.add_argument("--store", choices=("etcd", "zookeeper"), default="etcd")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--ttl-ms", type=int, default=2000)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    reason = netns_faults.skip_reason()
    store_argv, why = find_store(args.store)
    reason = reason or why
    if reason:
        print("SKIP: store partition not run: " + reason, flush=True)
        return 77
    left = netbed.cleanup_leftovers()
    if left:
        print("removed the leftovers of dead runs %s" % left)
    root = netbed.make_root()
    failed = ["the bed did not finish"]
    try:
        with StoreBed(args.conclaved, args.store, store_argv, root, args.ttl_ms) as bed:
            bed.start(STORE)
            if not netns_faults.wait_for(bed.store_up, 60):
                raise RuntimeError(args.store + " did not answer within 60 s")
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
