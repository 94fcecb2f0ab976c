#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Kernel-level faults against 3 conclaved daemons (or etcd members) in network namespaces.

    netns_faults.py CONCLAVED [--seed N] [--duration S] [--keep]
    netns_faults.py CONCLAVED --measure-vanish RUNS
    netns_faults.py CONCLAVED --measure-rejoin RUNS [--rejoin-node nK] [--flood]
    netns_faults.py CONCLAVED --measure-forged-hello RUNS
    netns_faults.py --system etcd --measure-vanish RUNS     (etcd on PATH; no CONCLAVED)
    netns_faults.py CONCLAVED --system both --measure-vanish RUNS   (interleaved run by run)

Exit 0: every check holds; 1: a violation (each one printed); 77: skipped (no CAP_NET_ADMIN or
CAP_SYS_ADMIN, no `ip` or `nft`, namespaces unavailable), with one line saying why.
"""
import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flood  # noqa: E402
import forged_hello  # noqa: E402
import history  # noqa: E402
import netbed  # noqa: E402

WAIT_S = 20.0
CAP_NET_ADMIN, CAP_SYS_ADMIN = 12, 21


def skip_reason():
    """Why this machine cannot run the test bed, or None."""
    for tool in ("ip", "nft"):
        if not shutil.which(tool):
            return "no `%s` on PATH (apt-get install -y iproute2 nftables)" % tool
    with open("/proc/self/status") as f:
        caps = int(next(l for l in f if l.startswith("CapEff:")).split()[1], 16)
    for bit, name in ((CAP_NET_ADMIN, "CAP_NET_ADMIN"), (CAP_SYS_ADMIN, "CAP_SYS_ADMIN")):
        if not caps & (1 << bit):
            return "no %s (run as root)" % name
    probe = "%sprobe-%d" % (netbed.PREFIX, os.getpid())
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        return "cannot create a network namespace: " + r.stderr.strip()
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True, timeout=10)
    return None


def wait_for(pred, timeout_s=WAIT_S, step_s=0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(step_s)
    return None


class Workload:
    """A writer putting w/<n> to the leader, and one /status poller per node."""

    def __init__(self, bed):
        self.bed = bed
        self.stopping = threading.Event()
        self.acked, self.attempts, self.answers = [], 0, {}
        self.samples, self.errors = [], []
        self.threads = [threading.Thread(target=self.guarded, args=(self.poll, nid))
                        for nid in bed.ids]
        self.threads.append(threading.Thread(target=self.guarded, args=(self.write,)))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=10)

    def guarded(self, body, *args):
        """Runs a thread's body; an exception is recorded (a violation), not lost."""
        try:
            body(*args)
        except Exception as e:  # noqa: BLE001 -- reported in the summary
            self.errors.append("%s%s: %r" % (body.__name__, args, e))

    def poll(self, nid):
        while not self.stopping.is_set():
            st = self.bed.status(nid, timeout_s=0.2)
            self.samples.append((time.monotonic(), nid, st))
            self.stopping.wait(0.01 if st else 0.02)

    def guess_leader(self):
        latest = {}
        for t, nid, st in self.samples[-30:]:
            if st and st.get("role") == "leader":
                latest[nid] = t
        return max(latest, key=latest.get) if latest else random.choice(self.bed.ids)

    def put(self, host, key):
        code, doc, headers = netbed.request(host, "POST", "/metadata", self.bed.token,
                                            {"key": key, "value": self.attempts}, timeout_s=2.0)
        if code == 307 and isinstance(doc, dict) and doc.get("leader_http"):
            host = doc["leader_http"].rsplit(":", 1)[0]
            code, doc, _ = netbed.request(host, "POST", "/metadata", self.bed.token,
                                          {"key": key, "value": self.attempts}, timeout_s=2.0)
        return code, doc

    def write(self):
        while not self.stopping.is_set():
            key = "w/%d" % self.attempts
            code, doc = self.put(self.bed.addr[self.guess_leader()], key)
            self.attempts += 1
            what = code if code != 503 or not isinstance(doc, dict) else "503 %s" % doc.get("error")
            self.answers[what] = self.answers.get(what, 0) + 1
            if code == 200:
                self.acked.append(key)
            self.stopping.wait(0.01 if code == 200 else 0.02)


