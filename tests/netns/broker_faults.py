#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The example broker (examples/broker) as 3 real processes in network namespaces, under faults.

    broker_faults.py BROKER [--partitions N] [--rounds R] [--seed N] [--keep]
                     [--planted-stale-serving --expect-violation]

BROKER is conclave-broker-example (examples/broker/broker_main.cpp): a Conclave node with the
example broker on it, reporting each start and stop of serving a partition and each acknowledged
assignment (JSON lines, CLOCK_MONOTONIC times taken when the broker decides). In the bed of
netbed.py (a namespace per broker, a bridge, nftables), each round runs three faults on the
leader, one at a time: SIGKILL (restarted 1-2 s later), SIGSTOP past its lease (SIGCONT 1.5-3 s
later), and an nftables partition cutting it off from both peers (healed 2-4 s later). Checks:
  (a) no partition ever has two serving intervals from two brokers overlapping in time;
  (b) every acknowledged assignment is in every node's committed log read at the end
      (GET /metadata), at its LSN with its value;
  (c) progress: before the first fault and after each one, every partition is served by some
      broker again (held for 1 s) within PROGRESS_S;
and no broker exited on its own.

--planted-stale-serving starts the brokers with CONCLAVE_BROKER_PLANTED_BUG=stale-serving (they
serve on the applied assignment alone: no token, no lease check). With --expect-violation the run
passes only if check (a) reports an overlap (the canary).

Exit 0: every check holds (or, with --expect-violation, the overlap was reported); 1: otherwise;
77: skipped (no root, no `ip`/`nft`, no namespaces).
"""
import argparse
import json
import os
import random
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netbed  # noqa: E402
import netns_faults  # noqa: E402

PROGRESS_S = 30.0  # generous: elections, the new leader's settle time, a busy machine
HELD_S = 1.0


class BrokerBed(netbed.Bed):
    """netbed's bed with the broker in place of conclaved: each writes <root>/<node>.report."""

    def __init__(self, broker, root, partitions, planted):
        super().__init__(broker, root)
        self.partitions, self.planted = partitions, planted
        self.kills = {nid: [] for nid in self.ids}  # monotonic times after each SIGKILL

    def report_path(self, nid):
        return os.path.join(self.root, nid + ".report")

    def start(self, nid):
        env = dict(os.environ)
        if self.planted:
            env["CONCLAVE_BROKER_PLANTED_BUG"] = "stale-serving"
        self.spawn(nid, [self.daemon, "--config", self.config, "--node-id", nid, "--report",
                         self.report_path(nid), "--partitions", str(self.partitions)], env)

    def kill(self, nid):
        was = self.running(nid)
        super().kill(nid)
        if was:
            self.kills[nid].append(time.monotonic())

    def report(self, nid):
        """The lines of nid's report so far (a line being written is left for the next read)."""
        try:
            with open(self.report_path(nid)) as f:
                text = f.read()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.split("\n")[:-1] if line]


def served_now(bed):
    """The partitions some running broker serves now, by the last line of its report for each."""
    served = set()
    for nid in bed.ids:
        if not bed.running(nid):
            continue
        last = {}
        for e in bed.report(nid):
            if e["event"] == "up":
                last = {}
            elif e["event"] in ("start", "stop"):
                last[e["partition"]] = e["event"]
        served |= {p for p, what in last.items() if what == "start"}
    return served


def wait_progress(bed):
    """Seconds until every partition is served by some broker for HELD_S, or None."""
    begin, held_since = time.monotonic(), None
    while time.monotonic() < begin + PROGRESS_S:
        if len(served_now(bed)) == bed.partitions:
            held_since = held_since or time.monotonic()
            if time.monotonic() - held_since >= HELD_S:
                return held_since - begin
        else:
            held_since = None
        time.sleep(0.05)
    return None


def leader(bed):
    agreed = netns_faults.wait_for(bed.agreed_leader)
    return agreed[0] if agreed else None


