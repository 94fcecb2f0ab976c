# SPDX-License-Identifier: Apache-2.0
"""A cluster of conclaved daemons (or etcd members), one per network namespace, joined by a bridge
(stdlib + ip/nft).

Names carry a prefix and the runner's pid (namespaces `cnetns-<pid>-<node>`, bridge `cnb<pid>`,
host-side veths `cnv<pid>-<node>`; an etcd bed's nodes are e1.. and its bridge `cnb<pid>e`);
`cleanup_leftovers()` removes those of runs whose process is gone. Faults are nftables rules in
the receiving node's namespace (an `inet` table, input hook): a dropped packet is silence, never
an RST, so the kernel's own timeouts (SYN retries, unanswered segments, half-open connections)
are what the daemons see.
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

PREFIX = "cnetns-"
BRIDGE_PREFIX = "cnb"
VETH_PREFIX = "cnv"
PEER_PORT = 7000
HTTP_PORT = 8000
ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
# etcd's timing at Conclave's fast profile, as bench/failover.cpp's peer_settings derives it: the
# heartbeat (60 ms; capped at election / 5, which etcd requires) and the election timeout = the
# profile's inactivity interval (300 ms); pre-vote on, as in bench/etcd.cpp.
ETCD_FAST_HEARTBEAT_MS = 60
ETCD_FAST_ELECTION_MS = 300
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
CMD_TIMEOUT_S = 10


def run(*args, check=True):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=CMD_TIMEOUT_S)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(args), r.stderr.strip()))
    return r


def pid_alive(pid):
    """Whether process pid runs (a zombie, killed but not yet reaped, does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def kill_namespace_processes(ns):
    """SIGKILLs what still runs in `ns` (daemons of a dead run) and waits, bounded, for them."""
    pids = [int(p) for p in run("ip", "netns", "pids", ns, check=False).stdout.split()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)


def delete_run(pid):
    """Removes the namespaces, processes, veths and bridge of the run of `pid`."""
    for ns in run("ip", "netns", "list", check=False).stdout.split("\n"):
        ns = ns.split(" ")[0]
        if ns.startswith("%s%d-" % (PREFIX, pid)):
            kill_namespace_processes(ns)
            run("ip", "netns", "delete", ns, check=False)
    links = run("ip", "-o", "link", "show", check=False).stdout
    for name in re.findall(r"^\d+: ([^:@]+)", links, re.M):
        if re.fullmatch("%s%d-[a-z]?\\d+" % (VETH_PREFIX, pid), name) or re.fullmatch(
                "%s%d[a-z]?" % (BRIDGE_PREFIX, pid), name):
            run("ip", "link", "delete", name, check=False)


def cleanup_leftovers():
    """Deletes what runs of this test bed left behind when their process died; returns their pids."""
    dead = set()
    for line in run("ip", "netns", "list", check=False).stdout.split("\n"):
        m = re.match(re.escape(PREFIX) + r"(\d+)-", line)
        if m and not pid_alive(int(m.group(1))):
            dead.add(int(m.group(1)))
    links = run("ip", "-o", "link", "show", check=False).stdout
    for m in re.finditer(r"^\d+: %s(\d+)[a-z]?[:@]" % BRIDGE_PREFIX, links, re.M):
        if not pid_alive(int(m.group(1))):
            dead.add(int(m.group(1)))
    for pid in dead:
        delete_run(pid)
    return sorted(dead)


def free_subnet(pid):
    """A 10.77.X.0/24 that no route of the root namespace uses yet (X derived from the pid)."""
    routes = run("ip", "-4", "route", "show", check=False).stdout
    for i in range(250):
        x = (pid + i) % 250 + 1
        if "10.77.%d." % x not in routes:
            return "10.77.%d" % x
    raise RuntimeError("no free 10.77.X.0/24 subnet")


def request(host, method, path, token=None, body=None, timeout_s=1.0, port=HTTP_PORT):
    """(status, parsed JSON or text, headers) or (None, None, None) when nothing answered."""
    headers = {"Authorization": "Bearer " + token} if token else {}
    if body is not None:
        headers["Content-Type"] = "application/json"
        body = json.dumps(body)
    try:
        c = http.client.HTTPConnection(host, port, timeout=timeout_s)
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        text = r.read().decode()
        c.close()
    except (OSError, http.client.HTTPException):
        return None, None, None
    try:
        doc = json.loads(text)
    except ValueError:
        doc = text
    return r.status, doc, dict(r.getheaders())


class Bed:
    """The namespaces, bridge and conclaved daemons of one run. Use as a context manager."""

    system = "conclaved"

    def __init__(self, daemon, root, size=3, drift_node=None, letter="n", profile="fast",
                 trace_dir=None):
        """Nodes <letter>1..<letter><size>; a bed with another letter can run beside this one
        (its namespaces, veths and bridge have other names). `profile`: the timing profile.
        `trace_dir`: every daemon records its elector's steps (conclaved --trace-elector) in
        <trace_dir>/<node>.ndjson, which each of the node's processes appends to."""
        self.daemon = daemon
        self.trace_dir = trace_dir
        self.profile = profile
        self.root = root
        self.pid = os.getpid()
        self.ids = ["%s%d" % (letter, i + 1) for i in range(size)]
        self.subnet = free_subnet(self.pid)
        self.addr = {nid: "%s.%d" % (self.subnet, i + 1) for i, nid in enumerate(self.ids)}
        self.bridge = "%s%d%s" % (BRIDGE_PREFIX, self.pid, "" if letter == "n" else letter)
        self.drift_node = drift_node
        self.procs = {}
        self.logs = {}
        self.rules = {}  # node -> list of (name, rule text)
        self.token = None

    def ns(self, nid):
        return "%s%d-%s" % (PREFIX, self.pid, nid)

    def __enter__(self):
        try:
            self.setup_network()
            self.write_config()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc):
        self.teardown()

    def setup_network(self):
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", self.subnet + ".254/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        for nid in self.ids:
            ns, host = self.ns(nid), "%s%d-%s" % (VETH_PREFIX, self.pid, nid)
            run("ip", "netns", "add", ns)
            run("ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns)
            run("ip", "link", "set", host, "master", self.bridge, "up")
            run("ip", "-n", ns, "addr", "add", self.addr[nid] + "/24", "dev", "eth0")
            run("ip", "-n", ns, "link", "set", "eth0", "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")
            self.nft(nid, "add table inet conclave_bed")
            self.nft(nid, "add chain inet conclave_bed input "
                     "{ type filter hook input priority 0; policy accept; }")
            self.rules[nid] = []

    def write_config(self):
        secret, token = os.urandom(32).hex(), os.urandom(32).hex()
        for name, value in (("secret", secret), ("token", token)):
            fd = os.open(os.path.join(self.root, name), os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, value.encode())
            os.close(fd)
        self.token = token
        doc = {
            "cluster": "netns",
            "nodes": [{"id": nid, "peer": "%s:%d" % (self.addr[nid], PEER_PORT),
                       "http": "%s:%d" % (self.addr[nid], HTTP_PORT)} for nid in self.ids],
            "profile": self.profile,
            "data_dir": os.path.join(self.root, "{id}"),
            "log": {"format": "json", "level": "info"},
            "secret_file": "secret",
            "admin": {"token_file": "token"},
        }
        self.config = os.path.join(self.root, "cluster.json")
        with open(self.config, "w") as f:
            json.dump(doc, f)

    def teardown(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        delete_run(self.pid)

    def nft(self, nid, command, *options):
        return run("ip", "netns", "exec", self.ns(nid), "nft", *options, command)

    # --- daemons -------------------------------------------------------------------------------

    def start(self, nid):
        env = dict(os.environ)
        if nid == self.drift_node:
            env.update(LD_PRELOAD=FAKETIME_LIB, FAKETIME="+0 x1.05")
        argv = [self.daemon, "--config", self.config, "--node-id", nid]
        if self.trace_dir:
            argv += ["--trace-elector", os.path.join(self.trace_dir, nid + ".ndjson")]
        self.spawn(nid, argv, env)

    def spawn(self, nid, argv, env=None):
        """Runs argv in nid's namespace, its output appended to <root>/<nid>.log."""
        log = open(os.path.join(self.root, nid + ".log"), "ab")
        self.logs[nid] = log.name
        self.procs[nid] = subprocess.Popen(["ip", "netns", "exec", self.ns(nid)] + argv,
                                           stdout=log, stderr=log, env=env)
        log.close()

    def running(self, nid):
        return nid in self.procs and self.procs[nid].poll() is None

    def signal(self, nid, sig):
        if self.running(nid):
            self.procs[nid].send_signal(sig)

    def kill(self, nid):
        if self.running(nid):
            self.procs[nid].send_signal(signal.SIGCONT)
            self.procs[nid].kill()
            self.procs[nid].wait(timeout=5)

    def stop(self, nid, timeout_s=5):
        """SIGTERM (a hand-over), SIGKILL when it has not exited within timeout_s."""
        if self.running(nid):
            self.procs[nid].terminate()
            try:
                self.procs[nid].wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill(nid)

    def status(self, nid, timeout_s=0.5):
        code, doc, _ = request(self.addr[nid], "GET", "/status", self.token, timeout_s=timeout_s)
        return doc if code == 200 and isinstance(doc, dict) else None

    def agreed_leader(self, nids=None):
        """(leader, term) that every listed node names, the leader itself saying `leader`."""
        nids = nids or [n for n in self.ids if self.running(n)]
        statuses = {n: self.status(n) for n in nids}
        if any(s is None for s in statuses.values()):
            return None
        leaders = {s["leader"] for s in statuses.values()}
        terms = {s["term"] for s in statuses.values()}
        if len(leaders) != 1 or None in leaders or len(terms) != 1:
            return None
        leader = leaders.pop()
        if leader not in statuses or statuses[leader]["role"] != "leader":
            return None
        return leader, terms.pop()

    # --- faults: nftables drops in the receiving namespace -------------------------------------

    def drop(self, at, name, match):
        """Adds a drop rule `match` to the input hook of `at`'s namespace, tagged `name`."""
        self.nft(at, 'add rule inet conclave_bed input %s drop comment "%s"' % (match, name))
        self.rules[at].append(name)

    def undrop(self, name):
        """Removes every rule tagged `name` from every namespace."""
        for nid in self.ids:
            if name not in self.rules[nid]:
                continue
            listing = self.nft(nid, "list chain inet conclave_bed input", "-a").stdout
            for handle in re.findall(r'comment "%s" # handle (\d+)' % re.escape(name), listing):
                self.nft(nid, "delete rule inet conclave_bed input handle " + handle)
            self.rules[nid] = [r for r in self.rules[nid] if r != name]

    def heal(self):
        for nid in self.ids:
            self.nft(nid, "flush chain inet conclave_bed input")
            self.rules[nid] = []

    def partition(self, a, b, name):
        """Nothing passes between a and b, either way."""
        self.drop(a, name, "ip saddr " + self.addr[b])
        self.drop(b, name, "ip saddr " + self.addr[a])

    def one_way(self, src, dst, name):
        """Packets from src to dst are lost; dst to src still pass."""
        self.drop(dst, name, "ip saddr " + self.addr[src])

    def isolate(self, v, name):
        """v vanishes from the network: nothing reaches it, nothing it sends arrives anywhere
        (its peers, and the test process through the bridge, which `iif eth0` covers)."""
        self.drop(v, name, 'iifname "eth0"')
        for nid in self.ids:
            if nid != v:
                self.drop(nid, name, "ip saddr " + self.addr[v])


def parse_etcd_status(doc):
    """(member id, leader id or None, raft term) from the JSON of etcd's
    POST /v3/maintenance/status (the v3 gateway prints uint64 as decimal strings and leaves out
    zero values: no `leader` means none known); None when the answer is not such a status."""
    def number(value):
        return value if isinstance(value, str) and re.fullmatch(r"[0-9]{1,20}", value) else None

    if not isinstance(doc, dict) or not isinstance(doc.get("header"), dict):
        return None
    member, term = number(doc["header"].get("member_id")), number(doc.get("raftTerm", "0"))
    leader = number(doc.get("leader", "0"))
    if member in (None, "0") or term is None or leader is None:
        return None
    return member, (None if leader == "0" else leader), int(term)


class EtcdBed(Bed):
    """The same bed with etcd members (Debian's etcd-server) instead of conclaved daemons: each
    on its namespace's address (client :2379, peer :2380), at the fast profile's timing."""

    system = "etcd"

    def __init__(self, etcd, root, size=3):
        super().__init__(etcd, root, size, letter="e")
        self.names = {}  # member id (decimal string) -> node id, learnt from each one's status

    def write_config(self):
        cluster = ",".join("%s=http://%s:%d" % (nid, self.addr[nid], ETCD_PEER_PORT)
                           for nid in self.ids)
        self.args = {}
        for nid in self.ids:
            peer = "http://%s:%d" % (self.addr[nid], ETCD_PEER_PORT)
            client = "http://%s:%d" % (self.addr[nid], ETCD_CLIENT_PORT)
            self.args[nid] = [
                self.daemon, "--name", nid, "--data-dir", os.path.join(self.root, nid),
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--initial-cluster-token", "conclave-netns",
                "--heartbeat-interval", str(ETCD_FAST_HEARTBEAT_MS),
                "--election-timeout", str(ETCD_FAST_ELECTION_MS), "--pre-vote=true",
                "--logger", "zap", "--log-level", "warn"]

    def start(self, nid):
        self.spawn(nid, self.args[nid])

    def status(self, nid, timeout_s=0.5):
        """The member's status in conclaved's /status terms: `leader` (a node id, None while
        the leader's own status has not been seen), `term` (the raft term) and `role` (leader
        when it names itself, else follower)."""
        code, doc, _ = request(self.addr[nid], "POST", "/v3/maintenance/status", body={},
                               timeout_s=timeout_s, port=ETCD_CLIENT_PORT)
        parsed = parse_etcd_status(doc) if code == 200 else None
        if parsed is None:
            return None
        member, leader, term = parsed
        self.names[member] = nid
        return {"role": "leader" if leader == member else "follower", "term": term,
                "leader": self.names.get(leader)}


def make_root():
    root = os.path.realpath(tempfile.mkdtemp(prefix="conclave-netns-"))
    os.chmod(root, 0o700)
    return root


def remove_root(root, keep):
    if keep:
        print("kept:", root, flush=True)
    else:
        shutil.rmtree(root, ignore_errors=True)
