#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Real daemons' traces checked against Elector.tla (CTest tla_trace_daemon).

    daemon-traces.py CONCLAVED OUT_DIR
    daemon-traces.py --planted BUG CONCLAVED_PLANTED OUT_DIR
    daemon-traces.py --run scenario|hasty CONCLAVED OUT_DIR      (one of the two runs)

The scenario run: three `conclaved` on loopback (fast profile, --trace-elector on) through an
election, a leader crash (SIGKILL) and its restart, a leader paused (SIGSTOP) longer than its
lease and resumed, and an operator's transfer (POST /transfer-leadership); they are stopped
(SIGTERM), their traces merged by causality (tla/merge_daemon_traces.py) and the merged trace
validated with tla/validate-trace.sh; tla/trace_leader_steps.py requires the steps the run must
have taken. Then the hasty-follower run: two nodes elect a leader, and a third joins with a
timing so short (10 ms heartbeats, 5 ms checks) that it gives up on the live leader between two
of its heartbeats and scouts, while the other follower's promise holds: that follower must refuse
(a promise refusal is required), and the trace must validate.
--planted BUG: only the hasty-follower run, with CONCLAVE_PLANTED_BUG=BUG for every daemon
(conclaved_planted); it passes only if TLC rejects the trace at a HandleScoutingRequest or
HandleElectionProposal step (for skip-sticky-leader: support or a vote inside a promise, or a
leader that answers a proposal of its own term as a follower would).
Exit 0 pass, 1 fail, 77 when TLC is not installed (checked before any daemon starts).
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from conclaved_test import free_ports  # noqa: E402  (the same helper)

HERE = os.path.dirname(os.path.abspath(__file__))
TLA = os.path.normpath(os.path.join(HERE, "..", "..", "tla"))
NODES = ["n0", "n1", "n2"]
WAIT_S = 40          # bound of each wait for the cluster to agree (a busy machine)
PAUSE_S = 2.0        # the fast profile's lease is under 300 ms
REQUIRED = "elected,crash,restart,transfer,cession,lease-expiry"
HASTY_S = 0.5        # how long the hasty follower runs beside the leader (dozens of refusals)
# The hasty follower: scouts 30 ms after a heartbeat of a leader that beats every 100 ms; the
# same heartbeat_check_misses as the fast profile (ceil(30 / 5) = ceil(300 / 50) = 6), which the
# trace's header must agree on.
HASTY_TIMING = {"heartbeat_ms": 10, "heartbeat_check_ms": 5, "miss_count": 3,
                "initial_wait_ms": 5, "max_random_wait_ms": 5, "scouting_result_ms": 20,
                "election_result_ms": 20, "rank_slot_ms": 1, "rank_slot_min_ms": 1,
                "rank_slot_max_ms": 5}


def log(msg):
    print(f"daemon-traces: {msg}", flush=True)