def read_log(bed, nid):
    """The committed w/ keys node nid serves, in log order; None if it does not answer."""
    keys, start = [], None
    for _ in range(10000):
        path = "/metadata?max=1000" + ("&from=" + start if start else "")
        code, page, _ = netbed.request(bed.addr[nid], "GET", path, bed.token, timeout_s=5.0)
        if code != 200 or not isinstance(page, dict):
            return None
        keys += [e["key"] for e in page["entries"] if e["key"].startswith("w/")]
        if not page["entries"] or page["next_from"] == start:
            return keys
        start = page["next_from"]
    return keys


def logged_leaderships(bed):
    """Every `leadership changed` record of the daemons' JSON logs, as samples for the checks
    (they see leaderships too short for the pollers)."""
    samples = []
    for nid, path in sorted(bed.logs.items()):
        with open(path, errors="replace") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if isinstance(r, dict) and r.get("msg") == "leadership changed":
                    samples.append((0.0, nid, {k: r.get(k) for k in
                                               ("role", "term", "leader", "fencing_token")}))
    return samples


ALARMS = ("conclave_two_leader_alarms_total", "conclave_metadata_two_leader_alarms_total",
          "conclave_metadata_protocol_violations_total")


def alarms(bed):
    """The daemons' own safety alarms (counted since each one's last start) that are not 0."""
    bad = []
    for nid in bed.ids:
        code, text, _ = netbed.request(bed.addr[nid], "GET", "/metrics", timeout_s=5.0)
        if code != 200 or not isinstance(text, str):
            bad.append("%s: /metrics did not answer" % nid)
            continue
        lines = [l for l in text.splitlines() if l.startswith(ALARMS)]
        missing = [a for a in ALARMS if not any(l.startswith(a) for l in lines)]
        if missing:
            bad.append("%s: /metrics has no %s" % (nid, missing))
        bad += ["%s: %s" % (nid, l) for l in lines if float(l.rsplit(" ", 1)[1]) != 0]
    return bad


# --- faults: each applies itself, lasts `d` seconds, and undoes itself -------------------------


def fault_partition(bed, rng, d, tag):
    a, b = rng.sample(bed.ids, 2)
    bed.partition(a, b, tag)
    time.sleep(d)
    bed.undrop(tag)
    return "partition %s|%s %.1fs" % (a, b, d)


def fault_one_way(bed, rng, d, tag):
    a, b = rng.sample(bed.ids, 2)
    bed.one_way(a, b, tag)
    time.sleep(d)
    bed.undrop(tag)
    return "one-way loss %s->%s %.1fs" % (a, b, d)


def fault_flap(bed, rng, d, tag):
    a, b = rng.sample(bed.ids, 2)
    period = rng.uniform(0.2, 0.5)
    end, cut = time.monotonic() + d, False
    while time.monotonic() < end:
        if cut:
            bed.undrop(tag)
        else:
            bed.partition(a, b, tag)
        cut = not cut
        time.sleep(period)
    bed.undrop(tag)
    return "flapping %s|%s every %.0f ms %.1fs" % (a, b, period * 1000, d)


def fault_vanish(bed, rng, d, tag):
    v = rng.choice(bed.ids)
    bed.isolate(v, tag)
    bed.kill(v)
    time.sleep(d)
    bed.undrop(tag)
    bed.start(v)
    return "vanish %s (isolated, SIGKILL) %.1fs, restarted" % (v, d)


def fault_pause(bed, rng, d, tag):
    v = rng.choice(bed.ids)
    bed.signal(v, signal.SIGSTOP)
    time.sleep(d)
    bed.signal(v, signal.SIGCONT)
    return "pause %s (SIGSTOP) %.1fs" % (v, d)


