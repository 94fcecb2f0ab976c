#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Process-level tests of conclaved (python3 stdlib only).

    conclaved_test.py /path/to/conclaved [test_function ...]

Runs real daemons on 127.0.0.1 (free ports picked by the OS) with temporary data directories,
the "fast" profile, JSON logs. Every wait is bounded; assertions are about behaviour (who leads,
why, exit statuses, messages), never about how fast something happened.
"""
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import struct
import tempfile
import time
import zlib

DAEMON = sys.argv[1] if len(sys.argv) > 1 else "build/release/tools/conclaved"
WAIT_S = 15.0
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    else:
        print("ok:", what, flush=True)
    return cond


def ephemeral_low():
    """The first port of the kernel's ephemeral range (outgoing connections' source ports)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
        return low if 1024 < low <= 65535 else 32768
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(n):
    """n distinct free ports on 127.0.0.1, picked at random below the ephemeral range (every
    socket is held until all are known): a node restarted later must still find its port free,
    and connections dialing it meanwhile, or any other on the machine, would otherwise take it as
    a source port (a dial to a local port nobody listens on can even connect to itself)."""
    low = ephemeral_low()
    floor = 10000 if low > 12000 else 1025
    rng = random.SystemRandom()
    held = []
    try:
        for _ in range(10000):
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", rng.randrange(floor, low)))
                s.listen()
                held.append(s)
            except OSError:  # in use
                s.close()
            if len(held) == n:
                return [s.getsockname()[1] for s in held]
        raise RuntimeError("no free port below the ephemeral range")
    finally:
        for s in held:
            s.close()


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


def private_file(path, text):
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(text)
    return path


class Cluster:
    def __init__(self, root, size=3, timing=None, secure=False):
        """secure: a cluster secret and an admin token (secret_file, admin.token_file, as
        tests/security/ configures them) instead of "insecure": true."""
        self.root = root
        ports = free_ports(2 * size)
        self.ids = ["n%d" % (i + 1) for i in range(size)]
        self.http_ports = {nid: ports[size + i] for i, nid in enumerate(self.ids)}
        doc = {
            "cluster": "test",
            "nodes": [{
        "id" : nid, "peer" : "127.0.0.1:%d" % ports[i], "http" : "127.0.0.1:%d" % ports[size + i]}
                      for i, nid in enumerate(self.ids)],
            "profile": "fast",
            "data_dir": os.path.join(root, "{id}"),
            "log": {"format": "json", "level": "info"},
        }
        self.token = None
        if secure:
            doc["secret_file"] = private_file(os.path.join(root, "secret"),
                                              os.urandom(32).hex() + "\n")
            self.token = os.urandom(32).hex()
            doc["admin"] = {"token_file": private_file(os.path.join(root, "token"),
                                                       self.token + "\n"),
                            "open_reads": True}  # GET /status without the token
        else:
            doc["insecure"] = True  # loopback test cluster (see SECURITY.md)
        if timing:
            doc["timing"] = timing
        self.doc = doc
        self.config = os.path.join(root, "cluster.json")
        with open(self.config, "w") as f:
            json.dump(doc, f)
        self.procs = {}
        self.logs = {}

    def start(self, nid):
        log = open(os.path.join(self.root, nid + ".log"), "ab")
        self.logs[nid] = log.name
        self.procs[nid] = subprocess.Popen(
            [DAEMON, "--config", self.config, "--node-id", nid],
            stdout=log, stderr=log)

    def write(self, key, value, nids=None):
        """An acknowledged write, as a client that follows the documented answers makes it (see
        post_to_leader). Returns the last HTTP status (None: none)."""
        return self.post_to_leader("/metadata", {"key": key, "value": value}, nids)[0]

    def post_to_leader(self, path, doc, nids=None):
        """POST `doc` to `path` on the leader of the moment (among `nids`, default every running
        node), sent again while the answer says that nothing was appended because the leadership
        is moving (503 no_leader or not_active, 307 not_leader; a busy machine delays an election
        or the new leader's sync), for at most WAIT_S. Returns the last (status, body)."""
        answer = [(None, None)]

        def attempt():
            nids_now = nids or [n for n in self.ids if n in self.procs
                                and self.procs[n].poll() is None]
            statuses = {n: self.status(n) for n in nids_now}
            leaders = [n for n, st in statuses.items() if st and st.get("role") == "leader"]
            if not leaders:
                return False
            code, body = post_json(self.http_ports[leaders[0]], path, doc, token=self.token)
            answer[0] = (code, body)
            if code in (307, 503):
                error = json.loads(body).get("error") if body else None
                return error not in ("no_leader", "not_active", "not_leader")
            return code is not None

        wait_for(attempt)
        return answer[0]

    def start_all_agreed(self, what):
        """Starts every node; the leader they agree on (checked, named `what`), else None."""
        for nid in self.ids:
            self.start(nid)
        agreed = wait_for(self.agreed_leader)
        return agreed[0] if check(agreed is not None, what + ": one leader") else None

    def status(self, nid):
        code, body = request(self.http_ports[nid], "GET", "/status")
        return json.loads(body) if code == 200 else None

    def agreed_leader(self, nids=None):
        """The leader every listed node reports (and which reports itself leader), else None."""
        nids = nids or [n for n in self.ids if n in self.procs and self.procs[n].poll() is None]
        statuses = [self.status(n) for n in nids]
        if any(s is None for s in statuses):
            return None
        leaders = {s["leader"] for s in statuses}
        if len(leaders) != 1 or None in leaders:
            return None
        leader = leaders.pop()
        roles = [s["role"] for s in statuses]
        if roles.count("leader") != 1 or statuses[nids.index(leader)]["role"] != "leader":
            return None
        return leader, statuses[nids.index(leader)]["term"]

    def log_records(self, nid):
        records = []
        with open(self.logs[nid]) as f:
            for line in f:
                try:
                    records.append(json.loads(line))
                except ValueError:
                    pass
        return records

    def check_logs(self):
        """With "log": {"format": "json"} every line a daemon prints is a JSON record (net/'s
        lines included), and each leadership change is logged once (by Node, with its fields)."""
        bad, records = [], []
        for nid, path in sorted(self.logs.items()):
            with open(path) as f:
                for line in f:
                    try:
                        record = json.loads(line)
                    except ValueError:
                        record = None
                    if not isinstance(record, dict) or not {"ts", "level", "logger", "msg"} <= set(record):
                        bad.append("%s: %r" % (nid, line[:200]))
                    else:
                        records.append(record)
        check(not bad, "every daemon log line is a JSON record (not: %s)" % bad[:3])
        msgs = [r["msg"] for r in records]
        check(any("net: listening" in m for m in msgs) and any("net: peer" in m for m in msgs),
              "the mesh's lines go through the daemon's JSON logger")
        changes = [r for r in records if r["msg"] == "leadership changed"]
        check(changes and all({"role", "term", "leader", "fencing_token", "reason"} <= set(r)
                              for r in changes),
              "leadership changes are logged with role, term, leader, fencing token and reason")
        check(not any(m.startswith("[") and "leadership: role" in m for m in msgs),
              "no second (driver) line for the same leadership change")

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


PROM_LINE = re.compile(
    r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})?'
    r' (-?[0-9.eE+-]+|NaN|\+Inf|-Inf)$')


def prometheus_ok(text):
    names = set()
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            names.add(line.split()[2])
            continue
        if not line or not PROM_LINE.match(line):
            print("bad metrics line:", repr(line))
            return False
    return "conclave_term" in names