class Cluster:
    def __init__(self, daemon, root, env=None):
        self.daemon, self.root, self.env = daemon, root, env
        self.procs, self.http = {}, {}
        secret, self.token = os.urandom(32).hex(), os.urandom(32).hex()
        for name, value in (("secret", secret), ("token", self.token)):
            fd = os.open(os.path.join(root, name), os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, value.encode())
            os.close(fd)
        nodes = []
        ports = free_ports(2 * len(NODES))
        for i, nid in enumerate(NODES):
            self.http[nid] = ports[2 * i]
            nodes.append({"id": nid, "peer": f"127.0.0.1:{ports[2 * i + 1]}",
                          "http": f"127.0.0.1:{self.http[nid]}"})
        doc = {"cluster": "trace", "nodes": nodes, "profile": "fast",
               "data_dir": os.path.join(root, "{id}"), "log": {"format": "json"},
               "secret_file": "secret", "admin": {"token_file": "token"}}
        self.config = os.path.join(root, "cluster.json")
        with open(self.config, "w") as f:
            json.dump(doc, f)
        self.hasty_config = os.path.join(root, "cluster-hasty.json")
        with open(self.hasty_config, "w") as f:
            json.dump(dict(doc, timing=HASTY_TIMING), f)

    def trace(self, nid):
        return os.path.join(self.root, f"trace-{nid}.ndjson")

    def start(self, nid, hasty=False):
        config = self.hasty_config if hasty else self.config
        with open(os.path.join(self.root, nid + ".log"), "ab") as out:
            self.procs[nid] = subprocess.Popen(
                [self.daemon, "--config", config, "--node-id", nid,
                 "--trace-elector", self.trace(nid)], stdout=out, stderr=out, env=self.env)

    def running(self, nid):
        return nid in self.procs and self.procs[nid].poll() is None

    def kill(self, nid):
        if self.running(nid):
            self.procs[nid].send_signal(signal.SIGCONT)
            self.procs[nid].kill()
            self.procs[nid].wait(timeout=10)

    def stop_all(self):
        for nid in NODES:
            if self.running(nid):
                self.procs[nid].send_signal(signal.SIGCONT)
                self.procs[nid].terminate()
        for nid in NODES:
            if nid in self.procs:
                try:
                    self.procs[nid].wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.kill(nid)

    def request(self, nid, method, path, timeout_s=1.0):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.http[nid], timeout=timeout_s)
            c.request(method, path, headers={"Authorization": "Bearer " + self.token})
            r = c.getresponse()
            text = r.read().decode()
            c.close()
            return r.status, json.loads(text)
        except (OSError, http.client.HTTPException, ValueError):
            return None, None

    def agreed_leader(self, nids):
        """The leader every listed node names, the leader itself saying so; None otherwise."""
        docs = [self.request(n, "GET", "/status")[1] for n in nids]
        if any(not isinstance(d, dict) for d in docs):
            return None
        leaders = {d.get("leader") for d in docs}
        terms = {d.get("term") for d in docs}
        if len(leaders) != 1 or len(terms) != 1:
            return None
        leader = leaders.pop()
        if leader not in nids or docs[nids.index(leader)].get("role") != "leader":
            return None
        return leader

    def wait_leader(self, nids, what, avoid=None):
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            leader = self.agreed_leader(nids)
            if leader is not None and leader != avoid:
                log(f"{what}: {leader} leads {nids}")
                return leader
            time.sleep(0.1)
        raise RuntimeError(f"{what}: no leader agreed by {nids} within {WAIT_S} s")


def scenario(c):
    for nid in NODES:
        c.start(nid)
    leader = c.wait_leader(NODES, "election")
    c.kill(leader)  # SIGKILL: its trace ends where it ended
    # The restart at once: a new process appends to the same trace; the others elect while its
    # start promise (P from its start) has it refuse their scouting.
    c.start(leader)
    second = c.wait_leader(NODES, f"after SIGKILL and restart of {leader}")
    c.procs[second].send_signal(signal.SIGSTOP)
    log(f"SIGSTOP {second} for {PAUSE_S} s (longer than its lease)")
    others = [n for n in NODES if n != second]
    try:
        c.wait_leader(others, f"while {second} is paused")
        time.sleep(max(0.0, PAUSE_S - 0.5))
    finally:
        c.procs[second].send_signal(signal.SIGCONT)
    third = c.wait_leader(NODES, f"after SIGCONT of {second}")
    for _ in range(50):  # refused while the target's link is not up yet: ask again
        third = c.agreed_leader(NODES) or third
        target = next(n for n in NODES if n != third)
        status, doc = c.request(third, "POST", f"/transfer-leadership?to={target}")
        if status is not None and 200 <= status < 300:
            break
        time.sleep(0.2)
    log(f"transfer {third} -> {target}: {status} {doc}")
    c.wait_leader(NODES, f"after the transfer to {target}", avoid=third)
    time.sleep(0.5)


def hasty_scenario(c):
    for nid in NODES:  # a new cluster's nodes are admitted by every other voter first
        c.start(nid)
    leader = c.wait_leader(NODES, "election")
    hasty = next(n for n in NODES if n != leader)
    c.procs[hasty].terminate()
    c.procs[hasty].wait(timeout=10)
    c.start(hasty, hasty=True)
    log(f"{hasty} restarted with a short timing beside the leader {leader} for {HASTY_S} s")
    time.sleep(HASTY_S)
    # The start promise: with the other follower paused, the hasty node alone cannot win; the
    # leader, SIGKILLed and restarted, hears its scouting within its start promise and refuses.
    other = next(n for n in NODES if n not in (leader, hasty))
    c.procs[other].send_signal(signal.SIGSTOP)
    try:
        c.kill(leader)
        c.start(leader)
        log(f"{other} paused, {leader} killed and restarted beside the hasty {hasty}")
        c.wait_leader([leader, hasty], f"after the restart of {leader}")
    finally:
        c.procs[other].send_signal(signal.SIGCONT)
    c.wait_leader(NODES, f"after SIGCONT of {other}")