def fault_kill(bed, rng, d, tag):
    v = rng.choice(bed.ids)
    bed.kill(v)
    time.sleep(d)
    bed.start(v)
    return "kill %s (SIGKILL) %.1fs, restarted" % (v, d)


def fault_restart(bed, rng, d, tag):
    v = rng.choice(bed.ids)
    bed.stop(v)
    bed.start(v)
    time.sleep(d)
    return "restart %s (SIGTERM, start)" % v


FAULTS = [fault_partition, fault_one_way, fault_flap, fault_vanish, fault_pause, fault_kill,
          fault_restart]


def inject(bed, rng, duration_s):
    """Random faults for duration_s seconds, each 0.5-4 s, 0.5-2 s of calm between them."""
    done, end = [], time.monotonic() + duration_s
    while time.monotonic() < end:
        fault = rng.choice(FAULTS)
        d = rng.uniform(0.5, 4.0)
        what = fault(bed, rng, d, "f%d" % len(done))
        print("  %6.1fs  %s" % (duration_s - (end - time.monotonic()), what), flush=True)
        done.append(what)
        time.sleep(rng.uniform(0.5, 2.0))
    return done


def settle(bed):
    """Heals the network, resumes paused daemons; returns the nodes that had exited on their own."""
    bed.heal()
    died = []
    for nid in bed.ids:
        if bed.running(nid):
            bed.signal(nid, signal.SIGCONT)
        else:
            died.append("%s exited with status %s" % (nid, bed.procs[nid].returncode))
            bed.start(nid)
    return died


def converged_logs(bed, acked):
    """Each node's log, once all are equal and hold every acknowledged write (or after WAIT_S)."""
    logs = {}

    def same():
        logs.update({nid: read_log(bed, nid) for nid in bed.ids})
        keys = list(logs.values())
        return all(k is not None and k == keys[0] for k in keys) and set(acked) <= set(keys[0])

    wait_for(same, step_s=0.5)
    return logs


def run_faults(bed, seed, duration_s):
    rng = random.Random(seed)
    for nid in bed.ids:
        bed.start(nid)
    if not wait_for(bed.agreed_leader):
        print("FAIL: no agreed leader within %.0f s of the start" % WAIT_S)
        return 1
    with Workload(bed) as load:
        wait_for(lambda: load.acked, timeout_s=5)
        print("faults (seed %d):" % seed, flush=True)
        faults = inject(bed, rng, duration_s)
        died = settle(bed)
        agreed = wait_for(bed.agreed_leader)
        time.sleep(2.0)  # quiet: writes and polls go on against the healed cluster
    logs = converged_logs(bed, load.acked)
    died += ["%s exited with status %s" % (n, bed.procs[n].returncode) for n in bed.ids
             if not bed.running(n)]
    logged = logged_leaderships(bed)
    verdicts = [
        ("the writer and pollers ran to the end", load.errors),
        ("daemons never exited on their own", died),
        ("a leader agreed after healing", [] if agreed else ["none within %.0f s" % WAIT_S]),
        ("acknowledged writes on every node, once, in order", history.check_writes(load.acked, logs)),
        ("one leader per term", history.check_one_leader_per_term(load.samples + logged)),
        ("no fencing token claimed by two nodes", history.check_tokens(load.samples + logged)),
        ("the daemons' two-leader and protocol-violation counters are 0", alarms(bed)),
    ]
    gap, began = history.longest_leaderless(load.samples, bed.ids)
    print("summary (seed %d):" % seed)
    print("  writes: %d attempted, %d acknowledged; answers %s" %
          (load.attempts, len(load.acked), dict(sorted(load.answers.items(), key=str))))
    print("  faults injected: %d; clock drift: %s" % (len(faults), bed.drift_node or "none"))
    print("  leadership changes logged by the daemons: %d" % len(logged))
    print("  status samples: %d; longest leaderless time: %.0f ms%s" %
          (len(load.samples), gap * 1000, "" if began is None else " (from %.1f s)" % began))
    for what, bad in verdicts:
        print("  %s: %s" % (what, "ok" if not bad else "VIOLATED"))
        for b in bad:
            print("    " + b)
    return 1 if any(bad for _, bad in verdicts) else 0