def fault_kill(bed, rng, v):
    bed.kill(v)
    d = rng.uniform(1.0, 2.0)
    time.sleep(d)
    bed.start(v)
    return "SIGKILL leader %s, restarted %.1fs later" % (v, d)


def fault_pause(bed, rng, v):
    bed.signal(v, signal.SIGSTOP)
    d = rng.uniform(1.5, 3.0)
    time.sleep(d)
    bed.signal(v, signal.SIGCONT)
    return "SIGSTOP leader %s, SIGCONT %.1fs later" % (v, d)


def fault_partition(bed, rng, v):
    for other in bed.ids:
        if other != v:
            bed.partition(v, other, "cut")
    d = rng.uniform(2.0, 4.0)
    time.sleep(d)
    bed.undrop("cut")
    return "leader %s cut off from its peers (nftables), healed %.1fs later" % (v, d)


FAULTS = [fault_kill, fault_pause, fault_partition]


def intervals(runs, end):
    """{partition: [(start, stop, node, token)]} in seconds of CLOCK_MONOTONIC, from
    `runs` = {node: (its report's lines, the monotonic times it was SIGKILLed)}. An interval still
    open when its process was killed ends at the kill (the process decided nothing after it); one
    still open at the end of the run ends at `end`."""
    found = {}
    for nid, (lines, kills) in sorted(runs.items()):
        open_ = {}

        def close(p, t, nid=nid, open_=open_):
            start, token = open_.pop(p)
            found.setdefault(p, []).append((start, t, nid, token))

        for e in lines:
            t = e["t"] / 1e9
            if e["event"] == "up":
                killed = [k for k in kills if k <= t]
                for p in list(open_):
                    close(p, max(killed) if killed else t)
            elif e["event"] == "start":
                open_[e["partition"]] = (t, e["token"])
            elif e["event"] == "stop" and e["partition"] in open_:
                close(e["partition"], t)
        for p in list(open_):
            close(p, end)
    return found


def overlaps(found, faults, t0):
    """Pairs of intervals of one partition, from two brokers, that share an instant; each named
    with the fault under way or last begun when the later one started. `faults`: (monotonic time
    it began, what); times are printed in seconds since t0."""
    bad = []
    for p, spans in sorted(found.items()):
        spans = sorted(spans)
        for i, a in enumerate(spans):
            for b in spans[i + 1:]:
                if b[0] > a[1]:
                    break
                if b[2] != a[2]:
                    during = [what for began, what in faults if began <= b[0]]
                    bad.append("partition %d: %s (token %d) served %.3f-%.3f s and %s (token %d) "
                               "%.3f-%.3f s: %.0f ms together (%s)" % (
                                   p, a[2], a[3], a[0] - t0, a[1] - t0, b[2], b[3], b[0] - t0,
                                   b[1] - t0, 1000 * (min(a[1], b[1]) - b[0]),
                                   "since: " + during[-1] if during else "before the faults"))
    return bad


def committed(bed, nid):
    """{lsn "T.C": (key, value)} of nid's committed partitions/ entries, None if unread."""
    entries, start = {}, None
    for _ in range(1000):
        path = "/metadata?max=1000" + ("&from=" + start if start else "")
        code, page, _ = netbed.request(bed.addr[nid], "GET", path, bed.token,
                                       timeout_s=5.0)
        if code != 200 or not isinstance(page, dict):
            return None
        for e in page["entries"]:
            if e["key"].startswith("partitions/"):
                lsn = e["lsn"]
                lsn = lsn if isinstance(lsn, str) else "%s.%s" % (lsn["term"], lsn["counter"])
                value = e["value"]
                entries[lsn] = (e["key"], json.loads(value) if isinstance(value, str) else value)
        if not page["entries"] or page["next_from"] == start:
            return entries
        start = page["next_from"]
    return entries


def missing_acks(acks, logs):
    """The acknowledged assignments (report lines) absent from a node's log, at their LSN with
    their value; `logs`: {node: committed() of it, or None when it did not answer}."""
    return ["%s: partition %d: %s at %s (acknowledged to %s) not in its log" % (
        nid, a["partition"], a["value"], a["lsn"], a["node"])
        for nid, log in sorted(logs.items()) for a in acks
        if log is None or log.get(a["lsn"]) != ("partitions/%d" % a["partition"],
                                               json.loads(a["value"]))]


