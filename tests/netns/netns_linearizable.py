#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Linearizability of conclaved's per-key metadata under kernel-level faults.

    netns_linearizable.py CONCLAVED [--nodes 3|5] [--clients 5] [--duration S] [--seed N] [--no-cas]
                          [--stale-reads --expect-violation] [--keep]

N daemons in network namespaces (netbed.py, as netns_faults.py), concurrent clients each running
one operation at a time: `POST /metadata` puts, conditional puts (`expect_lsn`: an LSN the
client read or wrote, or "0.0": the key must not exist) and `GET /metadata/<key>` linearizable
reads, while faults run one at a time (those of netns_faults.py, and the leader's SIGKILL,
SIGSTOP or isolation). The history (invocation and completion of each operation, its answer;
timeouts and "outcome unknown" answers indeterminate) is checked with lincheck.py, a register per
key; keys rotate every --key-period seconds so that each key's history stays small.

--stale-reads plants the bug of a node answering a "linearizable" read from its own state: reads
go to a random node with `consistency=serializable`. With --expect-violation the run passes only
if the checker refuses the history (the canary of the check).

Exit 0: linearizable (or, with --expect-violation, refused); 1: otherwise; 77: skipped (no
namespaces, or the daemon has no per-key reads).
"""
import argparse
import json
import os
import random
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lincheck  # noqa: E402
import netbed  # noqa: E402
import netns_faults  # noqa: E402

REQUEST_TIMEOUT_S = 1.0
# Write answers that say nothing was appended: the operation is left out of the history.
DEFINITE_REFUSALS = {"not_leader", "no_leader", "not_active", "disabled", "bad_request"}


def lsn_text(lsn):
    """"T.C" from an answer's LSN (a "T.C" string or a {"term", "counter"} object), or None."""
    if isinstance(lsn, str):
        return lsn
    if isinstance(lsn, dict) and "term" in lsn and "counter" in lsn:
        return "%s.%s" % (lsn["term"], lsn["counter"])
    return None


class Clients:
    """Concurrent clients recording a history of lincheck.Op."""

    def __init__(self, bed, count, seed, key_period_s, keys, stale_reads, cas=True):
        self.bed, self.seed, self.stale_reads, self.cas = bed, seed, stale_reads, cas
        self.key_period_s, self.keys = key_period_s, keys
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.history, self.errors, self.lsn_conflicts = [], [], []
        self.values_by_lsn = {}
        self.leader = bed.ids[0]
        self.answers = {}
        self.started = time.monotonic()
        self.threads = [threading.Thread(target=self.guarded, args=(c,)) for c in range(count)]

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=10)

    def guarded(self, c):
        try:
            self.run(c)
        except Exception as e:  # noqa: BLE001 -- reported in the summary
            self.errors.append("client %d: %r" % (c, e))

    def key(self, rng):
        generation = int((time.monotonic() - self.started) / self.key_period_s)
        return "lin%d-%d" % (generation, rng.randrange(self.keys))

    def run(self, c):
        rng = random.Random(self.seed * 1000 + c)
        known = {}  # key -> (lsn, value) this client last saw
        n = 0
        while not self.stopping.is_set():
            key, roll = self.key(rng), rng.random()
            value = "c%d-%d" % (c, n)
            n += 1
            if roll < 0.3:
                self.write(c, key, value, None, known)
            elif roll < 0.55 and self.cas:
                lsn, expected = known.get(key, ("0.0", None))
                if rng.random() < 0.2:
                    lsn, expected = "0.0", None
                self.write(c, key, value, (lsn, expected), known)
            else:
                self.read(c, key, known, rng)

    def request(self, nid, method, path, body=None):
        """(status, doc) from nid, following one redirect to the leader it names."""
        code, doc, headers = netbed.request(self.bed.addr[nid], method, path, self.bed.token,
                                            body, timeout_s=REQUEST_TIMEOUT_S)
        if code == 307 and isinstance(doc, dict) and doc.get("leader"):
            leader = doc["leader"]
            if leader in self.bed.addr:
                self.leader = leader
                code, doc, _ = netbed.request(self.bed.addr[leader], method, path,
                                              self.bed.token, body, timeout_s=REQUEST_TIMEOUT_S)
        if code is None or code >= 500:
            self.leader = random.choice(self.bed.ids)
        return code, doc

    def tally(self, kind, code, doc):
        what = "%s %s%s" % (kind, code, " " + doc["error"] if isinstance(doc, dict) and
                            isinstance(doc.get("error"), str) and code != 200 else "")
        with self.lock:
            self.answers[what] = self.answers.get(what, 0) + 1

    def learn(self, key, lsn, value, known):
        """Records that `lsn` is the write of `value`: one LSN must never carry two values."""
        if lsn is None:
            return
        known[key] = (lsn, value)
        with self.lock:
            seen = self.values_by_lsn.setdefault((key, lsn), value)
            if seen != value:
                self.lsn_conflicts.append("%s at %s: %r and %r" % (key, lsn, seen, value))

    def write(self, c, key, value, condition, known):
        body = {"key": key, "value": value}
        if condition is not None:
            body["expect_lsn"] = condition[0]
        invoke = time.monotonic()
        code, doc = self.request(self.leader, "POST", "/metadata", body)
        complete = time.monotonic()
        self.tally("cas" if condition else "put", code, doc)
        error = doc.get("error") if isinstance(doc, dict) else None
        if code == 200:
            self.learn(key, lsn_text(doc.get("lsn")), value, known)
            ok = True
        elif code == 409 and condition is not None and error == "condition_failed":
            ok = False
        elif code in (307, 400) or error in DEFINITE_REFUSALS:
            return  # nothing appended
        else:
            complete, ok = None, None
        op = lincheck.Op(c, "cas" if condition else "put", key, value,
                         condition[1] if condition else None, ok if condition else None,
                         invoke, complete)
        with self.lock:
            self.history.append(op)

    def read(self, c, key, known, rng):
        if self.stale_reads:
            nid, query = rng.choice(self.bed.ids), "?consistency=serializable"
        else:
            nid, query = self.leader, "?consistency=linearizable"
        invoke = time.monotonic()
        code, doc = self.request(nid, "GET", "/metadata/%s%s" % (key, query))
        complete = time.monotonic()
        self.tally("get", code, doc)
        if code == 200 and isinstance(doc, dict) and "value" in doc:
            value = doc["value"]
            self.learn(key, lsn_text(doc.get("lsn")), value, known)
        elif code == 404:
            value = None
        else:
            return  # no answer: a read that tells nothing
        with self.lock:
            self.history.append(lincheck.Op(c, "get", key, value, None, None, invoke, complete))