def validate_traces(bed, trace_dir):
    """The daemons' elector traces merged by message causality and checked against
    tla/Elector.tla: 0 when the merged trace is a behaviour of the spec (docs/tla-traces.md)."""
    tla = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tla")
    merged = os.path.join(trace_dir, "merged.ndjson")
    files = [os.path.join(trace_dir, nid + ".ndjson") for nid in bed.ids]
    steps = [sys.executable, os.path.join(tla, "merge_daemon_traces.py"), merged] + files
    if subprocess.run(steps).returncode != 0:
        print("FAIL: the daemons' traces do not merge")
        return 1
    rc = subprocess.run([os.path.join(tla, "validate-trace.sh"), merged]).returncode
    print("  the merged elector trace is a behaviour of Elector.tla: %s" %
          ("ok" if rc == 0 else "skipped (no TLC)" if rc == 77 else "VIOLATED"))
    return 0 if rc in (0, 77) else 1


def vanish_once(bed, rng, run):
    """One run: the time (ms) from the leader's host vanishing (isolated, then SIGKILL) to both
    others naming the same new leader in the same term, the leader saying so; None on failure
    (printed). The vanished node is restored and restarted afterwards."""
    first = wait_for(bed.agreed_leader)
    if not first:
        print("FAIL: %s: no agreed leader before run %d" % (bed.system, run))
        return None
    time.sleep(rng.uniform(0.1, 0.2))  # a random phase of the heartbeat
    old = first[0]
    others = [n for n in bed.ids if n != old]
    t0 = time.monotonic()
    bed.isolate(old, "vanish")
    bed.kill(old)
    isolated_ms = (time.monotonic() - t0) * 1000
    after = wait_for(lambda: (lambda a: a if a and a[0] != old else None)(
        bed.agreed_leader(others)), step_s=0.002)
    ms = (time.monotonic() - t0) * 1000
    if not after:
        print("FAIL: %s: run %d: no new leader within %.0f s" % (bed.system, run, WAIT_S))
        return None
    print("  run %d, %s: %s vanished (rules + SIGKILL in %.0f ms), %s leads term %d after %.0f ms"
          % (run, bed.system, old, isolated_ms, after[0], after[1], ms), flush=True)
    bed.undrop("vanish")
    bed.start(old)
    return ms


def measure_vanish(beds, runs, seed):
    """vanish_once RUNS times on each bed, interleaved run by run (run k on each bed, then run
    k + 1), each bed drawing the same calms from its own generator seeded with `seed`."""
    rngs = [random.Random(seed) for _ in beds]
    for bed in beds:
        for nid in bed.ids:
            bed.start(nid)
    figures = {bed.system: [] for bed in beds}
    for run in range(runs):
        for bed, rng in zip(beds, rngs):
            ms = vanish_once(bed, rng, run)
            if ms is None:
                return 1
            figures[bed.system].append(ms)
    for system, f in figures.items():
        print("vanish failover of %s over %d runs: min %.0f / median %.0f / max %.0f ms" %
              (system, runs, min(f), statistics.median(f), max(f)))
    return 0


def measure_rejoin(bed, runs, seed, within_s=None, node=None, flooded=False):
    """How long a node whose host vanished (isolated, SIGKILL) for 1-8 s, then was restored and
    restarted, takes to have both of its peer connections up again. With within_s: n1 (the
    first node, the dialer of both of its links) is gone for 3.2-4.2 s (the peers' next
    retransmission is then seconds away), and a run that takes longer than within_s fails.
    With node: that node is the victim every time (the downtimes stay those of the seed). With
    flooded: idle connections flood every node's peer port meanwhile (flood.py)."""
    for nid in bed.ids:
        bed.start(nid)
    with flood.Flooder(bed, [bed.addr[n] for n in bed.ids]) if flooded else \
            contextlib.nullcontext() as flooder:
        rc = rejoin_runs(bed, runs, seed, within_s, node)
        if flooder:
            print("flood: %d idle connections reopened after the nodes closed them" %
                  flooder.reopened)
    return rc


