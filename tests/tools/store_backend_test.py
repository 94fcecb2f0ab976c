#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""conclaved with leadership from a real coordination store (python3 stdlib only).

    store_backend_test.py /path/to/conclaved etcd|zookeeper

Starts a real store on 127.0.0.1 (etcd 3.4 from Debian's etcd-server, or ZooKeeper 3.8 from
Debian's zookeeper: its standalone server with the package's classpath) on free ports with a
temporary data directory, then three conclaved instances with "backend" naming it, and checks:
one leader elected; SIGKILL of the leader lets another take over with a larger fencing token;
step-down releases the key at once; a store that stops answering ends the holder's lease (and
/healthz says so) before any other node holds one; a conflicting config is refused (exit 2).
Liveness and broadcast through the store: the three see each other live; a SIGSTOPped member's
last heartbeat grows on the others (its record is still in the store) until it is not live, and
it is live again once resumed; a broadcast reaches the other members' watch streams exactly once
(on etcd, also when its record is replayed under another key); malformed records are dropped.
Throughout, every node's /status is sampled and the overlap of two different holders' valid
leases, as far as the samples prove one, must be 0. Exits 77 (skipped) when the store's server
is not installed (scripts/install-deps.sh --tests installs it). Every wait is bounded.
"""
import base64
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conclaved_test import NdjsonWatch, free_ports, post_json, request  # noqa: E402  (the same helpers)
from conclaved_test import wait_for as conclaved_wait_for  # noqa: E402

DAEMON = sys.argv[1] if len(sys.argv) > 1 else "build/release/tools/conclaved"
KIND = sys.argv[2] if len(sys.argv) > 2 else "etcd"
TTL_MS = 2000
WAIT_S = 30.0
ZK_CLASSPATH = "/usr/share/java/zookeeper.jar:/etc/zookeeper/conf"
failures = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def wait_for(pred, timeout_s=WAIT_S, step_s=0.05):
    """conclaved_test's wait_for, with this test's longer default (a store's sessions are slow)."""
    return conclaved_wait_for(pred, timeout_s, step_s)


class Store:
    """A real etcd or ZooKeeper server on loopback, in its own temporary directory."""

    def __init__(self, root):
        self.root = root
        self.port, self.peer_port = free_ports(2)
        self.proc = None

    def backend(self):
        if KIND == "etcd":
            return {"kind": "etcd", "endpoints": ["127.0.0.1:%d" % self.port], "ttl_ms": TTL_MS}
        return {"kind": "zookeeper", "hosts": "127.0.0.1:%d" % self.port, "ttl_ms": TTL_MS}

    def start(self):
        log = open(os.path.join(self.root, KIND + ".log"), "ab")
        if KIND == "etcd":
            client = "http://127.0.0.1:%d" % self.port
            peer = "http://127.0.0.1:%d" % self.peer_port
            cmd = ["etcd", "--data-dir", os.path.join(self.root, "etcd-data"),
                   "--listen-client-urls", client, "--advertise-client-urls", client,
                   "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                   "--initial-cluster", "default=" + peer]
        else:
            data = os.path.join(self.root, "zk-data")
            os.makedirs(data, exist_ok=True)
            cfg = os.path.join(self.root, "zoo.cfg")
            with open(cfg, "w") as f:
                f.write("tickTime=200\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"
                        "admin.enableServer=false\nminSessionTimeout=400\n"
                        "maxSessionTimeout=60000\n" % (data, self.port))
            cmd = ["java", "-Xmx256m", "-cp", ZK_CLASSPATH,
                   "org.apache.zookeeper.server.ZooKeeperServerMain", cfg]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=log)
        return check(wait_for(self.answers, 60.0, 0.2), KIND + " server answers")

    def answers(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as s:
                if KIND == "zookeeper":
                    s.sendall(b"srvr")
                    return b"Mode" in s.recv(4096)
                return True
        except OSError:
            return False

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(timeout=10)


class Cluster:
    def __init__(self, root, store, size=3):
        self.root = root
        ports = free_ports(2 * size)
        self.ids = ["n%d" % (i + 1) for i in range(size)]
        self.http = {nid: ports[size + i] for i, nid in enumerate(self.ids)}
        self.doc = {
            "cluster": "storetest",
            "nodes": [{"id": nid, "peer": "127.0.0.1:%d" % ports[i],
                       "http": "127.0.0.1:%d" % ports[size + i]} for i, nid in enumerate(self.ids)],
            "data_dir": os.path.join(root, "{id}"),
            "log": {"format": "json", "level": "info"},
            "insecure": True,  # loopback test cluster
            "backend": store.backend(),
        }
        self.config = self.write_config("cluster.json", self.doc)
        self.procs = {}
        self.samples = []  # (start, end, node, valid, remaining_ms, token)
        self.sampling = False
        self.cut = {}  # (node, token) -> when that holder stopped acting (step-down, SIGKILL)

    def write_config(self, name, doc):
        path = os.path.join(self.root, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    def start(self, nid):
        log = open(os.path.join(self.root, nid + ".log"), "ab")
        self.procs[nid] = subprocess.Popen([DAEMON, "--config", self.config, "--node-id", nid],
                                           stdout=log, stderr=log)

    def status(self, nid):
        code, body = request(self.http[nid], "GET", "/status", 1.0)
        return json.loads(body) if code == 200 else None

    def leaders(self):
        out = {}
        for nid, proc in self.procs.items():
            if proc.poll() is not None:
                continue
            s = self.status(nid)
            if s and s["role"] == "leader" and s.get("lease") and s["lease"]["valid"]:
                out[nid] = s
        return out

    def one_leader(self, exclude=()):
        found = self.leaders()
        found = {k: v for k, v in found.items() if k not in exclude}
        return next(iter(found.items())) if len(found) == 1 else None

    def sample_loop(self):
        while self.sampling:
            for nid, proc in list(self.procs.items()):
                if proc.poll() is not None:
                    continue
                start = time.monotonic()
                s = self.status(nid)
                end = time.monotonic()
                if s:
                    lease = s.get("lease") or {"valid": False, "remaining_ms": 0}
                    self.samples.append((start, end, nid, lease["valid"],
                                         lease["remaining_ms"], s["fencing_token"]))
            time.sleep(0.01)

    def proven_overlap_ms(self):
        """Longest time two different holders (tokens) were both proven valid: a sample taken
        over [start, end] with `remaining` proves validity over [end, start + remaining],
        unless the holder stopped acting before (a step-down, SIGKILL)."""
        spans = [(end, min(start + rem / 1000.0, self.cut.get((nid, tok), float("inf"))), nid, tok)
                 for start, end, nid, valid, rem, tok in self.samples if valid]
        worst, pair = 0.0, None
        for a in spans:
            for b in spans:
                if a[3] != b[3] and a[2] != b[2]:
                    overlap = min(a[1], b[1]) - max(a[0], b[0])
                    if overlap > worst:
                        worst, pair = overlap, (a, b)
        if pair:
            print("  longest proven overlap between", pair)
        return worst * 1000.0

    def stop_all(self):
        """SIGTERM to every running daemon; their exit statuses."""
        running = {nid: p for nid, p in self.procs.items() if p.poll() is None}
        for proc in running.values():
            proc.send_signal(signal.SIGTERM)
        codes = {}
        for nid, proc in running.items():
            try:
                codes[nid] = proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                codes[nid] = proc.wait()
        return codes


def test_election_and_failover(cluster, store):
    for nid in cluster.ids:
        cluster.start(nid)
    first = wait_for(cluster.one_leader)
    if not check(first is not None, "one of three instances leads with a valid lease"):
        return
    leader, status = first
    token = status["fencing_token"]
    check(status["store"]["kind"] == KIND and status["store"]["session"] == "connected",
          "/status names the store and its session: %s" % status["store"])
    others = [n for n in cluster.ids if n != leader]
    agreed = wait_for(lambda: all((cluster.status(n) or {}).get("leader") == leader and
                                  (cluster.status(n) or {}).get("fencing_token") == token
                                  for n in others))
    if not check(agreed, "the followers name the leader %s and its fencing token %d"
                 % (leader, token)):
        print("  followers:", [cluster.status(n) for n in others])
    code, body = request(cluster.http[leader], "GET", "/leadership", 2.0)
    check(code == 200 and json.loads(body)["fencing_token"] == token and
          json.loads(body)["lease"]["valid"], "/leadership: the token and a valid lease")
    code, body = request(cluster.http[leader], "GET", "/healthz")
    check(code == 200, "/healthz is 200 while the store answers")
    code, body = request(cluster.http[leader], "POST", "/transfer-leadership?to=" + others[0])
    check(code == 409 and "step down" in (body or ""),
          "transfer answers 409 with a clear error: %s" % body)
    cluster.procs[leader].send_signal(signal.SIGKILL)
    cluster.procs[leader].wait()
    killed_at = time.monotonic()
    cluster.cut[(leader, token)] = killed_at  # a killed process acts no more
    nxt = wait_for(lambda: cluster.one_leader(exclude=(leader,)))
    if check(nxt is not None, "another instance takes over after SIGKILL of the leader"):
        print("  failover after SIGKILL: %.2f s" % (time.monotonic() - killed_at))
        check(nxt[1]["fencing_token"] > token,
              "its fencing token %d is larger than %d" % (nxt[1]["fencing_token"], token))
    cluster.start(leader)  # back as a follower
    wait_for(lambda: cluster.status(leader) is not None)


def peer_liveness(cluster, nid, peer):
    """(live, last_heartbeat_ms) of `peer` in `nid`'s /status, or None."""
    for p in (cluster.status(nid) or {}).get("peers", []):
        if p["id"] == peer:
            return p["live"], p["last_heartbeat_ms"]
    return None


def etcd_call(store, path, doc):
    c = http.client.HTTPConnection("127.0.0.1", store.port, timeout=5)
    c.request("POST", path, json.dumps(doc))
    body = json.loads(c.getresponse().read().decode())
    c.close()
    return body


def b64(data):
    return base64.b64encode(data if isinstance(data, bytes) else data.encode()).decode()


def test_members_live(cluster):
    all_live = lambda: all((peer_liveness(cluster, a, b) or (False,))[0]
                           for a in cluster.ids for b in cluster.ids if a != b)
    check(wait_for(all_live), "every instance sees the two others live through the store")
    code, body = request(cluster.http[cluster.ids[0]], "GET", "/members")
    doc = json.loads(body) if code == 200 else {}
    members = [(m["id"], m["live"], m["last_heartbeat_ms"] is not None)
               for m in doc.get("members", [])]
    check(members == [(n, True, True) for n in cluster.ids] and
          doc["liveness"]["window_ms"] == TTL_MS,
          "GET /members: each member live with its last heartbeat, window = the TTL: %s" % doc)


def test_member_paused(cluster):
    """A paused member's record stays in the store for about a TTL: its liveness must come from
    the record's beats as this node saw them change, not from the record being there."""
    leader = (cluster.one_leader() or (None,))[0]
    paused = next(n for n in reversed(cluster.ids) if n != leader)
    observer = next(n for n in cluster.ids if n != paused)
    cluster.procs[paused].send_signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        time.sleep(TTL_MS / 1000.0 * 0.75)  # its record outlives this by a quarter TTL at least
        seen = peer_liveness(cluster, observer, paused)
        elapsed_ms = (time.monotonic() - stopped_at) * 1000.0
        # The observer saw its last beat at most a poll (an eighth of the TTL) and a round trip
        # after the pause: the age is at least the elapsed time less that and some slack.
        check(seen is not None and seen[1] is not None and seen[1] >= elapsed_ms - TTL_MS * 0.375,
              "%s's last heartbeat on %s grows while it is paused (%s after %.0f ms)"
              % (paused, observer, seen, elapsed_ms))
        gone = wait_for(lambda: (lambda s: s if s and not s[0] else None)(
            peer_liveness(cluster, observer, paused)))
        check(gone and gone[1] > TTL_MS,
              "a SIGSTOPped member is not live on %s, last heard above the window: %s"
              % (observer, gone))
        code, body = post_json(cluster.http[observer], "/broadcast", {"topic": "t", "payload": 0})
        check(code == 200 and paused in json.loads(body)["not_sent"],
              "a broadcast names the member that is not live in not_sent: %s" % body)
    finally:
        cluster.procs[paused].send_signal(signal.SIGCONT)
    check(wait_for(lambda: (peer_liveness(cluster, observer, paused) or (False,))[0]),
          "resumed, %s is live again on %s" % (paused, observer))


def test_broadcast(cluster, store):
    sender = cluster.ids[0]
    others = cluster.ids[1:]
    watches = [NdjsonWatch(cluster.http[n], "/broadcast?watch=1") for n in others]
    try:
        check(all(w.status == 200 for w in watches), "GET /broadcast?watch=1 streams")
        # A stream takes what arrives once the server has begun it: probes until both have one.
        probe = lambda: post_json(cluster.http[sender], "/broadcast",
                                  {"topic": "probe", "payload": 0})[0] == 200 and wait_for(
                                      lambda: all(w.lines for w in watches), timeout_s=1.0)
        check(wait_for(probe), "the watch streams are open")
        doc = {"topic": "cache/invalidate", "payload": {"project": "p1", "keys": [1, 2]}}
        code, body = post_json(cluster.http[sender], "/broadcast", doc)
        answer = json.loads(body) if code == 200 else {}
        check(code == 200 and sorted(answer.get("sent_to", [])) == others,
              "POST /broadcast answers 200, sent to both live members: %s %s" % (code, body))
        if KIND == "etcd":
            replay_etcd_broadcast(store, answer.get("id", ""))
        code, _ = post_json(cluster.http[sender], "/broadcast", {"topic": "end", "payload": 1})
        check(wait_for(lambda: all(any(m["topic"] == "end" for m in w.lines) for w in watches)),
              "a later broadcast arrives on both streams")
        for nid, w in zip(others, watches):
            got = [m for m in w.lines if m["topic"] == doc["topic"]]
            check(got == [{"id": answer.get("id"), "from": sender, "topic": doc["topic"],
                           "payload": doc["payload"]}],
                  "%s's stream holds the message exactly once: %s" % (nid, got))
        code, _ = post_json(cluster.http[sender], "/broadcast",
                            {"topic": "t", "payload": "x" * 40000})
        check(code == 413, "a payload above its bound is refused with 413 (got %s)" % code)
    finally:
        for w in watches:
            w.close()


def replay_etcd_broadcast(store, message_id):
    """Writes the message's record again under another key (a replay): delivered at most once."""
    prefix = "/conclave/storetest/broadcast/"
    kvs = wait_for(lambda: etcd_call(store, "/v3/kv/range",
                                     {"key": b64(prefix + message_id)}).get("kvs", [])) or []
    if check(len(kvs) == 1, "the broadcast's record is in etcd under %s" % message_id):
        etcd_call(store, "/v3/kv/put", {"key": b64(prefix + "replay"), "value": kvs[0]["value"]})


def test_malformed_records(cluster, store):
    if KIND != "etcd":
        return  # written through etcd's JSON gateway; the parsing is the same for both stores
    etcd_call(store, "/v3/kv/put", {"key": b64("/conclave/storetest/members/bogus"),
                                    "value": b64("{not json")})
    etcd_call(store, "/v3/kv/put", {"key": b64("/conclave/storetest/broadcast/bogus"),
                                    "value": b64(b"\xff\x00garbage")})
    nid = cluster.ids[0]

    def malformed():
        code, body = request(cluster.http[nid], "GET", "/metrics")
        for line in (body or "").splitlines():
            if line.startswith("conclave_store_records_malformed_total"):
                return float(line.split()[-1]) >= 2
        return False
    check(wait_for(malformed), "malformed member and broadcast records are dropped and counted")
    check(all(p.poll() is None for p in cluster.procs.values()) and
          cluster.status(nid) is not None, "every instance still runs and answers")
    for key in ("members/bogus", "broadcast/bogus"):
        etcd_call(store, "/v3/kv/deleterange", {"key": b64("/conclave/storetest/" + key)})


def test_step_down(cluster):
    current = wait_for(cluster.one_leader)
    if not check(current is not None, "a leader before the step-down"):
        return
    leader, status = current
    code, _ = request(cluster.http[leader], "POST", "/step-down")
    # It stops acting when the answer is sent: its lease does not count after that.
    cluster.cut[(leader, status["fencing_token"])] = time.monotonic()
    check(code == 202, "POST /step-down is accepted")
    s = cluster.status(leader)
    check(s is not None and s["role"] != "leader",
          "the old leader stops leading at once: %s" % (s and s["role"]))
    nxt = wait_for(lambda: cluster.one_leader(exclude=(leader,)), timeout_s=TTL_MS / 1000.0 * 2)
    check(nxt is not None and nxt[1]["fencing_token"] > status["fencing_token"],
          "another instance holds the released key within two TTLs, with a larger token")


def test_store_down(cluster, store):
    current = wait_for(cluster.one_leader)
    if not check(current is not None, "a leader before the store goes down"):
        return
    leader, _ = current
    store.pause()
    paused_at = time.monotonic()
    ended = wait_for(lambda: not cluster.leaders(), timeout_s=TTL_MS / 1000.0 * 3)
    check(ended, "with the store down, no instance holds a valid lease within three TTLs")
    if ended:
        print("  lease ended %.2f s after the store stopped" % (time.monotonic() - paused_at))
    code, body = wait_for(lambda: (lambda r: r if r[0] not in (200, None) else None)(
        request(cluster.http[leader], "GET", "/healthz")), timeout_s=TTL_MS / 1000.0 * 3) or (0, "")
    check(code == 503, "/healthz is not 200 while the store does not answer: %s" % body)
    store.resume()
    check(wait_for(cluster.one_leader, timeout_s=WAIT_S) is not None,
          "a leader again once the store answers")


def etcd_leader_key(store):
    """(create_revision, holder) of the leader key in etcd, or None when absent."""
    key = base64.b64encode(b"/conclave/storetest/leader").decode()
    c = http.client.HTTPConnection("127.0.0.1", store.port, timeout=5)
    c.request("POST", "/v3/kv/range", json.dumps({"key": key}))
    kvs = json.loads(c.getresponse().read().decode()).get("kvs", [])
    c.close()
    if not kvs:
        return None
    return int(kvs[0]["create_revision"]), base64.b64decode(kvs[0]["value"]).decode()


def test_sigterm_releases(cluster, store):
    current = wait_for(cluster.one_leader)
    if not check(current is not None, "a leader before SIGTERM"):
        return
    leader, status = current
    proc = cluster.procs[leader]
    # A daemon told to stop stops acting at once (then releases the key and exits).
    cluster.cut[(leader, status["fencing_token"])] = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=15)
    check(code == 0, "the leader exits 0 on SIGTERM")
    if KIND == "etcd":
        key = etcd_leader_key(store)
        check(key is None or key[0] != status["fencing_token"],
              "its key is gone from etcd as soon as it exited: %s" % (key,))
    nxt = wait_for(lambda: cluster.one_leader(exclude=(leader,)))
    check(nxt is not None and nxt[1]["fencing_token"] > status["fencing_token"],
          "another instance leads after the SIGTERM, with a larger token")
    cluster.start(leader)
    wait_for(lambda: cluster.status(leader) is not None)


def test_conflicting_config(cluster, store):
    bad = dict(cluster.doc, metadata={"enabled": True})
    path = cluster.write_config("conflict.json", bad)
    r = subprocess.run([DAEMON, "--config", path, "--node-id", "n1"], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode == 2 and "metadata" in r.stderr,
          "a store backend with the metadata log is refused (exit 2): %s" % r.stderr.strip())
    backend = dict(store.backend())
    backend["hosts" if KIND == "etcd" else "endpoints"] = (
        "127.0.0.1:1" if KIND == "etcd" else ["127.0.0.1:1"])
    path = cluster.write_config("conflict2.json", dict(cluster.doc, backend=backend))
    r = subprocess.run([DAEMON, "--config", path, "--node-id", "n1"], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode == 2 and "backend." in r.stderr,
          "the other store's address field is refused (exit 2): %s" % r.stderr.strip())


def main():
    server = "etcd" if KIND == "etcd" else "java"
    if not shutil.which(server) or (KIND == "zookeeper" and
                                    not os.path.exists("/usr/share/java/zookeeper.jar")):
        why = "the %s server is not installed (scripts/install-deps.sh --tests)" % KIND
        if os.environ.get("CI") == "true":
            print("FAIL: %s; CI=true, so this is a failure, not a skip" % why)
            return 1
        print("SKIP: " + why)
        return 77
    root = tempfile.mkdtemp(prefix="conclave-store-")
    store = Store(root)
    cluster = None
    try:
        if not store.start():
            return 1
        cluster = Cluster(root, store)
        cluster.sampling = True
        sampler = threading.Thread(target=cluster.sample_loop, daemon=True)
        sampler.start()
        test_election_and_failover(cluster, store)
        test_members_live(cluster)
        test_broadcast(cluster, store)
        test_malformed_records(cluster, store)
        test_member_paused(cluster)
        test_step_down(cluster)
        test_store_down(cluster, store)
        test_sigterm_releases(cluster, store)
        cluster.sampling = False
        sampler.join(timeout=10)
        overlap = cluster.proven_overlap_ms()
        check(len(cluster.samples) > 100 and overlap <= 0.0,
              "no two holders with a valid lease at once (%d samples, proven overlap %.1f ms)"
              % (len(cluster.samples), max(overlap, 0.0)))
        test_conflicting_config(cluster, store)
        leader = cluster.one_leader()
        codes = cluster.stop_all()
        check(codes and all(c == 0 for c in codes.values()),
              "SIGTERM stops every daemon cleanly (exit 0): %s" % codes)
        if leader:
            print("  the leader at SIGTERM was", leader[0])
    finally:
        if cluster:
            cluster.sampling = False
            cluster.stop_all()
        store.stop()
        if failures:
            print("logs kept in", root)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print("%d failed" % len(failures) if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