def leader_of(bed):
    agreed = bed.agreed_leader()
    return agreed[0] if agreed else None


def fault_kill_leader(bed, rng, d, tag):
    v = leader_of(bed) or rng.choice(bed.ids)
    bed.kill(v)
    time.sleep(d)
    bed.start(v)
    return "kill leader %s (SIGKILL) %.1fs, restarted" % (v, d)


def fault_pause_leader(bed, rng, d, tag):
    v = leader_of(bed) or rng.choice(bed.ids)
    bed.signal(v, signal.SIGSTOP)
    time.sleep(d)
    bed.signal(v, signal.SIGCONT)
    return "pause leader %s (SIGSTOP) %.1fs" % (v, d)


def fault_isolate_leader(bed, rng, d, tag):
    """The leader loses its peers (a minority of one) but still hears the test's clients."""
    v = leader_of(bed) or rng.choice(bed.ids)
    for other in bed.ids:
        if other != v:
            bed.partition(v, other, tag)
    time.sleep(d)
    bed.undrop(tag)
    return "leader %s cut off from its peers %.1fs" % (v, d)


LEADER_FAULTS = [fault_kill_leader, fault_pause_leader, fault_isolate_leader]


def inject(bed, rng, duration_s):
    """Faults one at a time for duration_s: half on the leader, half netns_faults' random ones."""
    done, end = [], time.monotonic() + duration_s
    while time.monotonic() < end:
        pool = LEADER_FAULTS if rng.random() < 0.5 else netns_faults.FAULTS
        what = rng.choice(pool)(bed, rng, rng.uniform(0.5, 3.0), "f%d" % len(done))
        print("  %6.1fs  %s" % (duration_s - (end - time.monotonic()), what), flush=True)
        done.append(what)
        time.sleep(rng.uniform(0.3, 1.0))
    return done