def rejoin_runs(bed, runs, seed, within_s, node):
    rng = random.Random(seed)
    failed = 0
    figures = []
    for run in range(runs):
        if not wait_for(bed.agreed_leader):
            print("FAIL: no agreed leader before run %d" % run)
            return 1
        v = rng.choice(bed.ids) if within_s is None else bed.ids[0]
        v = node or v
        gone = rng.uniform(1.0, 8.0) if within_s is None else rng.uniform(3.2, 4.2)
        bed.isolate(v, "vanish")
        bed.kill(v)
        time.sleep(gone)
        bed.undrop("vanish")
        t0 = time.monotonic()
        bed.start(v)
        linked = wait_for(lambda: (lambda st: st and all(p["up"] for p in st["peers"]))(
            bed.status(v)), timeout_s=30, step_s=0.01)
        ms = (time.monotonic() - t0) * 1000
        late = not linked or (within_s is not None and ms > within_s * 1000)
        failed += late
        figures.append(ms)
        print("  run %d: %s gone %.1f s, restarted: %s after %.0f ms%s" %
              (run, v, gone, "both peers up" if linked else "NOT linked", ms,
               " (FAIL: more than %.1f s)" % within_s if late and within_s else ""), flush=True)
    print("restart -> both peers up over %d runs: min %.0f / median %.0f / max %.0f ms" %
          (runs, min(figures), statistics.median(figures), max(figures)))
    return 1 if failed else 0


def begin(reason, seed):
    """The run's seed (`seed`, or a random one), printed, after removing what dead runs left
    behind; None, after printing SKIP, when `reason` says why the bed cannot run."""
    if reason:
        print("SKIP: netns test bed not run: " + reason, flush=True)
        return None
    left = netbed.cleanup_leftovers()
    if left:
        print("removed the leftovers of dead runs %s" % left)
    seed = seed if seed is not None else random.SystemRandom().randrange(1 << 31)
    print("seed %d (reproduce the schedule: --seed %d)" % (seed, seed), flush=True)
    return seed


