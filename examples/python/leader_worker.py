#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Leader-only work from a service not written in C++ (Python standard library only).

    leader_worker.py --node 127.0.0.1:8101 --id n1 --store /tmp/store.log [--duration SECONDS]
                     [--token-file FILE]

Runs beside one conclaved (its admin endpoint --node, its id --id) and follows that node's view of
the leadership with GET /leadership?watch=1 (one NDJSON snapshot per change: role, term, leader,
fencing_token, reason, lease). While its node leads, it does the "leader-only work": it appends
records to a store, each carrying the fencing token of the leadership it acted under.

Before each work item it asks GET /leadership for the node's current leader lease
(docs/design.md): it acts only while the lease is valid, measured from before the request left
(remaining_ms on its own monotonic clock), and never while the watch stream is down: a closed
stream may mean that conclaved died, and a successor can be elected within milliseconds. The
lease makes "at most one leader at a time" hold for the work it gates. The store also checks
the token (FencedStore below): a write with a token lower than one it has already seen is
refused, so a deposed leader that has not heard the news yet (a GC pause, a partition) cannot
overwrite the work of its successor. The store here is a file shared by the workers under an
flock; a real one would be a database row, an object-store precondition, a broker epoch.

Exit status: 0 after --duration or SIGTERM/SIGINT (it keeps trying to reach its node meanwhile,
and does no work while it cannot).
"""
import argparse
import fcntl
import http.client
import json
import os
import signal
import sys
import threading
import time


class StaleToken(Exception):
    """The store has seen a newer leadership than the writer's."""


class FencedStore:
    """Append-only records; each write carries a fencing token, never lower than the highest seen.

    File format: one JSON object per line {"token", "writer", "record"}; the highest token is the
    last line's (writes are serialised by flock and tokens never decrease).
    """

    def __init__(self, path):
        self.path = path

    def write(self, token, writer, record):
        with open(self.path, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            highest = 0
            for line in f:
                highest = max(highest, json.loads(line)["token"])
            if token < highest:
                raise StaleToken("token %d < %d already seen" % (token, highest))
            f.write(json.dumps({"token": token, "writer": writer, "record": record}) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def records(self):
        try:
            with open(self.path) as f:
                return [json.loads(line) for line in f]
        except FileNotFoundError:
            return []


class Leadership:
    """The latest snapshot of the node's view, updated by a watcher thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.snapshot = None  # None: not known (not connected)

    def set(self, snapshot):
        with self.lock:
            self.snapshot = snapshot

    def get(self):
        with self.lock:
            return self.snapshot


def lease_deadline(host, port, headers, node_id):
    """The node's leader lease as a time.monotonic() deadline, or None (not leading, lease
    pending or over, node unreachable). Measured from before the request left: never later than
    the node's own deadline."""
    sent = time.monotonic()
    try:
        conn = http.client.HTTPConnection(host, port, timeout=1)
        conn.request("GET", "/leadership", headers=headers)
        response = conn.getresponse()
        body = response.read()
        conn.close()
        if response.status != 200:
            return None
        snapshot = json.loads(body)
    except (OSError, http.client.HTTPException, ValueError):
        return None
    lease = snapshot.get("lease")
    if snapshot.get("role") != "leader" or snapshot.get("leader") != node_id or not lease:
        return None
    if not lease.get("valid"):
        return None
    return sent + lease["remaining_ms"] / 1000.0


def follow(host, port, headers, leadership, stop, log):
    """Follows GET /leadership?watch=1, reconnecting; the snapshot is None while disconnected."""
    while not stop.is_set():
        try:
            conn = http.client.HTTPConnection(host, port, timeout=45)  # keep-alive lines every 15 s
            conn.request("GET", "/leadership?watch=1", headers=headers)
            response = conn.getresponse()
            if response.status != 200:
                log("watch refused: HTTP %d %s" % (response.status, response.read()[:200]))
            else:
                while not stop.is_set():
                    line = response.readline()
                    if not line:
                        break  # stream ended
                    if line.strip():
                        snapshot = json.loads(line)
                        leadership.set(snapshot)
                        log("leadership: role=%s leader=%s token=%s reason=%s" % (
                            snapshot["role"], snapshot["leader"], snapshot["fencing_token"],
                            snapshot["reason"]))
            conn.close()
        except (OSError, http.client.HTTPException, ValueError) as e:
            log("watch: %s" % e)
        leadership.set(None)  # not connected: do not act on an old view
        stop.wait(0.5)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node", required=True, help="the local conclaved admin endpoint host:port")
    parser.add_argument("--id", required=True, help="the local node's id")
    parser.add_argument("--store", required=True, help="path of the fenced store file")
    parser.add_argument("--duration", type=float, default=0, help="seconds to run (0: until signal)")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between work items")
    parser.add_argument("--token-file", help="the admin token (admin.token_file): reads need it "
                        "unless the node is insecure or has admin.open_reads")
    args = parser.parse_args()
    host, _, port = args.node.rpartition(":")
    headers = {}
    if args.token_file:
        with open(args.token_file) as f:
            headers["Authorization"] = "Bearer " + f.readline().strip()

    def log(text):
        print("[worker %s] %s" % (args.id, text), flush=True)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    leadership = Leadership()
    watcher = threading.Thread(target=follow, args=(host, int(port), headers, leadership, stop, log),
                               daemon=True)
    watcher.start()
    store = FencedStore(args.store)
    deadline = time.monotonic() + args.duration if args.duration else None
    done = fenced = 0
    while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
        snapshot = leadership.get()  # None while the watch stream is down: no work
        leading = snapshot and snapshot["role"] == "leader" and snapshot["leader"] == args.id
        lease = lease_deadline(host, int(port), headers, args.id) if leading else None
        # The lease is checked right before acting; the watch must still be up.
        if lease is not None and time.monotonic() < lease and leadership.get() is snapshot:
            token = snapshot["fencing_token"]
            try:
                store.write(token, args.id, "work item %d" % done)
                done += 1
            except StaleToken as e:
                fenced += 1
                log("fenced off: %s; waiting for a newer leadership" % e)
                while not stop.is_set() and (leadership.get() or {}).get("fencing_token") == token:
                    stop.wait(0.05)
        stop.wait(args.interval)
    stop.set()
    log("done: %d work items, %d refused by the store" % (done, fenced))
    return 0


if __name__ == "__main__":
    sys.exit(main())