def test_cluster(root):
    c = Cluster(root)
    try:
        for nid in c.ids:
            c.start(nid)
        first = wait_for(c.agreed_leader)
        check(first is not None, "3 daemons agree on exactly one leader")
        if not first:
            return
        leader, term = first
        code, text = request(c.http_ports[leader], "GET", "/metrics")
        check(code == 200 and prometheus_ok(text), "/metrics parses as Prometheus text")
        code, body = request(c.http_ports[leader], "GET", "/healthz")
        check(code == 200, "/healthz answers 200")
        follower = next(n for n in c.ids if n != leader)
        code, body = request(c.http_ports[follower], "POST", "/step-down")
        check(code == 409, "/step-down on a follower is refused with 409")
        code, body = request(c.http_ports[leader], "POST", "/transfer-leadership?to=nope")
        check(code == 400, "/transfer-leadership to an unknown id is 400")

        # Malformed HTTP is refused and the server keeps serving.
        s = socket.create_connection(("127.0.0.1", c.http_ports[leader]), timeout=2)
        s.sendall(b"\x00\x01garbage\r\n\r\n")
        try:
            answer = s.recv(4096)
        except OSError:
            answer = b""
        s.close()
        check(answer == b"" or answer.startswith(b"HTTP/1.1 400"), "malformed HTTP is refused")
        check(c.status(leader) is not None, "the server still serves after malformed HTTP")

        # Explicit transfer through the admin API.
        code, body = request(c.http_ports[leader], "POST", "/transfer-leadership?to=" + follower)
        check(code == 202, "/transfer-leadership on the leader is accepted (202)")
        moved = wait_for(lambda: (lambda r: r if r and r[0] == follower else None)(
            c.agreed_leader()))
        check(moved is not None, "leadership moved to the requested node")
        leader, term = moved or (leader, term)

        # A second daemon on the same data directory is refused with 1.
        other = subprocess.run([DAEMON, "--config", c.config, "--node-id", leader],
                               capture_output=True, text=True, timeout=WAIT_S)
        check(other.returncode == 1 and "in use" in other.stderr,
              "a second daemon on the same data dir exits 1 (%r)" % other.stderr.strip())

        # SIGKILL the leader: the two others elect a new one.
        c.procs[leader].kill()
        c.procs[leader].wait()
        after = wait_for(lambda: (lambda r: r if r and r[0] != leader else None)(
            c.agreed_leader()))
        check(after is not None and after[1] > term, "SIGKILL of the leader: a new leader")
        # Restart it (same data dir): it rejoins as a follower.
        c.start(leader)
        rejoined = wait_for(lambda: c.agreed_leader(c.ids))
        check(rejoined is not None, "the killed node restarts and rejoins")
        # A restarted node asks each lower-index peer to dial it at once (net/README.md, dial
        # requests), and /metrics counts the requests on both sides. The last node has two.
        last = c.ids[-1]
        c.procs[last].kill()
        c.procs[last].wait()
        c.start(last)
        check(wait_for(lambda: c.agreed_leader(c.ids)) is not None, "the last node rejoins")
        lower = c.ids[:-1]
        sent = 'conclave_dial_requests_total{direction="sent"}'
        received = 'conclave_dial_requests_total{direction="received"}'
        check(wait_for(lambda: metric(c.http_ports[last], sent) == len(lower)) is not None,
              "/metrics: the restarted node sent %d dial requests (%r)"
              % (len(lower), metric(c.http_ports[last], sent)))
        served = [metric(c.http_ports[n], received) for n in lower]
        check(all(x and x >= 1 for x in served),
              "/metrics: each lower-index peer served one or more (%r)" % served)
        c.check_logs()
    finally:
        c.stop_all()


def test_graceful_handover(root):
    # A long heartbeat timeout (100 ms x 100): a new leader appearing before it is a hand-over.
    c = Cluster(root, timing={"miss_count": 100})
    try:
        for nid in c.ids:
            c.start(nid)
        first = wait_for(c.agreed_leader)
        check(first is not None, "handover cluster: one leader")
        if not first:
            return
        leader, term = first
        # Stray signals neither kill the node nor move leadership; each is logged.
        for stray in (signal.SIGHUP, signal.SIGUSR1, signal.SIGPIPE):
            c.procs[leader].send_signal(stray)
        logged = wait_for(lambda: sum(1 for r in c.log_records(leader)
                                      if "received: ignored" in r.get("msg", "")) >= 2)
        check(c.procs[leader].poll() is None and c.agreed_leader() == first,
              "SIGHUP, SIGUSR1, SIGPIPE: the leader keeps running and leading")
        check(logged, "SIGHUP and SIGUSR1 are logged as ignored")
        c.procs[leader].send_signal(signal.SIGTERM)
        try:
            status = c.procs[leader].wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            status = None
        check(status == 0, "SIGTERM: the leader exits 0 (got %r)" % status)
        others = [n for n in c.ids if n != leader]
        after = wait_for(lambda: c.agreed_leader(others))
        check(after is not None and after[0] != leader, "SIGTERM: a new leader")
        reasons = [r.get("reason") for r in c.log_records(leader)
                   if r.get("msg") == "leadership changed"]
        check("LEADERSHIP_TRANSFERRED" in reasons,
              "the old leader handed over (reasons logged: %s)" % reasons)
        timeouts = [r for n in others for r in c.log_records(n)
                    if r.get("reason") in ("LEADER_NO_HEARTBEAT", "LEADER_UNAVAILABLE")]
        check(not timeouts, "no follower had to detect the leader's loss")
    finally:
        c.stop_all()


def run_bad(args, config_text=None, root=None):
    if config_text is not None:
        path = os.path.join(root, "bad.json")
        with open(path, "w") as f:
            f.write(config_text)
        args = ["--config", path] + args
    return subprocess.run([DAEMON] + args, capture_output=True, text=True, timeout=WAIT_S)


def test_bad_configs(root):
    p1, p2, h1, h2 = free_ports(4)
    base = {
        "cluster": "bad",
        "nodes": [{"id": "n1", "peer": "127.0.0.1:%d" % p1, "http": "127.0.0.1:%d" % h1},
                  {"id": "n2", "peer": "127.0.0.1:%d" % p2, "http": "127.0.0.1:%d" % h2}],
        "profile": "fast",
        "data_dir": os.path.join(root, "bad-{id}"),
        "insecure": True,
    }

    def variant(mutate):
        doc = json.loads(json.dumps(base))
        mutate(doc)
        return json.dumps(doc)

    cases = [
        ("missing field", variant(lambda d: d.pop("cluster")), "cluster"),
        ("wrong type", variant(lambda d: d.update(profile=7)), "profile"),
        ("duplicate id", variant(lambda d: d["nodes"][1].update(id="n1")), "nodes[1].id"),
        ("port clash", variant(lambda d: d["nodes"][1].update(http=d["nodes"][0]["peer"])),
         "nodes[1].http"),
        ("bad timing", variant(lambda d: d.update(timing={"heartbeat_msec": 5})),
         "timing.heartbeat_msec"),
        ("invalid JSON", "{\"cluster\": ", "line"),
    ]
    for name, text, field in cases:
        r = run_bad(["--node-id", "n1"], text, root)
        check(r.returncode == 2 and field in r.stderr,
              "bad config (%s): exit 2 naming %s (%d, %r)" % (name, field, r.returncode,
                                                              r.stderr.strip()))
    r = run_bad(["--node-id", "n1", "--bogus"], json.dumps(base), root)
    check(r.returncode == 2, "unknown option: exit 2")
    r = run_bad(["--help"])
    check(r.returncode == 0 and "--config" in r.stdout, "--help: exit 0")
    r = run_bad(["--node-id", "n1", "--print-config"], json.dumps(base), root)
    check(r.returncode == 0 and json.loads(r.stdout)["cluster"] == "bad", "--print-config")

    # Port in use: exit 1 with the endpoint named.
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", p1))
    blocker.listen()
    try:
        r = run_bad(["--node-id", "n1"], json.dumps(base), root)
        check(r.returncode == 1 and str(p1) in r.stderr,
              "peer port in use: exit 1 naming it (%d, %r)" % (r.returncode, r.stderr.strip()))
    finally:
        blocker.close()

    # "fsync": "never" without the explicit consent: exit 2 naming the field.
    r = run_bad(["--node-id", "n1"], variant(lambda d: d.update(metadata={"fsync": "never"})), root)
    check(r.returncode == 2 and "metadata.fsync" in r.stderr and "unsafe_no_fsync" in r.stderr,
          "fsync never without consent: exit 2 (%d, %r)" % (r.returncode, r.stderr.strip()))
    test_corrupt_storage_refused(root, json.dumps(base))


def log_record(term, counter, key=b"", value=b""):
    """One log.dat record (replication/storage.hpp): u32 length, u32 crc32(length + payload)."""
    payload = struct.pack("<QQI", term, counter, len(key)) + key + value
    length = struct.pack("<I", len(payload))
    return length + struct.pack("<I", zlib.crc32(length + payload)) + payload


