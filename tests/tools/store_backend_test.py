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


def free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_for(pred, timeout_s=WAIT_S, step_s=0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(step_s)
    return None


def request(port, method, path, timeout_s=2.0):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
        c.request(method, path)
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        return r.status, body
    except (OSError, http.client.HTTPException):
        return None, None


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
