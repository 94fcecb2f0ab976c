#!/usr/bin/env python3
"""Process test of conclavectl and GET /leadership against three real conclaved (python3 stdlib).

    conclavectl_test.py /path/to/conclaved /path/to/conclavectl

127.0.0.1 only, free ports, temporary directories, every wait bounded. Reuses the helpers of
conclaved_test.py (same folder).
"""
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conclaved_test as ct  # noqa: E402

ct.DAEMON = sys.argv[1] if len(sys.argv) > 1 else "build/release/tools/conclaved"
CTL = sys.argv[2] if len(sys.argv) > 2 else "build/release/tools/conclavectl"
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
check = ct.check


def ctl(*args, timeout_s=30):
    return subprocess.run([CTL, *args], capture_output=True, text=True, timeout=timeout_s)


def endpoints(cluster, nids):
    return ",".join("127.0.0.1:%d" % cluster.http_ports[n] for n in nids)


def test_usage():
    r = ctl("--help")
    check(r.returncode == 0 and "Exit status" in r.stdout and "transfer --to ID" in r.stdout,
          "--help: exit 0, documents commands and exit statuses")
    for args, what in [((), "no command"), (("--endpoints", "x", "status"), "bad endpoint"),
                       (("--endpoints", "127.0.0.1:1", "frob"), "unknown command"),
                       (("--endpoints", "127.0.0.1:1", "transfer"), "transfer without --to"),
                       (("--endpoints", "127.0.0.1:1", "put", "k"), "put without value"),
                       (("--config", "/nonexistent.json", "status"), "missing config")]:
        r = ctl(*args)
        check(r.returncode == 2 and r.stderr.startswith("conclavectl: "),
              "usage error (%s): exit 2, one clear line (%d, %r)" % (what, r.returncode,
                                                                     r.stderr.strip()))
    port = ct.free_ports(1)[0]
    r = ctl("--endpoints", "127.0.0.1:%d" % port, "--timeout", "2", "put", "k", "v")
    check(r.returncode == 4 and len(r.stderr.strip().splitlines()) == 1,
          "nothing listening: exit 4, one line (%d, %r)" % (r.returncode, r.stderr.strip()))