def run_in_root(seed, keep, body):
    """begin(), then body(root, seed) in a new temporary directory; body's exit status (77 when
    the bed cannot run). The directory is removed unless `keep`, or body returned 1 or raised."""
    seed = begin(skip_reason(), seed)
    if seed is None:
        return 77
    root = netbed.make_root()
    failed = True
    try:
        rc = body(root, seed)
        failed = rc == 1
        return rc
    finally:
        netbed.remove_root(root, keep or failed)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("conclaved", nargs="?",
                    help="the conclaved binary (required, except with --system etcd)")
    ap.add_argument("--system", choices=("conclaved", "etcd", "both"), default="conclaved",
                    help="etcd: 3 etcd members (`etcd` on PATH, apt-get install -y etcd-server) "
                    "at the fast profile's timing (heartbeat %d ms, election timeout %d ms, "
                    "pre-vote) instead of conclaved; both: the two clusters side by side, runs "
                    "interleaved; etcd and both go with --measure-vanish only "
                    "(default: conclaved)" %
                    (netbed.ETCD_FAST_HEARTBEAT_MS, netbed.ETCD_FAST_ELECTION_MS))
    ap.add_argument("--seed", type=int, default=None,
                    help="seed of the fault schedule; with --measure-vanish, of the calms "
                    "before each vanish; with --measure-rejoin, of the victims and outages "
                    "(default: random)")
    ap.add_argument("--duration", type=float, default=75.0, help="seconds of faults (75)")
    ap.add_argument("--no-drift", action="store_true", help="no node under faketime")
    ap.add_argument("--measure-vanish", type=int, metavar="RUNS", default=0,
                    help="time RUNS failovers after the leader's host vanishes")
    ap.add_argument("--measure-rejoin", type=int, metavar="RUNS", default=0,
                    help="time RUNS rejoins of a node whose host vanished")
    ap.add_argument("--rejoin-within", type=float, metavar="S", default=None,
                    help="with --measure-rejoin: fail a run that takes longer")
    ap.add_argument("--rejoin-node", choices=["n1", "n2", "n3"], default=None,
                    help="with --measure-rejoin: always vanish this node (default: random; n1 "
                         "with --rejoin-within)")
    ap.add_argument("--flood", action="store_true",
                    help="with --measure-rejoin: idle connections from 9 more addresses flood "
                    "every node's peer port meanwhile (flood.py)")
    ap.add_argument("--measure-forged-hello", type=int, metavar="RUNS", default=0,
                    help="RUNS times: n1 leads (default profile), is cut off from its peers, "
                    "and a process without the secret sends the followers hellos naming it "
                    "every 20 ms; fails when valid leases overlap (forged_hello.py)")
    ap.add_argument("--trace-elector", metavar="DIR", default=None,
                    help="every daemon records its elector's steps in DIR/<node>.ndjson; after "
                    "the fault run their merged trace must be a behaviour of tla/Elector.tla "
                    "(tla/merge_daemon_traces.py, tla/validate-trace.sh; needs TLC)")
    ap.add_argument("--keep", action="store_true", help="keep the data dirs and daemon logs")
    args = ap.parse_args()
    if (args.system == "etcd") != (args.conclaved is None):
        ap.error("CONCLAVED is required, except with --system etcd, which takes none")
    if args.system != "conclaved" and not args.measure_vanish:
        ap.error("--system %s goes with --measure-vanish only" % args.system)
    reason = skip_reason()
    if not reason and args.system != "conclaved" and not shutil.which("etcd"):
        reason = "no `etcd` on PATH (apt-get install -y etcd-server)"
    seed = begin(reason, args.seed)
    if seed is None:
        return 77
    drift = None
    measuring = args.measure_vanish or args.measure_rejoin or args.measure_forged_hello
    if not args.no_drift and not measuring and os.path.exists(netbed.FAKETIME_LIB):
        drift = random.Random(seed).choice(["n1", "n2", "n3"])
    root = netbed.make_root()
    trace_dir = None
    if args.trace_elector:
        trace_dir = os.path.abspath(args.trace_elector)
        shutil.rmtree(trace_dir, ignore_errors=True)
        os.makedirs(trace_dir)
    failed = True
    try:
        with contextlib.ExitStack() as stack:
            beds = []
            if args.system != "etcd":
                profile = "default" if args.measure_forged_hello else "fast"
                beds.append(stack.enter_context(
                    netbed.Bed(os.path.abspath(args.conclaved), root, drift_node=drift,
                               profile=profile, trace_dir=trace_dir)))
            if args.system != "conclaved":
                beds.append(stack.enter_context(netbed.EtcdBed(shutil.which("etcd"), root)))
            bed = beds[0]
            if args.measure_vanish:
                rc = measure_vanish(beds, args.measure_vanish, seed)
            elif args.measure_forged_hello:
                rc = forged_hello.measure_forged_hello(bed, args.measure_forged_hello)
            elif args.measure_rejoin:
                rc = measure_rejoin(bed, args.measure_rejoin, seed, args.rejoin_within,
                                    args.rejoin_node, args.flood)
            else:
                rc = run_faults(bed, seed, args.duration)
            if trace_dir:
                stack.close()  # the daemons stopped: their traces are whole
                rc = rc or validate_traces(bed, trace_dir)
            failed = rc != 0
            return rc
    finally:
        netbed.remove_root(root, args.keep or failed)


if __name__ == "__main__":
    sys.exit(main())