def lost_acks(bed):
    """The acknowledged assignments missing from some node's committed log, once every node holds
    them all (or after netns_faults.WAIT_S). The run writes far fewer entries than the log's
    compaction threshold, so every committed entry is still in the log at its LSN."""
    acks = [e for nid in bed.ids for e in bed.report(nid) if e["event"] == "ack"]
    missing = []

    def check():
        missing[:] = missing_acks(acks, {nid: committed(bed, nid) for nid in bed.ids})
        return not missing

    netns_faults.wait_for(check, step_s=0.5)
    return acks, missing


def run(bed, args, rng):
    t0 = time.monotonic()
    for nid in bed.ids:
        bed.start(nid)
    slow, died, faults = [], [], []
    took = wait_progress(bed)
    print("  every partition served %s" % ("after %.1fs" % took if took is not None else
                                           "NEVER (%.0fs)" % PROGRESS_S), flush=True)
    if took is None:
        slow.append("at the start")
    for r in range(args.rounds):
        for fault in FAULTS:
            v = leader(bed) or rng.choice(bed.ids)
            began = time.monotonic()
            what = fault(bed, rng, v)
            died += netns_faults.settle(bed)
            took = wait_progress(bed)
            print("  %5.1fs  %s; every partition served again %s" % (
                began - t0, what, "after %.1fs" % took if took is not None else "NEVER"),
                flush=True)
            faults.append((began, what))
            if took is None:
                slow.append("after: " + what)
    acks, missing = lost_acks(bed)
    for nid in bed.ids:
        if not bed.running(nid):
            died.append("%s exited with status %s" % (nid, bed.procs[nid].returncode))
        bed.stop(nid)  # SIGTERM: the broker closes its open intervals
    found = intervals({nid: (bed.report(nid), bed.kills[nid]) for nid in bed.ids},
                      time.monotonic())
    print("  %d faults, %d serving intervals, %d acknowledged assignments" % (
        len(faults), sum(len(s) for s in found.values()), len(acks)))
    return [
        ("(a) no partition served by two brokers at once", overlaps(found, faults, t0)),
        ("(b) every acknowledged assignment committed", missing),
        ("(c) every partition served again within %.0fs of each fault" % PROGRESS_S, slow),
        ("no broker exited on its own", died),
    ]


def run_bed(args, root, seed):
    """One run in `root`; the exit status (0 pass, 1 fail)."""
    with BrokerBed(os.path.abspath(args.broker), root, args.partitions,
                   args.planted_stale_serving) as bed:
        print("faults (seed %d%s):" % (seed, ", planted stale serving"
                                       if args.planted_stale_serving else ""), flush=True)
        results = run(bed, args, random.Random(seed))
    print("summary (seed %d):" % seed)
    for what, bad in results:
        print("  %s: %s" % (what, "ok" if not bad else "VIOLATED"))
        for b in bad:
            print("    " + b)
    if args.expect_violation:
        caught = bool(results[0][1])
        print("the planted stale serving was %s" % ("caught" if caught else "NOT caught"))
        return 0 if caught else 1
    return 1 if any(bad for _, bad in results) else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("broker", help="the conclave-broker-example binary")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1, help="rounds of the three faults (1)")
    ap.add_argument("--seed", type=int, default=None, help="fault durations (random)")
    ap.add_argument("--planted-stale-serving", action="store_true",
                    help="planted bug: the brokers serve without checking token or lease")
    ap.add_argument("--expect-violation", action="store_true",
                    help="pass only if check (a) reports an overlap")
    ap.add_argument("--keep", action="store_true", help="keep the data dirs, logs and reports")
    args = ap.parse_args()
    return netns_faults.run_in_root(args.seed, args.keep, lambda root, seed: run_bed(
        args, root, seed))


if __name__ == "__main__":
    sys.exit(main())