class AuthHandler(http.server.BaseHTTPRequestHandler):
    seen = []

    def do_GET(self):
        AuthHandler.seen.append(self.headers.get("Authorization"))
        body = b'{"error":"unauthorized","detail":"missing or wrong bearer token"}\n'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_auth(root):
    server = http.server.HTTPServer(("127.0.0.1", 0), AuthHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        token = os.path.join(root, "token")
        with open(token, "w") as f:
            f.write("s3cret\n")
        r = ctl("--endpoints", "127.0.0.1:%d" % server.server_address[1], "--token-file", token,
                "get")
        check(r.returncode == 3 and len(r.stderr.strip().splitlines()) == 1 and "401" in r.stderr,
              "401: exit 3, one line (%d, %r)" % (r.returncode, r.stderr.strip()))
        check("Bearer s3cret" in AuthHandler.seen,
              "--token-file sends Authorization: Bearer <token> (%r)" % AuthHandler.seen)
    finally:
        server.shutdown()


def leadership(cluster, nid, query=""):
    code, body = ct.request(cluster.http_ports[nid], "GET", "/leadership" + query, timeout_s=10)
    return code, (json.loads(body) if body else None)


def test_watcher_limit(root):
    """admin.max_watchers is the config's limit of watch streams plus long-polls."""
    cluster = ct.Cluster(root, size=1)
    with open(cluster.config) as f:
        doc = json.load(f)
    # With a token and open reads: watchers without it are limited, one with it is not.
    token_path = os.path.join(root, "token")
    token = os.urandom(32).hex()
    with open(os.open(token_path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(token + "\n")
    doc["admin"] = {"max_watchers": 2, "token_file": token_path, "open_reads": True}
    with open(cluster.config, "w") as f:
        json.dump(doc, f)
    try:
        cluster.start("n1")
        check(ct.wait_for(cluster.agreed_leader), "one node with admin.max_watchers=2 leads")
        port = cluster.http_ports["n1"]
        streams = []
        for _ in range(2):
            c = ct.http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/leadership?watch=1")
            r = c.getresponse()
            streams.append((c, r, r.status == 200))
        check(all(ok for _, _, ok in streams), "admin.max_watchers=2: two watch streams")
        code, body = ct.request(port, "GET", "/leadership?wait=1&after=0")
        check(code == 200, "a long-poll answered at once does not wait, so it is not refused")
        code, body = ct.request(port, "GET", "/leadership?watch=1")
        check(code == 503 and "too_many_watchers" in body and "(limit 2)" in body,
              "admin.max_watchers=2: the third watcher gets 503 naming the limit (%r, %r)" %
              (code, body))
        c = ct.http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/leadership?watch=1", headers={"Authorization": "Bearer " + token})
        r = c.getresponse()
        check(r.status == 200, "a watcher with the token is served beyond admin.max_watchers (%r)"
              % r.status)
        streams.append((c, r, True))
        for c, r, _ in streams:
            r.close()
            c.close()
    finally:
        cluster.stop_all()


def test_cluster(root):
    cluster = ct.Cluster(root)
    try:
        for nid in cluster.ids:
            cluster.start(nid)
        agreed = ct.wait_for(cluster.agreed_leader)
        if not check(agreed, "3 nodes agree on a leader"):
            return
        leader = agreed[0]
        followers = [n for n in cluster.ids if n != leader]

        # GET /leadership: the snapshot, and the long-poll.
        code, snap = leadership(cluster, followers[0])
        check(code == 200 and snap["leader"] == leader and snap["role"] == "follower" and
              snap["fencing_token"] == agreed[1] and snap["reason"],
              "GET /leadership: role, term, leader, fencing token, reason (%r)" % snap)
        start = time.monotonic()
        code, same = leadership(cluster, followers[0], "?wait=1&after=%d" % snap["fencing_token"])
        check(code == 200 and same["fencing_token"] == snap["fencing_token"] and
              time.monotonic() - start >= 0.9,
              "long-poll without a change answers the same token after the wait")
        code, now = leadership(cluster, followers[0], "?wait=5&after=0")
        check(code == 200 and now["fencing_token"] == snap["fencing_token"],
              "long-poll with an old token answers at once")
        code, _ = leadership(cluster, followers[0], "?wait=abc")
        check(code == 400, "GET /leadership?wait=abc: 400")
        # At most 32 watch streams and long-polls at once; the next one is refused with 503.
        port = cluster.http_ports[followers[0]]
        streams = []
        # From four source addresses: the admin server admits at most 16 connections per source
        # (admin.max_connections_per_source), below the watcher limit.
        for i in range(32):
            c = ct.http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                              source_address=("127.0.0.%d" % (10 + i % 4), 0))
            c.request("GET", "/leadership?watch=1")
            r = c.getresponse()
            streams.append((c, r, r.status == 200 and json.loads(r.readline())["leader"] == leader))
        check(all(ok for _, _, ok in streams), "32 watch streams each start with the snapshot")
        code, body = ct.request(port, "GET", "/leadership?watch=1")
        check(code == 503 and "too_many_watchers" in body, "the 33rd watcher: 503 (%r)" % code)
        for c, r, _ in streams:
            r.close()
            c.close()

        def watch_slot_free():
            c = ct.http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                c.request("GET", "/leadership?watch=1")
                r = c.getresponse()
                ok = r.status == 200
                r.close()
                return ok
            finally:
                c.close()

        check(ct.wait_for(watch_slot_free), "watchers that leave free their slots")
        check(leadership(cluster, followers[0], "?watch=1&wait=1")[0] == 400,
              "watch=1 with wait: 400")

        # status, table and JSON, from the config file and from --endpoints.
        r = ctl("--config", cluster.config, "status")
        lines = r.stdout.strip().splitlines()
        check(r.returncode == 0 and len(lines) == 4 and lines[0].split()[:3] == ["ID", "ENDPOINT",
                                                                                "ROLE"] and
              sum(" leader " in line for line in lines) == 1,
              "status --config: exit 0, a header and one row per node, one leader (%d, %r, %r)" %
              (r.returncode, r.stdout, r.stderr))
        r = ctl("--endpoints", endpoints(cluster, cluster.ids), "status", "-o", "json")
        rows = json.loads(r.stdout) if r.returncode == 0 else []
        check(len(rows) == 3 and [x["role"] for x in rows].count("leader") == 1 and
              {x["leader"] for x in rows} == {leader} and
              all(x["health"] == "ok" and x["commit_lsn"] is not None for x in rows),
              "status -o json: 3 healthy nodes agreeing on %s (%r)" % (leader, r.stdout[:500]))

        # put through a follower (307 to the leader), get from the start and after an LSN.
        r = ctl("--endpoints", endpoints(cluster, followers), "put", "svc/owner", '{"a": 1}')
        check(r.returncode == 0 and r.stdout.startswith("committed at "),
              "put via a follower follows the 307 and commits (%d, %r, %r)" %
              (r.returncode, r.stdout, r.stderr))
        lsn = r.stdout.split()[-1] if r.returncode == 0 else "0.0"
        r = ctl("--endpoints", endpoints(cluster, followers), "put", "plain", "hello")
        check(r.returncode == 0, "put of a non-JSON value (stored as a string)")
        r = ctl("--config", cluster.config, "get")
        check(r.returncode == 0 and '%s svc/owner {"a":1}' % lsn in r.stdout and
              ' plain "hello"' in r.stdout,
              "get lists the committed entries (%r)" % r.stdout)
        r = ctl("--config", cluster.config, "get", "--from", lsn, "-o", "json")
        entries = json.loads(r.stdout) if r.returncode == 0 else None
        check(entries is not None and [e["key"] for e in entries] == ["plain"],
              "get --from LSN -o json: only what follows (%r)" % r.stdout)

        # examples/python/leader_worker.py beside every node, through the transfer and step-down.
        store_path = os.path.join(root, "store.log")
        workers = [subprocess.Popen(
            [sys.executable, os.path.join(EXAMPLES, "python", "leader_worker.py"), "--node",
             "127.0.0.1:%d" % cluster.http_ports[n], "--id", n, "--store", store_path],
            stdout=open(os.path.join(root, "worker-%s.log" % n), "w"), stderr=subprocess.STDOUT)
            for n in cluster.ids]
        sys.path.insert(0, os.path.join(EXAMPLES, "python"))
        import leader_worker
        store = leader_worker.FencedStore(store_path)
        check(ct.wait_for(lambda: len(store.records()) >= 5),
              "the worker beside the leader does leader-only work")

        # watch (from a follower) sees the transfer; transfer waits for the new leader.
        target = followers[1]
        watch_out = os.path.join(root, "watch.out")
        with open(watch_out, "w") as out:
            watch = subprocess.Popen([CTL, "--endpoints", endpoints(cluster, [followers[0]]),
                                      "watch"], stdout=out, stderr=subprocess.STDOUT)

        def watched():
            with open(watch_out) as f:
                return f.read()

        first = ct.wait_for(lambda: watched().strip())
        check(first and ("leader=%s" % leader) in first and "reason=" in first,
              "watch prints the current leadership first (%r)" % first)
        r = ctl("--config", cluster.config, "transfer", "--to", target)
        check(r.returncode == 0 and ("leader is now %s" % target) in r.stdout,
              "transfer --to %s: exit 0 once it leads (%d, %r, %r)" %
              (target, r.returncode, r.stdout, r.stderr))
        seen = ct.wait_for(lambda: ("leader=%s" % target) in watched())
        watch.send_signal(ct.signal.SIGINT)
        try:
            watch.wait(timeout=10)
        except subprocess.TimeoutExpired:
            watch.kill()
            watch.wait()
        check(seen and len(watched().strip().splitlines()) >= 2,
              "watch prints a line per change, the new leader included (%r)" % watched())
        check(watch.returncode != 0 and watch.returncode is not None,
              "watch ends on ^C (SIGINT) (%r)" % watch.returncode)
        r = ctl("--endpoints", endpoints(cluster, [followers[0]]), "watch", "--count", "1",
                "-o", "json", timeout_s=15)
        line = json.loads(r.stdout) if r.returncode == 0 else {}
        check(line.get("leader") == target and "time" in line,
              "watch --count 1 -o json: one JSON snapshot, then exit 0 (%r)" % r.stdout)

        # step-down hands leadership to another node.
        r = ctl("--config", cluster.config, "step-down")
        check(r.returncode == 0 and "leader is now" in r.stdout and target not in
              r.stdout.split("leader is now")[-1],
              "step-down: exit 0, another node leads (%d, %r, %r)" % (r.returncode, r.stdout,
                                                                      r.stderr))
        new_token = (ct.wait_for(cluster.agreed_leader) or (None, None))[1]
        check(ct.wait_for(lambda: any(r["token"] == new_token for r in store.records())),
              "the worker beside the newest leader works under its token %r" % new_token)
        for w in workers:
            w.send_signal(ct.signal.SIGTERM)
        for w in workers:
            try:
                w.wait(timeout=10)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
        records = store.records()
        tokens = [r["token"] for r in records]
        check(all(w.returncode == 0 for w in workers) and tokens == sorted(tokens) and
              len({r["writer"] for r in records}) >= 2 and
              all(len({r["writer"] for r in records if r["token"] == t}) == 1 for t in tokens),
              "leader workers: exit 0, tokens never decrease, one writer per token, >= 2 writers "
              "(%r)" % sorted({(r["token"], r["writer"]) for r in records}))
        try:
            store.write(tokens[0] if tokens else 0, "stale", "late write of a deposed leader")
            refused = not tokens or tokens[0] == tokens[-1]
        except leader_worker.StaleToken:
            refused = True
        check(refused and store.records()[-1]["writer"] != "stale",
              "the store refuses a write under an older fencing token")

        # status with a node down: exit 4, the row says unreachable.
        down = [n for n in cluster.ids if n != target][0]
        cluster.procs[down].kill()
        cluster.procs[down].wait()
        r = ctl("--config", cluster.config, "--timeout", "2", "status")
        check(r.returncode == 4 and "unreachable" in r.stdout,
              "status with a node down: exit 4, row unreachable (%d, %r)" % (r.returncode, r.stdout))
    finally:
        cluster.stop_all()


def test_members(root):
    """conclavectl members: the configuration, and a change through a follower (307 followed)."""
    cluster = ct.Cluster(root)
    try:
        leader = cluster.start_all_agreed("members")
        if leader is None:
            return
        followers = [n for n in cluster.ids if n != leader]
        r = ctl("--config", cluster.config, "members")
        lines = r.stdout.strip().splitlines()
        check(r.returncode == 0 and lines[0].startswith("configuration version 0 (implicit") and
              len(lines) == 4 and all(" voter " in line and "lag=" in line for line in lines[1:]),
              "members: version 0, three voters with their catch-up (%d, %r, %r)" %
              (r.returncode, r.stdout, r.stderr))
        r = ctl("--endpoints", endpoints(cluster, followers), "members", "remove", followers[1])
        check(r.returncode == 0 and
              r.stdout.strip() == "remove %s: committed, configuration version 1" % followers[1],
              "members remove via a follower commits version 1 (%d, %r, %r)" %
              (r.returncode, r.stdout, r.stderr))
        r = ctl("--config", cluster.config, "members", "-o", "json")
        view = json.loads(r.stdout) if r.returncode == 0 else {}
        check(view.get("version") == 1 and
              sorted(m["id"] for m in view.get("members", [])) == sorted([leader, followers[0]]),
              "members -o json: version 1 without the removed node (%r)" % r.stdout[:300])
        r = ctl("--config", cluster.config, "members", "promote", followers[1])
        check(r.returncode != 0 and "refused" in r.stderr,
              "members promote of a non-learner: refused (%d, %r)" % (r.returncode, r.stderr))
        r = ctl("--config", cluster.config, "members", "grow", "n1")
        check(r.returncode == 2, "members with an unknown op: usage error (%d)" % r.returncode)
    finally:
        cluster.stop_all()


def main():
    with tempfile.TemporaryDirectory(prefix="conclavectl-test-") as root:
        print("== test_usage", flush=True)
        test_usage()
        print("== test_auth", flush=True)
        test_auth(root)
        sub = os.path.join(root, "cluster")
        os.mkdir(sub)
        print("== test_cluster", flush=True)
        test_cluster(sub)
        limited = os.path.join(root, "limited")
        os.mkdir(limited)
        print("== test_watcher_limit", flush=True)
        test_watcher_limit(limited)
        members = os.path.join(root, "members")
        os.mkdir(members)
        print("== test_members", flush=True)
        test_members(members)
        if ct.failures:
            for name in sorted(os.listdir(sub)):
                if name.endswith(".log"):
                    print("--- %s ---" % name)
                    with open(os.path.join(sub, name)) as f:
                        print(f.read()[-3000:])
    print("%d failure(s)" % len(ct.failures))
    return 1 if ct.failures else 0


if __name__ == "__main__":
    sys.exit(main())