def run(c, scenario_fn, out, name):
    """Runs one scenario, stops the daemons and merges their traces: the merged path or None."""
    try:
        scenario_fn(c)
    except RuntimeError as e:
        log(f"the scenario failed: {e} (daemon logs in {out})")
        return None
    finally:
        c.stop_all()
    merged = os.path.join(out, f"merged-{name}.ndjson")
    merge = subprocess.run([sys.executable, os.path.join(TLA, "merge_daemon_traces.py"), merged]
                           + [c.trace(n) for n in NODES if os.path.exists(c.trace(n))])
    return merged if merge.returncode == 0 else None


def validate(merged, required, expect_fail=False):
    """0 when the trace validates (rejected, with expect_fail) and took the required steps."""
    steps = subprocess.run([sys.executable, os.path.join(TLA, "trace_leader_steps.py"),
                            f"--require={required}", merged])
    cmd = [os.path.join(TLA, "validate-trace.sh")] + (["--expect-fail"] if expect_fail else [])
    r = subprocess.run(cmd + [merged], capture_output=True, text=True)
    print(r.stdout + r.stderr, end="")
    if r.returncode == 77:
        return 77
    if r.returncode != 0 or steps.returncode != 0:
        return 1
    if expect_fail:
        # SkipStickyLeader answers a scouting request or a proposal inside a promise (or, at a
        # leader, a proposal of its own term) as if no leader were known.
        return rejected_at(merged, r.stdout, ("HandleScoutingRequest", "HandleElectionProposal"))
    return 0


def rejected_at(merged, report, actions):
    """0 when TLC's rejection names a step of one of `actions` (validate-trace.sh: trace line
    L)."""
    found = re.search(r"step \d+ \(trace line (\d+)\)", report)
    if not found:
        log("TLC rejected the trace but named no step")
        return 1
    with open(merged) as f:
        line = f.read().splitlines()[int(found.group(1)) - 1]
    step = json.loads(line)
    log(f"rejected at {step['action']} of node {step['node']} ({step.get('src')}): "
        f"{json.dumps(step.get('msg'))} -> {json.dumps(step['sent'])}")
    if step["action"] not in actions:
        log(f"expected the rejection at a step of {actions}")
        return 1
    return 0


def main(argv):
    planted = only = None
    if argv[:1] == ["--planted"] and len(argv) > 1:
        planted, argv = argv[1], argv[2:]
    if argv[:1] == ["--run"] and len(argv) > 1:  # one of the two runs (scenario, hasty)
        only, argv = argv[1], argv[2:]
    if len(argv) != 2:
        print("usage: daemon-traces.py [--planted BUG] CONCLAVED OUT_DIR", file=sys.stderr)
        return 2
    daemon, out = argv
    probe = subprocess.run(["bash", "-c", f"source '{TLA}/tlc-env.sh'"], capture_output=True,
                           text=True)
    if probe.returncode != 0:  # 77: skipped; 1: CI without TLC
        print(probe.stdout + probe.stderr, end="")
        return probe.returncode
    shutil.rmtree(out, ignore_errors=True)
    if planted is not None:
        os.makedirs(out)
        env = dict(os.environ, CONCLAVE_PLANTED_BUG=planted)
        merged = run(Cluster(daemon, out, env), hasty_scenario, out, "hasty")
        return 1 if merged is None else validate(merged, "elected", expect_fail=True)
    runs = [("scenario", scenario, REQUIRED),
            ("hasty", hasty_scenario, "promise-refusal,start-promise,crash,restart")]
    for name, fn, required in runs:
        if only is not None and name != only:
            continue
        where = os.path.join(out, name)
        os.makedirs(where)
        merged = run(Cluster(daemon, where), fn, where, name)
        status = 1 if merged is None else validate(merged, required)
        if status != 0:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