def probe(bed):
    """None if the daemons serve per-key reads (a put, then its read), else why not."""
    def put():
        leader = leader_of(bed)
        if not leader:
            return None
        code, doc, _ = netbed.request(bed.addr[leader], "POST", "/metadata", bed.token,
                                      {"key": "lin-probe", "value": "p"}, timeout_s=2.0)
        return leader if code == 200 else None

    leader = netns_faults.wait_for(put)
    if not leader:
        return "no write acknowledged within %.0f s of the start" % netns_faults.WAIT_S
    code, doc, _ = netbed.request(bed.addr[leader], "GET", "/metadata/lin-probe", bed.token,
                                  timeout_s=2.0)
    if code == 200 and isinstance(doc, dict) and doc.get("value") == "p" and "lsn" in doc:
        return None
    return "GET /metadata/<key> answered %s %s" % (code, json.dumps(doc)[:200])


def verdicts(clients, died, agreed):
    v = lincheck.check(clients.history, budget=5_000_000)
    print("  history: %d operations (%s), %d search steps" % (
        len(clients.history), ", ".join("%s %d" % (k, sum(1 for o in clients.history
                                                           if o.kind == k))
                                        for k in ("put", "cas", "get")), v.explored))
    print("  indeterminate writes: %d" % sum(1 for o in clients.history if o.complete is None))
    print("  answers: %s" % dict(sorted(clients.answers.items())))
    linearizable = {True: [], None: ["inconclusive: " + v.detail],
                    False: ["key %s: %s" % (v.key, v.detail)]}[v.linearizable]
    return [
        ("the clients ran to the end", clients.errors),
        ("daemons never exited on their own", died),
        ("a leader agreed after healing", [] if agreed else ["none"]),
        ("every written value unique", lincheck.unique_writes(clients.history)),
        ("one value per LSN", clients.lsn_conflicts),
        ("linearizable (a register per key)", linearizable),
    ]


def run(bed, args, seed):
    rng = random.Random(seed)
    for nid in bed.ids:
        bed.start(nid)
    why = probe(bed)
    if why:
        print("SKIP: the daemon does not serve per-key metadata reads: " + why, flush=True)
        return 77
    with Clients(bed, args.clients, seed, args.key_period, args.keys, args.stale_reads,
                 not args.no_cas) as cl:
        print("faults (seed %d):" % seed, flush=True)
        faults = inject(bed, rng, args.duration)
        died = netns_faults.settle(bed)
        agreed = netns_faults.wait_for(bed.agreed_leader)
        time.sleep(1.0)
    died += ["%s exited with status %s" % (n, bed.procs[n].returncode) for n in bed.ids
             if not bed.running(n)]
    lincheck.dump(sorted(cl.history, key=lambda o: o.invoke),
                  os.path.join(bed.root, "history.jsonl"))
    print("summary (seed %d, %d nodes, %d clients, %d faults%s):" % (
        seed, len(bed.ids), args.clients, len(faults),
        ", planted stale reads" if args.stale_reads else ""))
    results = verdicts(cl, died, agreed)
    for what, bad in results:
        print("  %s: %s" % (what, "ok" if not bad else "VIOLATED"))
        for b in bad:
            print("    " + b.replace("\n", "\n    "))
    refused = any(bad for _, bad in results)
    if args.expect_violation:
        caught = bool(results[-1][1]) and not results[-1][1][0].startswith("inconclusive")
        print("the planted stale reads were %s" % ("caught" if caught else "NOT caught"))
        return 0 if caught else 1
    return 1 if refused else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("conclaved")
    ap.add_argument("--nodes", type=int, choices=(3, 5), default=3)
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--duration", type=float, default=20.0, help="seconds of faults (20)")
    ap.add_argument("--seed", type=int, default=None, help="faults and operations (random)")
    ap.add_argument("--keys", type=int, default=10, help="keys in use at a time (10)")
    ap.add_argument("--key-period", type=float, default=1.0,
                    help="seconds before the clients move on to new keys (1)")
    ap.add_argument("--stale-reads", action="store_true",
                    help="planted bug: reads with consistency=serializable from a random node")
    ap.add_argument("--no-cas", action="store_true",
                    help="puts and reads only (no conditional puts)")
    ap.add_argument("--expect-violation", action="store_true",
                    help="pass only if the checker refuses the history")
    ap.add_argument("--keep", action="store_true", help="keep the data dirs, logs and history")
    args = ap.parse_args()

    def body(root, seed):
        with netbed.Bed(os.path.abspath(args.conclaved), root, size=args.nodes) as bed:
            return run(bed, args, seed)

    return netns_faults.run_in_root(args.seed, args.keep, body)


if __name__ == "__main__":
    sys.exit(main())