def test_corrupt_storage_refused(root, config_text):
    """Damage a crash cannot explain: exit 1, one line naming the file, the offset, what is
    wrong, and what to do; the file is left as found."""
    log_dir = os.path.join(root, "bad-n1", "log")
    os.makedirs(log_dir, exist_ok=True)
    # The node's vote record (an earlier format, taken as is): without it the log alone is
    # refused as lost state before the log is read (test_lost_state).
    with open(os.path.join(root, "bad-n1", "elector-state.json"), "w") as f:
        f.write('{"format": 1, "term": 1, "voted_for": null}\n')
    path = os.path.join(log_dir, "log.dat")
    first = b"CNCLLOG1" + log_record(1, 0)
    bad = bytearray(log_record(1, 1, b"order-1", b'{"n":1}'))
    bad[-2] ^= 0x04  # a flipped bit inside a value, with a valid record after it
    data = first + bytes(bad) + log_record(1, 2, b"order-2", b'{"n":2}')
    with open(path, "wb") as f:
        f.write(data)
    r = run_bad(["--node-id", "n1"], config_text, root)
    lines = [l for l in r.stderr.splitlines() if l.startswith("conclaved:")]  # the refusal
    check(r.returncode == 1 and len(lines) == 1 and path in lines[0] and
          ("at offset %d" % len(first)) in lines[0] and "bad_crc" in lines[0] and
          "refusing to start" in lines[0],
          "a bad record followed by valid data: exit 1, one line (%d, %r)" % (r.returncode,
                                                                           r.stderr.strip()))
    with open(path, "rb") as f:
        check(f.read() == data, "the corrupt log is left unchanged")
    # Only a torn last record is repaired: the node then starts (killed once it is up).
    with open(path, "wb") as f:
        f.write(first + log_record(1, 1, b"order-1", b'{"n":1}')[:-3])
    doc = json.loads(config_text)
    http_port = int(doc["nodes"][0]["http"].rsplit(":", 1)[1])
    proc = subprocess.Popen([DAEMON, "--node-id", "n1", "--config", os.path.join(root, "bad.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    up = wait_for(lambda: request(http_port, "GET", "/healthz")[0] is not None or
                  proc.poll() is not None)
    check(up and proc.poll() is None, "a torn last record is cut off and the node starts")
    proc.kill()
    err, _ = proc.communicate(timeout=WAIT_S)
    check("torn_record" in err, "the cut is logged (%r)" % err[-300:])
    with open(path, "rb") as f:
        check(f.read() == first, "only the torn record was cut")


def post_json(port, path, doc, timeout_s=5.0, token=None):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = "Bearer " + token
        c.request("POST", path, body=json.dumps(doc), headers=headers)
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        return r.status, body
    except (OSError, http.client.HTTPException):
        return None, None


def committed_keys(port):
    keys, start = set(), None
    for _ in range(1000):
        code, body = request(port, "GET", "/metadata?max=16" + ("&from=" + start if start else ""))
        if code != 200:
            return None
        page = json.loads(body)
        if not page["entries"] and page["next_from"] == start:
            return keys
        keys.update(e["key"] for e in page["entries"])
        if page["next_from"] == start:
            return keys
        start = page["next_from"]
    return keys


def test_disk_full(root):
    """The leader's disk fills during writes (a 3 MB tmpfs): it steps down, exits 1 saying why,
    a new leader takes over, and no acknowledged entry is lost."""
    mount_point = os.path.join(root, "n1")
    os.makedirs(mount_point)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m,mode=0700", "tmpfs", mount_point],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("SKIP: test_disk_full: cannot mount a tmpfs (%s)" % r.stderr.strip(), flush=True)
        return
    c = Cluster(root)
    try:
        for nid in c.ids:
            c.start(nid)
        first = wait_for(c.agreed_leader)
        if not check(first is not None, "disk full: one leader"):
            return
        if first[0] != "n1":
            request(c.http_ports[first[0]], "POST", "/transfer-leadership?to=n1")
        check(wait_for(lambda: (c.agreed_leader() or ("",))[0] == "n1"), "disk full: n1 leads")
        acked, answers = [], {}
        value = "x" * 60000
        for i in range(200):
            if c.procs["n1"].poll() is not None:
                break
            key = "fill-%d" % i
            code, _ = post_json(c.http_ports["n1"], "/metadata", {"key": key, "value": value})
            answers[code] = answers.get(code, 0) + 1
            if code == 200:
                acked.append(key)
            elif code is None:
                break
            else:
                time.sleep(0.05)
        try:
            status = c.procs["n1"].wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            status = None
        with open(c.logs["n1"]) as f:
            text = f.read()
        check(status == 1 and "stopped on a storage failure" in text and
              "No space left on device" in text,
              "disk full: the leader exits 1 saying why (%r; answers %s)" % (status, answers))
        check(len(acked) > 5, "disk full: writes were acknowledged before (%d)" % len(acked))
        after = wait_for(lambda: c.agreed_leader(["n2", "n3"]))
        check(after is not None and after[0] != "n1", "disk full: a new leader")
        if after:
            keys = wait_for(lambda: (lambda k: k if k is not None and set(acked) <= k else None)(
                committed_keys(c.http_ports[after[0]])))
            check(keys is not None, "disk full: no acknowledged entry lost (%d acknowledged)" %
                  len(acked))
    finally:
        c.stop_all()
        subprocess.run(["umount", mount_point])


def record_offsets(data):
    """Start offsets of the records of a log.dat image (after its 8-byte magic)."""
    offsets, at = [], 8
    while at + 8 <= len(data):
        length = struct.unpack("<I", data[at:at + 4])[0]
        offsets.append(at)
        at += 8 + length
    return offsets


def metric(port, name):
    code, body = request(port, "GET", "/metrics")
    if code != 200:
        return None
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_repair(root):
    """A flipped bit mid-log on a stopped follower: the start is refused (exit 1, naming the
    repair command); --repair is refused while the data dir is locked, then cuts the log and
    marks the node (exit 0); it rejoins non-voting ("repaired": true) until a leader of a newer
    term has brought it up to date, then the marker goes; no acknowledged entry is lost"""
    c = Cluster(root)
    try:
        for nid in c.ids:
            c.start(nid)
        first = wait_for(c.agreed_leader)
        if not check(first is not None, "repair: one leader"):
            return
        leader = first[0]
        acked = []
        for i in range(30):  # each retried while the new leader's log is not yet active (bounded)
            if c.write("order-%d" % i, {"n": i}) == 200:
                acked.append("order-%d" % i)
        check(len(acked) == 30, "repair: 30 writes acknowledged (%d)" % len(acked))
        victim = [n for n in c.ids if n != leader][0]
        other = [n for n in c.ids if n not in (leader, victim)][0]
        # The victim holds everything before it stops (it learnt the commit point too).
        check(wait_for(lambda: (lambda k: k is not None and set(acked) <= k)(
            committed_keys(c.http_ports[victim]))), "repair: the follower holds every write")
        c.procs[victim].send_signal(signal.SIGTERM)
        check(c.procs[victim].wait(timeout=WAIT_S) == 0, "repair: the follower stopped cleanly")
        path = os.path.join(root, victim, "log", "log.dat")
        with open(path, "rb") as f:
            data = bytearray(f.read())
        offsets = record_offsets(bytes(data))
        middle = offsets[len(offsets) // 2]
        data[middle + 30] ^= 0x08  # inside the middle record's key or value
        with open(path, "wb") as f:
            f.write(bytes(data))
        r = subprocess.run([DAEMON, "--config", c.config, "--node-id", victim],
                           capture_output=True, text=True, timeout=WAIT_S)
        lines = [l for l in r.stderr.splitlines() if l.startswith("conclaved:")]
        check(r.returncode == 1 and len(lines) == 1 and ("at offset %d" % middle) in lines[0] and
              "conclaved --repair --config %s --node-id %s" % (c.config, victim) in lines[0],
              "repair: the corrupt log refuses to start, naming the repair command (%d, %r)" %
              (r.returncode, r.stderr.strip()[-400:]))
        # Not while the node runs: the data directory is locked.
        r = subprocess.run([DAEMON, "--repair", "--config", c.config, "--node-id", leader],
                           capture_output=True, text=True, timeout=WAIT_S)
        check(r.returncode == 1 and "--repair runs only while the node is stopped" in r.stderr,
              "repair: refused while the node runs (%d, %r)" % (r.returncode, r.stderr.strip()))
        r = subprocess.run([DAEMON, "--repair", "--config", c.config, "--node-id", victim],
                           capture_output=True, text=True, timeout=WAIT_S)
        check(r.returncode == 0 and ("record at offset %d" % middle) in r.stdout and
              "dropped bytes %d.." % middle in r.stdout and "repaired marker R" in r.stdout,
              "repair: --repair cuts the log and says what it dropped (%d, %r, %r)" %
              (r.returncode, r.stdout.strip()[-600:], r.stderr.strip()))
        check(os.path.getsize(path) == middle, "repair: log.dat cut at the bad record")
        check(os.path.exists(os.path.join(root, victim, "log", "log.repaired")),
              "repair: the marker is on disk")
        c.start(victim)
        status = wait_for(lambda: (lambda s: s if s and s.get("repaired") else None)(
            c.status(victim)))
        check(status is not None and status.get("repaired_term", 0) >= first[1],
              "repair: the node rejoins marked repaired (%r)" % status)
        check(metric(c.http_ports[victim], "conclave_metadata_repaired") == 1.0,
              "repair: the metric says so")
        # Writes still commit (the leader and the other node are a quorum).
        code = c.write("after-repair", 1)
        check(code == 200, "repair: writes go on while the node is repaired (%r)" % code)
        acked.append("after-repair")
        # A leader of a newer term brings it up to date: the marker goes.
        request(c.http_ports[leader], "POST", "/transfer-leadership?to=" + other)
        cleared = wait_for(lambda: (lambda s: s is not None and s.get("repaired") is False)(
            c.status(victim)), timeout_s=2 * WAIT_S)
        check(cleared, "repair: the marker is removed once a newer leader caught it up (%r)" %
              c.status(victim))
        check(not os.path.exists(os.path.join(root, victim, "log", "log.repaired")),
              "repair: the marker file is gone")
        check(metric(c.http_ports[victim], "conclave_metadata_repaired") == 0.0,
              "repair: the metric says so")
        check(any("repair complete" in rec["msg"] for rec in c.log_records(victim)),
              "repair: the end of the repair is logged")
        for nid in c.ids:
            keys = wait_for(lambda: (lambda k: k if k is not None and set(acked) <= k else None)(
                committed_keys(c.http_ports[nid])))
            check(keys is not None, "repair: no acknowledged entry lost on %s" % nid)
    finally:
        c.stop_all()


def run_refused(args):
    """Runs conclaved where it must refuse to start: a daemon that starts instead is killed after
    WAIT_S and reported with returncode None."""
    try:
        return subprocess.run([DAEMON] + args, capture_output=True, text=True, timeout=WAIT_S)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(e.cmd, None, "", (e.stderr or b"").decode()
                                           if isinstance(e.stderr, bytes) else (e.stderr or ""))


def refusal_line(r):
    lines = [l for l in r.stderr.splitlines() if l.startswith("conclaved:")]
    return lines[0] if len(lines) == 1 else None


def test_lost_state(root):
    """A node whose durable state is lost or damaged never acts as its old self: a deleted or
    bit-flipped vote record, or a lost metadata log beside the vote record, refuses the start
    (exit 3, naming the safe ways back); a wiped data
    directory restarted with its normal config is refused by the peers that know its earlier
    incarnation (exit 3), so the acknowledged writes it held are not lost when the leader dies;
    `--repair --min-term` brings it back non-voting; a --join into the wrong cluster says so."""
    c = Cluster(root)
    try:
        leader = c.start_all_agreed("lost state")
        if leader is None:
            return
        f, g = [n for n in c.ids if n != leader]
        state = os.path.join(root, f, "elector-state.json")
        with open(state) as fh:
            saved = fh.read()
        check(json.loads(saved).get("format") == 2 and "crc32" in json.loads(saved) and
              len(json.loads(saved).get("incarnation", "")) == 32,
              "lost state: the vote record carries a checksum and an incarnation (%r)" % saved)
        # 1. The vote record deleted: refused, naming --repair --min-term, never "remove it".
        c.procs[f].send_signal(signal.SIGTERM)
        c.procs[f].wait(timeout=WAIT_S)
        os.remove(state)
        r = run_refused(["--config", c.config, "--node-id", f])
        line = refusal_line(r)
        check(r.returncode == 3 and line and "elector-state.json" in line and "is missing" in line
              and "--repair --min-term" in line and "--join" in line and "remove it" not in line,
              "lost state: a deleted vote record refuses the start (%r, %r)" %
              (r.returncode, r.stderr.strip()[-500:]))
        # 2. A flipped digit that keeps the JSON valid: refused by the checksum.
        doc = json.loads(saved)
        flipped = saved.replace('"term":%d' % doc["term"], '"term":%d' % (doc["term"] + 10))
        check(flipped != saved, "lost state: the term field was found to flip")
        with open(state, "w") as fh:
            fh.write(flipped)
        r = run_refused(["--config", c.config, "--node-id", f])
        line = refusal_line(r)
        check(r.returncode == 3 and line and "crc32" in line and "--repair --min-term" in line,
              "lost state: a flipped digit in the vote record is refused (%r, %r)" %
              (r.returncode, r.stderr.strip()[-500:]))
        # The intact record back: the node starts and follows.
        with open(state, "w") as fh:
            fh.write(saved)
        c.start(f)
        check(wait_for(lambda: c.agreed_leader() == c.agreed_leader() and
                       (c.status(f) or {}).get("leader") == leader),
              "lost state: the restored record starts as before")
        # 2b. The metadata log lost beside the kept vote record: refused, not started on an
        # empty log with its old votes.
        c.procs[f].send_signal(signal.SIGTERM)
        c.procs[f].wait(timeout=WAIT_S)
        log_dir = os.path.join(root, f, "log")
        os.rename(log_dir, log_dir + ".away")
        r = run_refused(["--config", c.config, "--node-id", f])
        line = refusal_line(r)
        check(r.returncode == 3 and line and "log.dat' is missing" in line and
              "--repair --min-term" in line,
              "lost state: a lost metadata log beside the vote record refuses the start (%r, %r)"
              % (r.returncode, r.stderr.strip()[-500:]))
        os.rename(log_dir + ".away", log_dir)
        c.start(f)
        check(wait_for(lambda: (c.status(f) or {}).get("leader") == leader),
              "lost state: with its log back the node follows again")
        # 3. A wiped disk under write load: g down, writes acknowledged by the leader and f.
        c.procs[g].send_signal(signal.SIGTERM)
        c.procs[g].wait(timeout=WAIT_S)
        acked = []
        for i in range(50):
            if c.write("w-%d" % i, i) == 200:
                acked.append("w-%d" % i)
        check(len(acked) == 50, "lost state: 50 writes acknowledged by the leader and f (%d)" %
              len(acked))
        c.procs[f].kill()
        c.procs[f].wait()
        shutil.rmtree(os.path.join(root, f))
        c.start(g)
        started = time.monotonic()
        c.start(f)
        try:
            rc = c.procs[f].wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            rc = None
        with open(c.logs[f]) as fh:
            text = fh.read()
        check(rc == 3 and "refuses this node (state_lost)" in text,
              "lost state: the wiped node is refused by its peers and exits 3 (%r after %.1f s)" %
              (rc, time.monotonic() - started))
        check(any(r.get("msg") == "peer refused: state lost" for r in c.log_records(leader)),
              "lost state: the leader logs why it refused the wiped node")
        # The leader dies: g alone has no quorum (f is out), so nothing is elected without the
        # entries; the old leader back, every acknowledged write is there.
        c.procs[leader].kill()
        c.procs[leader].wait()
        time.sleep(1.0)
        s = c.status(g)
        check(s is not None and s["role"] != "leader",
              "lost state: the surviving follower does not lead alone (%r)" % (s and s["role"]))
        c.start(leader)
        check(wait_for(lambda: c.agreed_leader([leader, g])) is not None,
              "lost state: the old leader and g agree on a leader")
        for nid in (leader, g):
            keys = wait_for(lambda: (lambda k: k if k is not None and set(acked) <= k else None)(
                committed_keys(c.http_ports[nid])))
            check(keys is not None, "lost state: no acknowledged write lost on %s" % nid)
        # 4. The way back: --repair --min-term on the wiped node, which rejoins non-voting.
        term = max((c.status(n) or {}).get("term", 0) for n in (leader, g))
        r = subprocess.run([DAEMON, "--repair", "--min-term", str(term), "--config", c.config,
                            "--node-id", f], capture_output=True, text=True, timeout=WAIT_S)
        check(r.returncode == 0, "lost state: --repair --min-term on the wiped node (%d, %r)" %
              (r.returncode, r.stderr.strip()[-300:]))
        c.start(f)
        status = wait_for(lambda: (lambda s: s if s and s.get("repaired") and s.get("leader")
                                   else None)(c.status(f)))
        check(status is not None, "lost state: the repaired node rejoins, non-voting (%r)" %
              c.status(f))
        code, body = request(c.http_ports[f], "GET", "/healthz")
        check(code == 503 and "repaired" in (body or ""),
              "lost state: /healthz of the repaired node is 503, saying why (%r, %r)" % (code, body))
        # 5. A join into the wrong cluster says so at once.
        doc = json.load(open(c.config))
        doc["cluster"] = "elsewhere"
        doc["nodes"] = [{"id": "n9", "peer": "127.0.0.1:%d" % free_ports(1)[0],
                         "http": "127.0.0.1:%d" % free_ports(1)[0]}]
        wrong = os.path.join(root, "wrong.json")
        with open(wrong, "w") as fh:
            json.dump(doc, fh)
        seed_peer = json.load(open(c.config))["nodes"][c.ids.index(g)]["peer"]
        started = time.monotonic()
        r = subprocess.run([DAEMON, "--config", wrong, "--node-id", "n9", "--join", seed_peer],
                           capture_output=True, text=True, timeout=WAIT_S)
        took = time.monotonic() - started
        check(r.returncode == 1 and "wrong_cluster" in r.stderr and took < 5.0,
              "lost state: a join into the wrong cluster names the cause (%d, %.1f s, %r)" %
              (r.returncode, took, r.stderr.strip()[-300:]))
    finally:
        c.stop_all()


def test_new_node_quarantine(root):
    """A new node (empty data directory) neither votes nor acknowledges until a majority of the
    other voters have admitted its incarnation: a brand-new 3-node cluster with two nodes
    started elects nobody, says so in /status and /healthz, and elects once the third starts."""
    c = Cluster(root)
    try:
        c.start("n1")
        c.start("n2")
        time.sleep(2.0)  # many election timeouts of the fast profile
        statuses = [c.status(n) for n in ("n1", "n2")]
        check(all(s is not None and s["leader"] is None for s in statuses),
              "quarantine: two new nodes of three elect nobody (%r)" %
              [s and (s["role"], s["leader"]) for s in statuses])
        check(all(s is not None and s["identity"].get("quarantined") is True for s in statuses),
              "quarantine: /status says quarantined (%r)" % [s and s["identity"] for s in statuses])
        code, body = request(c.http_ports["n1"], "GET", "/healthz")
        check(code == 503 and "quarantine" in (body or ""),
              "quarantine: /healthz is 503 and says why (%r, %r)" % (code, body))
        c.start("n3")
        check(wait_for(c.agreed_leader) is not None, "quarantine: the third node starts: a leader")
        check(wait_for(lambda: all("quarantined" not in (c.status(n) or {"identity": {"quarantined": 1}})["identity"]
                                   for n in c.ids)),
              "quarantine: every node is registered (%r)" % [(c.status(n) or {}).get("identity")
                                                             for n in c.ids])
        # Registered is durable: a restart of all three elects again without waiting for all.
        for nid in c.ids:
            c.procs[nid].send_signal(signal.SIGTERM)
            c.procs[nid].wait(timeout=WAIT_S)
        c.start("n1")
        c.start("n2")
        check(wait_for(lambda: c.agreed_leader(["n1", "n2"])) is not None,
              "quarantine: after a restart two of three elect (registration is durable)")
    finally:
        c.stop_all()


def test_membership(root):
    """Membership through real daemons: remove a follower (it shows "removed", writes
    go on without it), restart it (it keeps its stored configuration, R9), add it back as a
    learner, promote it once caught up; a whole-cluster restart keeps the configuration."""
    c = Cluster(root)

    def members(nid):
        code, body = request(c.http_ports[nid], "GET", "/members")
        return json.loads(body) if code == 200 else None

    def membership(nid):
        s = c.status(nid)
        return s.get("membership") if s else None

    def change(op, target):  # on the leader of the moment, retried while it is not active
        code, body = c.post_to_leader("/members", {"op": op, "id": target})
        return code, json.loads(body) if body else None

    def leader_now():  # the running node that says it leads in the newest term
        said = [(s["term"], n) for n in c.ids if n in c.procs and c.procs[n].poll() is None
                for s in [c.status(n)] if s and s.get("role") == "leader"]
        return max(said)[1] if said else leader

    try:
        leader = c.start_all_agreed("membership")
        if leader is None:
            return
        victim = [n for n in c.ids if n != leader][0]
        check(membership(victim) == {"version": 0, "from_entry": False, "role": "voter"},
              "membership: the implicit configuration at first (%r)" % membership(victim))
        code, body = change("remove", victim)
        check(code == 200 and body.get("version") == 1,
              "membership: remove answers 200 with version 1 (%r %r)" % (code, body))
        check(wait_for(lambda: (membership(victim) or {}).get("role") == "removed"),
              "membership: the removed node says so (%r)" % membership(victim))
        check(any("this node: removed" in r["msg"] for r in c.log_records(victim)),
              "membership: the removed node logs it")
        check(metric(c.http_ports[leader_now()], "conclave_membership_version") == 1.0,
              "membership: conclave_membership_version 1")
        c.procs[victim].kill()
        c.procs[victim].wait()
        code = c.write("without", 1)
        check(code == 200, "membership: writes commit without the removed node (%r)" % code)
        c.start(victim)
        check(wait_for(lambda: membership(victim) == {"version": 1, "from_entry": True,
                                                      "role": "removed"}),
              "membership: restarted, it keeps its stored configuration (%r)" % membership(victim))
        code, body = change("add-learner", victim)
        check(code == 200 and body.get("version") == 2,
              "membership: add-learner answers version 2 (%r %r)" % (code, body))

        def caught_up():
            view = members(leader_now())
            ms = [m for m in (view or {}).get("members", []) if m["id"] == victim]
            # Only the leader's view has "catch_up": the node asked may have just lost the lead.
            return (ms and ms[0]["role"] == "learner"
                    and (ms[0].get("catch_up") or {}).get("lag_entries") == 0)

        check(wait_for(caught_up),
              "membership: the learner catches up (%r)" % members(leader_now()))
        code, body = change("promote", victim)
        check(code == 200 and body.get("version") == 3,
              "membership: promote answers version 3 (%r %r)" % (code, body))
        check(wait_for(lambda: all((membership(n) or {}).get("version") == 3 for n in c.ids)),
              "membership: every node at version 3")
        for nid in c.ids:
            c.procs[nid].send_signal(signal.SIGTERM)
            c.procs[nid].wait(timeout=WAIT_S)
        for nid in c.ids:
            c.start(nid)
        check(wait_for(c.agreed_leader) is not None, "membership: a leader after the restart")
        check(all(membership(n) == {"version": 3, "from_entry": True, "role": "voter"}
                  for n in c.ids),
              "membership: the configuration survives a restart (%r)" %
              [membership(n) for n in c.ids])
    finally:
        c.stop_all()


def test_snapshot_restored(root):
    """A follower's data directory restored from an older copy (a VM snapshot) is consistent, only
    old. Across a term change its peers notice: one that heard it announce a higher durable term
    refuses it (state_regressed), and the node says so in /status, /healthz and /metrics. The
    documented procedure, --repair --min-term with the cluster's term, brings it back non-voting
    until a newer leader has brought it up to date; no acknowledged write is lost."""
    c = Cluster(root)
    try:
        leader = c.start_all_agreed("snapshot restored")
        if leader is None:
            return
        f = [n for n in c.ids if n != leader][0]
        acked = []

        def write(i):  # retried while the leader is not yet active (bounded)
            if c.write("s-%d" % i, i) == 200:
                acked.append("s-%d" % i)

        for i in range(10):
            write(i)
        c.procs[f].send_signal(signal.SIGTERM)
        c.procs[f].wait(timeout=WAIT_S)
        snapshot = os.path.join(root, f + ".snapshot")
        shutil.copytree(os.path.join(root, f), snapshot)
        old_term = json.load(open(os.path.join(snapshot, "elector-state.json")))["term"]
        c.start(f)
        check(wait_for(lambda: (c.status(f) or {}).get("leader") == leader),
              "snapshot restored: the follower is back before the snapshot is restored")
        for i in range(10, 40):
            write(i)
        # A term change the copy does not hold: the leader dies, f and g elect, the old leader
        # comes back and hears f announce its new durable term.
        c.procs[leader].kill()
        c.procs[leader].wait()
        check(wait_for(lambda: c.agreed_leader()) is not None,
              "snapshot restored: f and the other follower elect a new leader")
        c.start(leader)
        check(wait_for(lambda: c.agreed_leader() and
                       all(p["up"] for p in (c.status(leader) or {"peers": [{"up": 0}]})["peers"])),
              "snapshot restored: the old leader is back and linked to both")
        new_term = (c.status(f) or {}).get("term", 0)
        check(new_term > old_term, "snapshot restored: a term change since the copy (%d -> %d)" %
              (old_term, new_term))
        c.procs[f].kill()
        c.procs[f].wait()
        shutil.rmtree(os.path.join(root, f))
        shutil.copytree(snapshot, os.path.join(root, f))
        # Its peers restart before it comes back: what they remember of it is on disk.
        for n in c.ids:
            if n != f:
                c.procs[n].send_signal(signal.SIGTERM)
                c.procs[n].wait(timeout=WAIT_S)
                c.start(n)
        check(wait_for(lambda: c.agreed_leader()) is not None,
              "snapshot restored: its two peers restarted and elect a leader")
        # Started as usual, without --repair: the old leader refuses it, and it says so.
        started = time.monotonic()
        c.start(f)
        status = wait_for(lambda: (lambda s: s if s and s.get("identity", {}).get(
            "state_regressed") else None)(c.status(f)))
        took = time.monotonic() - started
        check(status is not None and took < 5.0 and
              "--repair --min-term" in status["identity"]["state_regressed"],
              "snapshot restored: started without --repair, it is refused and reports it "
              "(%.1f s, %r)" % (took, status and status["identity"]))
        code, body = request(c.http_ports[f], "GET", "/healthz")
        check(code == 503 and "state_regressed" in (body or "") and
              "--repair --min-term" in (body or ""),
              "snapshot restored: /healthz 503 naming the repair (%r, %r)" % (code, body))
        check((metric(c.http_ports[f], "conclave_state_regressed_peers") or 0) >= 1,
              "snapshot restored: conclave_state_regressed_peers on the restored node")
        check((metric(c.http_ports[leader],
                      'conclave_handshake_refusals_total{reason="state_regressed"}') or 0) >= 1,
              "snapshot restored: the refusing node counts it")
        check(any("state_regressed" in r.get("msg", "") for r in c.log_records(leader)),
              "snapshot restored: the refusing node logs it")
        c.procs[f].kill()
        c.procs[f].wait()
        term = max((c.status(n) or {}).get("term", 0) for n in c.ids if n != f)
        r = subprocess.run([DAEMON, "--repair", "--min-term", str(term), "--config", c.config,
                            "--node-id", f], capture_output=True, text=True, timeout=WAIT_S)
        check(r.returncode == 0, "snapshot restored: --repair --min-term %d (%d, %r)" %
              (term, r.returncode, r.stderr.strip()[-300:]))
        c.start(f)
        # Repaired, it is non-voting until a leader of a term above `term` has brought it up to
        # date; on a slow machine (sanitizers) an election may already have done so by the first
        # look, which ends the repair legitimately.
        status = wait_for(lambda: (lambda s: s if s and s.get("leader") and
                                   (s.get("repaired") or s.get("term", 0) > term) and
                                   all(p["up"] for p in s["peers"]) else None)(c.status(f)))
        check(status is not None and "state_regressed" not in status["identity"],
              "snapshot restored: repaired, it rejoins (%r)" % c.status(f))
        code, body = request(c.http_ports[f], "GET", "/healthz")
        if status and status.get("repaired"):
            check(code == 503 and "repaired" in (body or ""),
                  "snapshot restored: non-voting, /healthz 503 while repaired (%r, %r)"
                  % (code, body))
        else:
            check(code == 200 and status is not None and status.get("term", 0) > term,
                  "snapshot restored: the repair already ended, caught up from a leader of term "
                  "%r > %d (/healthz %r)" % (status and status.get("term"), term, code))
        keys = wait_for(lambda: (lambda k: k if k is not None and set(acked) <= k else None)(
            committed_keys(c.http_ports[f])))
        check(keys is not None and len(acked) == 40,
              "snapshot restored: every acknowledged write reaches it again (%d acknowledged)" %
              len(acked))
    finally:
        c.stop_all()


def test_removed_while_down(root):
    """A node removed while it was down, restarted with its normal config, says so: its peers
    answer its dials with unknown_node, and /status and /healthz report it (not a healthy voter
    without a leader)."""
    c = Cluster(root)
    try:
        leader = c.start_all_agreed("removed while down")
        if leader is None:
            return
        victim = [n for n in c.ids if n != leader][-1]
        c.procs[victim].send_signal(signal.SIGTERM)
        c.procs[victim].wait(timeout=WAIT_S)
        code, body = post_json(c.http_ports[leader], "/members", {"op": "remove", "id": victim})
        check(code == 200, "removed while down: remove answers 200 (%r %r)" % (code, body))
        others = [n for n in c.ids if n != victim]
        check(wait_for(lambda: all(((c.status(n) or {}).get("membership") or {}).get("version")
                                   == 1 for n in others)),
              "removed while down: the other nodes have applied the removal")
        c.start(victim)
        # It learns it either from the removal entry (a leader that still reached it) or from its
        # peers' unknown_node answers (identity.unknown_to_peers): either way it says so.
        started = time.monotonic()
        status = wait_for(lambda: (lambda s: s if s and (
            s.get("identity", {}).get("unknown_to_peers") or
            (s.get("membership") or {}).get("role") == "removed") else None)(c.status(victim)))
        check(status is not None and time.monotonic() - started < 5.0,
              "removed while down: /status says it is out (%.1f s, %r)" %
              (time.monotonic() - started, c.status(victim)))
        code, body = request(c.http_ports[victim], "GET", "/healthz")
        check(code == 503 and "removed from the cluster" in (body or ""),
              "removed while down: /healthz 503, saying why (%r, %r)" % (code, body))
    finally:
        c.stop_all()


def test_join_refused(root):
    """Every refused --join exits 1 within 2 s naming the cause and the way forward: another
    cluster secret, none (an "insecure" joiner), the id of a running member, the id of a removed node (at other addresses;
    at its own addresses a removed id is added back, node/README.md "Membership")."""
    c = Cluster(root, secure=True)
    try:
        leader = c.start_all_agreed("join refused")
        if leader is None:
            return
        seed = c.doc["nodes"][c.ids.index([n for n in c.ids if n != leader][0])]["peer"]

        def join(nid, what, **changes):
            doc = dict(c.doc, data_dir=os.path.join(root, "joiners", "{id}"), **changes)
            doc = {k: v for k, v in doc.items() if v is not None}
            doc["nodes"] = [{"id": nid, "peer": "127.0.0.1:%d" % free_ports(1)[0],
                             "http": "127.0.0.1:%d" % free_ports(1)[0]}]
            path = os.path.join(root, what + ".json")
            with open(path, "w") as fh:
                json.dump(doc, fh)
            started = time.monotonic()
            try:
                r = subprocess.run([DAEMON, "--config", path, "--node-id", nid, "--join", seed],
                                   capture_output=True, text=True, timeout=WAIT_S)
                rc, err = r.returncode, r.stderr
            except subprocess.TimeoutExpired as e:
                rc, err = None, (e.stderr or b"").decode()
            took = time.monotonic() - started
            lines = [l for l in err.splitlines() if l.startswith("conclaved:")]
            return rc, took, (lines[-1] if lines else err.strip()[-400:])

        other = private_file(os.path.join(root, "other-secret"), os.urandom(32).hex() + "\n")
        rc, took, line = join("n9", "other-secret", secret_file=other)
        check(rc == 1 and took < 2.0 and "auth_failed" in line and "secret_file" in line,
              "join refused: another cluster secret (%r, %.1f s, %r)" % (rc, took, line))
        rc, took, line = join("n9", "no-secret", insecure=True, secret_file=None)
        check(rc == 1 and took < 2.0 and "auth_failed" in line and "secret_file" in line,
              "join refused: no cluster secret (%r, %.1f s, %r)" % (rc, took, line))
        rc, took, line = join(leader, "in-use")
        check(rc == 1 and took < 2.0 and "in use by a member" in line and "new id" in line,
              "join refused: the id of a running member (%r, %.1f s, %r)" % (rc, took, line))
        victim = [n for n in c.ids if n != leader][-1]
        code, body = post_json(c.http_ports[leader], "/members", {"op": "remove", "id": victim},
                               token=c.token)
        check(code == 200, "join refused: remove answers 200 (%r %r)" % (code, body))
        c.procs[victim].send_signal(signal.SIGTERM)
        c.procs[victim].wait(timeout=WAIT_S)
        rc, took, line = join(victim, "removed")
        check(rc == 1 and took < 2.0 and "was removed" in line and "new id" in line,
              "join refused: the id of a removed node (%r, %.1f s, %r)" % (rc, took, line))
    finally:
        c.stop_all()


def test_joined_restart(root):
    """A node added with --join restarts like a configured one once it has voted: its vote record
    indexes the node table it joined (members.json), not its config file's single node. Join,
    promote, vote (a transfer makes it stand and vote for itself), restart, vote again."""
    c = Cluster(root)
    joiner = "n4"
    try:
        leader = c.start_all_agreed("joined restart")
        if leader is None:
            return
        seed = c.doc["nodes"][c.ids.index(leader)]["peer"]
        ports = free_ports(2)
        doc = dict(c.doc, nodes=[{"id": joiner, "peer": "127.0.0.1:%d" % ports[0],
                                  "http": "127.0.0.1:%d" % ports[1]}])
        config = os.path.join(root, "joiner.json")
        with open(config, "w") as fh:
            json.dump(doc, fh)
        c.http_ports[joiner] = ports[1]
        log = open(os.path.join(root, joiner + ".log"), "ab")
        c.logs[joiner] = log.name

        def start_joiner(extra):
            c.procs[joiner] = subprocess.Popen(
                [DAEMON, "--config", config, "--node-id", joiner] + extra, stdout=log, stderr=log)

        def role_of(nid):
            view = request(c.http_ports[leader], "GET", "/members")
            if view[0] != 200:
                return None
            ms = [m for m in json.loads(view[1]).get("members", []) if m["id"] == nid]
            return ms[0] if ms else None

        start_joiner(["--join", seed])
        check(wait_for(lambda: (role_of(joiner) or {}).get("role") == "learner" and
                       ((role_of(joiner) or {}).get("catch_up") or {}).get("lag_entries") == 0),
              "joined restart: the joiner is a caught-up learner (%r)" % role_of(joiner))
        code, body = post_json(c.http_ports[leader], "/members", {"op": "promote", "id": joiner})
        check(code == 200, "joined restart: promoted (%r %r)" % (code, body))
        check(wait_for(lambda: ((c.status(joiner) or {}).get("membership") or {}).get("role")
                       == "voter"), "joined restart: the joiner knows it votes")
        state_path = os.path.join(root, joiner, "elector-state.json")

        def lead_by_transfer(to, current):
            # Retried: a transfer is refused while the target is not caught up yet.
            def moved():
                now = c.agreed_leader(c.ids + [joiner])
                if now and now[0] == to:
                    return now
                if now:
                    request(c.http_ports[now[0]], "POST", "/transfer-leadership?to=" + to)
                return None
            return wait_for(moved, step_s=0.5)

        first = lead_by_transfer(joiner, leader)
        voted = json.load(open(state_path))
        check(first is not None and voted.get("voted_for") is not None,
              "joined restart: the joiner stood and voted (%r, %r)" % (first, voted))
        c.procs[joiner].send_signal(signal.SIGTERM)
        c.procs[joiner].wait(timeout=WAIT_S)
        start_joiner([])
        back = wait_for(lambda: c.agreed_leader(c.ids + [joiner])
                        if c.procs[joiner].poll() is None else "exited")
        check(back not in (None, "exited"),
              "joined restart: restarted after voting, it rejoins (exit %r)" %
              c.procs[joiner].poll())
        if back in (None, "exited"):
            return
        other = [n for n in c.ids if n != back[0]][0]
        lead_by_transfer(other, back[0])
        again = lead_by_transfer(joiner, other)
        voted_again = json.load(open(state_path))
        check(again is not None and voted_again["term"] > voted["term"] and
              voted_again.get("voted_for") is not None,
              "joined restart: it votes again after the restart (%r -> %r)" % (voted, voted_again))
    finally:
        c.stop_all()


def rollback_cluster_writes(c, port_of, prefix, count, acked):
    """Writes `count` keys through whichever node `port_of()` names, each retried while the
    answer is the documented "not active" / "no leader" (bounded); appends the acknowledged."""
    for i in range(count):
        key = "%s-%d" % (prefix, i)
        if wait_for(lambda: post_json(port_of(), "/metadata", {"key": key, "value": i})[0] == 200,
                    timeout_s=WAIT_S):
            acked.append(key)


def rollback_verdict(c, what, acked, witness):
    """0 silent loss: the witness still holds every acknowledged write committed, and every running
    node whose committed prefix lacks one is in a cluster that says so and takes no writes: some
    node raises ROLLBACK (/status, /healthz 503, metric) and the leader refuses writes."""
    keys = wait_for(lambda: committed_keys(c.http_ports[witness]))
    check(keys is not None and set(acked) <= keys,
          "%s: the old leader keeps every acknowledged write committed (%d acknowledged, %d "
          "missing)" % (what, len(acked), len(set(acked) - (keys or set()))))
    running = [n for n in c.ids if c.procs[n].poll() is None]
    lacking = [n for n in running if not set(acked) <= (committed_keys(c.http_ports[n]) or set())]
    if not lacking:
        check(True, "%s: every running node holds every acknowledged write" % what)
        return
    alarmed = wait_for(lambda: [n for n in running if "ROLLBACK" in
                                ((c.status(n) or {}).get("alarms") or [])], timeout_s=2 * WAIT_S)
    check(alarmed, "%s: nodes lacking acknowledged writes (%r): ROLLBACK raised on %r" %
          (what, lacking, alarmed))
    for n in alarmed or []:
        code, body = request(c.http_ports[n], "GET", "/healthz")
        check(code == 503 and "ROLLBACK" in (body or ""),
              "%s: /healthz of %s is 503 naming the rollback (%r, %r)" % (what, n, code, body))
        check(metric(c.http_ports[n], "conclave_metadata_rollback_alarm") == 1.0,
              "%s: conclave_metadata_rollback_alarm 1 on %s" % (what, n))
        check(any("ALARM ROLLBACK" in r.get("msg", "") for r in c.log_records(n)),
              "%s: %s logs the rollback" % (what, n))
    # The cluster takes no writes rather than go on without them: every leader that lacks them
    # refuses (its alarm stays), and none that holds them exists.
    leader = wait_for(lambda: [n for n in running if (c.status(n) or {}).get("role") == "leader"
                               and "ROLLBACK" in ((c.status(n) or {}).get("alarms") or [])])
    check(leader, "%s: the leader lacking the writes raises ROLLBACK (%r)" %
          (what, [(n, c.status(n)) for n in running]))
    if leader:
        code, body = post_json(c.http_ports[leader[0]], "/metadata", {"key": "after", "value": 1})
        check(code == 503 and "not_active" in (body or ""),
              "%s: the leader refuses writes (%r, %r)" % (what, code, body))


def rollback_setup(root, what):
    """Three nodes; F's data directory is copied while it is stopped and F comes back; then G (the
    third node) stops and 200 writes are acknowledged by the leader L and F. Returns (cluster, L,
    F, G, copy path, acked) or None."""
    c = Cluster(root)
    leader = c.start_all_agreed(what)
    if leader is None:
        return None
    acked = []
    rollback_cluster_writes(c, lambda: c.http_ports[leader], "base", 20, acked)
    f = [n for n in c.ids if n != leader][0]
    c.procs[f].send_signal(signal.SIGTERM)
    c.procs[f].wait(timeout=WAIT_S)
    copy = os.path.join(root, f + ".copy")
    shutil.copytree(os.path.join(root, f), copy)
    c.start(f)
    agreed = wait_for(c.agreed_leader)
    if not check(agreed is not None and agreed[0] != f,
                 "%s: the follower is back after its copy was taken (%r)" % (what, agreed)):
        return None
    leader = agreed[0]
    g = [n for n in c.ids if n not in (leader, f)][0]
    c.procs[g].send_signal(signal.SIGTERM)
    c.procs[g].wait(timeout=WAIT_S)
    rollback_cluster_writes(c, lambda: c.http_ports[leader], "acked", 200, acked)
    check(len(acked) == 220, "%s: 220 writes acknowledged by the leader and F (%d)" %
          (what, len(acked)))
    return c, leader, f, g, copy, acked


def rollback_restore(c, root, f, copy):
    c.procs[f].kill()
    c.procs[f].wait()
    shutil.rmtree(os.path.join(root, f))
    shutil.copytree(copy, os.path.join(root, f))


def test_rollback_leader_away(root):
    """The restored-copy order where the old leader is the only witness: F is restored from its
    copy (same term, same incarnation) after the leader died, the third node starts, F and it
    elect a leader that lacks the 200 acknowledged writes. When the old leader comes back it
    refuses to discard them (its commit point is durable), and the new leader, told so, takes no
    writes: a loud stop, never a silent loss."""
    what = "rollback, leader away"
    setup = rollback_setup(root, what)
    if setup is None:
        return
    c, leader, f, g, copy, acked = setup
    try:
        c.procs[leader].kill()
        c.procs[leader].wait()
        rollback_restore(c, root, f, copy)
        c.start(f)
        c.start(g)
        check(wait_for(lambda: c.agreed_leader([f, g]), timeout_s=2 * WAIT_S) is not None,
              "%s: F and the third node elect a leader" % what)
        c.start(leader)
        check(wait_for(lambda: all(p["up"] for p in (c.status(leader) or {"peers": [{"up": 0}]})
                                   ["peers"])), "%s: the old leader is back and linked" % what)
        rollback_verdict(c, what, acked, leader)
    finally:
        c.stop_all()


def test_rollback_leader_alive(root):
    """F is restored from its copy while the leader still runs. If the leader keeps its term, it
    sees F's log end below what F acknowledged (follower_regressed) and counts it for nothing
    (with the third node down, it takes no writes); if it lost its quorum meanwhile, the newer
    term's sync adopts its log. Then the leader dies, the third node starts, F and it elect; the
    old leader comes back: no acknowledged write is lost silently."""
    what = "rollback, leader alive"
    setup = rollback_setup(root, what)
    if setup is None:
        return
    c, leader, f, g, copy, acked = setup
    try:
        term = (c.status(leader) or {}).get("term")
        rollback_restore(c, root, f, copy)
        c.start(f)

        def outcome():
            # The leader kept its term and F reconnected: it sees F regressed. Or the leader lost
            # its quorum while F was down (check-quorum) and a newer term began: its sync then
            # adopted the leader's own log, which holds every acknowledged write.
            s = c.status(leader)
            if s and "ROLLBACK" in (s.get("alarms") or []):
                return ("alarm", s.get("rollback", ""))
            now = c.agreed_leader([leader, f])
            if now and now[1] > term:
                keys = committed_keys(c.http_ports[now[0]])
                if keys is not None and set(acked) <= keys:
                    return ("newer term", now)
            return None

        seen = wait_for(outcome, timeout_s=2 * WAIT_S)
        check(seen is not None and (seen[0] == "newer term" or "acknowledged" in seen[1]),
              "%s: the leader raises ROLLBACK for the regressed follower, or a newer term's "
              "leader holds every acknowledged write (%r)" % (what, seen))
        if seen and seen[0] == "alarm":
            code, _ = post_json(c.http_ports[leader], "/metadata", {"key": "during", "value": 1},
                                timeout_s=10.0)
            check(code != 200, "%s: without F's acks the leader commits nothing (%r)" %
                  (what, code))
        c.procs[leader].kill()
        c.procs[leader].wait()
        c.start(g)
        check(wait_for(lambda: c.agreed_leader([f, g]), timeout_s=2 * WAIT_S) is not None,
              "%s: F and the third node elect a leader" % what)
        c.start(leader)
        check(wait_for(lambda: all(p["up"] for p in (c.status(leader) or {"peers": [{"up": 0}]})
                                   ["peers"])), "%s: the old leader is back and linked" % what)
        rollback_verdict(c, what, acked, leader)
    finally:
        c.stop_all()


def test_rollback_vote_record(root):
    """Only the vote record is put back from an older copy (valid checksum) after the node's log
    has taken entries of a newer term: the start is refused (exit 3), naming both terms and the
    ways back; the cluster keeps every acknowledged write."""
    c = Cluster(root)
    try:
        leader = c.start_all_agreed("rollback, vote record")
        if leader is None:
            return
        f, g = [n for n in c.ids if n != leader]
        acked = []
        rollback_cluster_writes(c, lambda: c.http_ports[leader], "v", 5, acked)
        state = os.path.join(root, f, "elector-state.json")
        c.procs[f].send_signal(signal.SIGTERM)
        c.procs[f].wait(timeout=WAIT_S)
        old = open(state).read()
        c.start(f)
        # A newer term whose entries reach F: leadership moves to G (retried until accepted).
        def moved():
            now = c.agreed_leader()
            if now and now[0] == g:
                return now
            if now:
                request(c.http_ports[now[0]], "POST", "/transfer-leadership?to=" + g)
            return None
        check(wait_for(moved, timeout_s=2 * WAIT_S, step_s=0.5) is not None,
              "rollback, vote record: leadership moves to a newer term")
        rollback_cluster_writes(c, lambda: c.http_ports[g], "w", 5, acked)
        newer = json.load(open(state))["term"]
        check(newer > json.loads(old)["term"] and
              wait_for(lambda: set(acked) <= (committed_keys(c.http_ports[f]) or set())),
              "rollback, vote record: F's log holds entries of term %d" % newer)
        c.procs[f].send_signal(signal.SIGTERM)
        c.procs[f].wait(timeout=WAIT_S)
        with open(state, "w") as fh:
            fh.write(old)
        r = subprocess.run([DAEMON, "--config", c.config, "--node-id", f], capture_output=True,
                           text=True, timeout=WAIT_S)
        line = [l for l in r.stderr.splitlines() if l.startswith("conclaved:")]
        check(r.returncode == 3 and line and "holds entries of term" in line[-1] and
              "--repair --min-term" in line[-1],
              "rollback, vote record: the start is refused (exit %r, %r)" %
              (r.returncode, line[-1:] if line else r.stderr[-300:]))
        keys = committed_keys(c.http_ports[g])
        check(keys is not None and set(acked) <= keys,
              "rollback, vote record: no acknowledged write is lost")
    finally:
        c.stop_all()


class NdjsonWatch:
    """A GET ...?watch=1 stream read on its own thread: the non-blank lines, parsed."""

    def __init__(self, port, path, token=None):
        import threading
        self.lines = []
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S * 4)
        headers = {"Authorization": "Bearer " + token} if token else {}
        self.conn.request("GET", path, headers=headers)
        self.sock = self.conn.sock  # the response takes it over
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            while True:
                line = self.response.readline()
                if not line:
                    return
                if line.strip():
                    self.lines.append(json.loads(line))
        except (OSError, ValueError, http.client.HTTPException):
            return

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()
        self.thread.join(timeout=WAIT_S)


def liveness_of(c, nid, peer):
    """(live, last_heartbeat_ms) of `peer` in `nid`'s /status, or None."""
    st = c.status(nid)
    for p in (st or {}).get("peers", []):
        if p["id"] == peer:
            return p["live"], p["last_heartbeat_ms"]
    return None


def test_broadcast(root):
    """POST /broadcast to one daemon reaches the watch streams of the other two exactly once; the
    liveness of a SIGSTOPped daemon goes false on its peers and true again once resumed."""
    # fast's heartbeat with a 1 s liveness window (10 beats): a loaded machine does not make a
    # running daemon look gone.
    c = Cluster(root, secure=True, timing={"miss_count": 10})
    watches = []
    try:
        if c.start_all_agreed("broadcast") is None:
            return
        n1, n2, n3 = c.ids
        window = wait_for(lambda: (c.status(n1) or {}).get("liveness", {}).get("window_ms"))
        check(window, "/status names the liveness window")
        all_live = lambda: all(liveness_of(c, a, b) and liveness_of(c, a, b)[0]
                               for a in c.ids for b in c.ids if a != b)
        check(wait_for(all_live), "every daemon sees both peers live")
        code, body = request(c.http_ports[n1], "GET", "/members")
        members = json.loads(body)["members"] if code == 200 else []
        check([(m["id"], m["live"]) for m in members] == [(n, True) for n in c.ids]
              and members[0]["last_heartbeat_ms"] == 0,
              "GET /members (no token needed to read) shows each member live, itself at 0 ms: %s"
              % members)
        watches = [NdjsonWatch(c.http_ports[n], "/broadcast?watch=1", c.token) for n in (n2, n3)]
        check(all(w.status == 200 for w in watches), "GET /broadcast?watch=1 streams")
        # A stream takes what arrives once the server has begun it, a moment after the client
        # saw its headers: probes until both streams have one, then the message under test.
        probe = lambda: post_json(c.http_ports[n1], "/broadcast", {"topic": "probe", "payload": 0},
                                  token=c.token)[0] == 200 and wait_for(
                                      lambda: all(w.lines for w in watches), timeout_s=0.5)
        check(wait_for(probe), "the watch streams are open")
        for w in watches:
            del w.lines[:]
        doc = {"topic": "cache/invalidate", "payload": {"project": "p1", "keys": [1, 2]}}
        code, _ = post_json(c.http_ports[n1], "/broadcast", doc)
        check(code == 401, "POST /broadcast needs the admin token (got %s)" % code)
        code, body = post_json(c.http_ports[n1], "/broadcast", doc, token=c.token)
        answer = json.loads(body) if code == 200 else {}
        check(code == 200 and sorted(answer.get("sent_to", [])) == [n2, n3],
              "POST /broadcast answers 200 once sent to both live peers: %s %s" % (code, body))
        seen = lambda w: [line for line in w.lines if line.get("topic") != "probe"]
        check(wait_for(lambda: all(seen(w) for w in watches)), "both watch streams see it")
        time.sleep(1.0)  # a duplicate would have arrived by now on loopback
        for nid, w in zip((n2, n3), watches):
            check(seen(w) == [{"id": answer.get("id"), "from": n1, "topic": doc["topic"],
                               "payload": doc["payload"]}],
                  "%s's stream holds the message exactly once: %s" % (nid, w.lines))
        code, _ = post_json(c.http_ports[n1], "/broadcast", {"topic": "", "payload": 1},
                            token=c.token)
        check(code == 400, "an empty topic is refused with 400 (got %s)" % code)
        code, _ = post_json(c.http_ports[n1], "/broadcast",
                            {"topic": "t", "payload": "x" * 40000}, token=c.token)
        check(code == 413, "a payload above its bound is refused with 413 (got %s)" % code)

        c.procs[n3].send_signal(signal.SIGSTOP)
        try:
            gone = wait_for(lambda: (lambda seen: seen if seen and not seen[0] else None)(
                liveness_of(c, n1, n3)))
            check(gone and gone[1] > window,
                  "a SIGSTOPped daemon is not live on its peer, last heard above the window: %s"
                  % (gone,))
            code, body = post_json(c.http_ports[n1], "/broadcast", {"topic": "t", "payload": 2},
                                   token=c.token)
            check(code == 200 and n3 in json.loads(body)["not_sent"],
                  "a broadcast skips the member that is not live: %s" % body)
        finally:
            c.procs[n3].send_signal(signal.SIGCONT)
        check(wait_for(lambda: liveness_of(c, n1, n3) and liveness_of(c, n1, n3)[0]),
              "resumed, it is live again")
    finally:
        for w in watches:
            w.close()
        c.stop_all()


DEFAULT_TESTS = (test_bad_configs, test_cluster, test_graceful_handover, test_disk_full,
                 test_repair, test_membership, test_lost_state, test_new_node_quarantine,
                 test_removed_while_down, test_snapshot_restored, test_join_refused)
# Restored copies (item "rollback" of node/README.md's "Lost or damaged state") and joined nodes
# restarting: a separate CTest (conclaved_rollback_tests), each bounded like the others.
ROLLBACK_TESTS = (test_joined_restart, test_rollback_leader_away, test_rollback_leader_alive,
                  test_rollback_vote_record)
# Liveness and broadcast: a separate CTest (conclaved_broadcast_tests).
BROADCAST_TESTS = (test_broadcast,)


def main():
    with tempfile.TemporaryDirectory(prefix="conclaved-test-") as root:
        # Test function names; the default set when none is given ("rollback": ROLLBACK_TESTS,
        # their own CTest, conclaved_rollback_tests).
        chosen = sys.argv[2:]
        if chosen == ["rollback"]:
            chosen = [t.__name__ for t in ROLLBACK_TESTS]
        for test in DEFAULT_TESTS + ROLLBACK_TESTS + BROADCAST_TESTS:
            if (chosen and test.__name__ not in chosen) or (
                    not chosen and test in ROLLBACK_TESTS + BROADCAST_TESTS):
                continue
            sub = os.path.join(root, test.__name__)
            os.mkdir(sub)
            print("==", test.__name__, flush=True)
            test(sub)
            if failures:
                for nid_log in sorted(os.listdir(sub)):
                    if nid_log.endswith(".log"):
                        print("--- %s ---" % nid_log)
                        with open(os.path.join(sub, nid_log)) as f:
                            print(f.read()[-4000:])
                break
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
