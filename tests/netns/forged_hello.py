# SPDX-License-Identifier: Apache-2.0
"""A stranger's hellos against the leader lease (netns_faults.py --measure-forged-hello).

The leader is cut off (its namespace drops what its peers send it; its admin port stays
reachable) while a process without the cluster secret sends each follower, every 20 ms, a hello
naming the leader (a nonce, no MAC). The followers' links to the leader retransmit; a hello must
not close them, and nothing unproven may end a follower's promise (docs/design.md, "The leader
lease", assumption 3). Every node's /status is polled meanwhile; the overlap of valid leases is
the time during which the old leader's lease and a new leader's were both valid."""
import os
import socket
import struct
import threading
import time

import netbed

HELLO_EVERY_S = 0.02


def cbor(value):
    """The CBOR of a map of text keys to text, unsigned integers and bytes (what a hello holds)."""
    def head(major, n):
        if n < 24:
            return bytes([major << 5 | n])
        for code, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
            if n < 1 << (8 * struct.calcsize(fmt)):
                return bytes([major << 5 | code]) + struct.pack(fmt, n)
        raise ValueError(n)
    if isinstance(value, bool):
        return bytes([0xf5 if value else 0xf4])
    if isinstance(value, int):
        return head(0, value)
    if isinstance(value, bytes):
        return head(2, len(value)) + value
    if isinstance(value, str):
        data = value.encode()
        return head(3, len(data)) + data
    if isinstance(value, dict):
        return head(5, len(value)) + b"".join(cbor(k) + cbor(v) for k, v in value.items())
    raise TypeError(type(value))


def forged_hello_frame(cluster, node):
    """A hello frame (channel 0, Control) claiming `node`: a fresh nonce, no MAC."""
    payload = cbor({"kind": "hello", "v": 1, "cluster": cluster, "node": node,
                    "nonce": os.urandom(32), "term": 1 << 40})
    return struct.pack(">I", len(payload) + 1) + b"\x00" + payload


class Forger(threading.Thread):
    """Sends every target a forged hello naming `node` every HELLO_EVERY_S until stopped."""

    def __init__(self, targets, cluster, node):
        super().__init__(daemon=True)
        self.targets, self.cluster, self.node = targets, cluster, node
        self.stopped = threading.Event()
        self.sent = 0

    def run(self):
        while not self.stopped.is_set():
            for host in self.targets:
                try:
                    with socket.create_connection((host, netbed.PEER_PORT), timeout=0.2) as s:
                        s.sendall(forged_hello_frame(self.cluster, self.node))
                        self.sent += 1
                        s.settimeout(0.05)
                        try:
                            s.recv(4096)  # the node's answer (its hello), then we go away
                        except OSError:
                            pass
                except OSError:
                    pass
            self.stopped.wait(HELLO_EVERY_S)


def poll_leases(bed, old_leader, until_s):
    """Samples every node's /status until a new leader holds a valid lease for 1 s (or until_s).
    Returns (old leader's lease end, new leader's lease start, the new leader) in monotonic
    seconds: each end is the latest a sample allows (receipt time + remaining), each start the
    earliest (the send time of that node's previous sample, which did not hold one)."""
    old_end, new_start, new_leader = None, None, None
    previous_sent = {nid: time.monotonic() for nid in bed.ids}
    deadline = time.monotonic() + until_s
    while time.monotonic() < deadline:
        for nid in bed.ids:
            sent = time.monotonic()
            st = bed.status(nid, timeout_s=0.3)
            got = time.monotonic()
            lease = (st or {}).get("lease") or {}
            if st and st.get("role") == "leader" and lease.get("valid"):
                if nid == old_leader:
                    old_end = max(old_end or 0, got + lease.get("remaining_ms", 0) / 1000.0)
                elif new_start is None:
                    new_start, new_leader = previous_sent[nid], nid
            previous_sent[nid] = sent
        if new_start is not None and time.monotonic() > new_start + 1.0:
            break
    return old_end, new_start, new_leader


def measure_forged_hello(bed, runs, within_s=0.0):
    """runs trials; fails (1) when a trial's overlap of valid leases is above within_s or no new
    leader is elected in time."""
    failed, overlaps = 0, []
    for nid in bed.ids:
        bed.start(nid)
    for run in range(runs):
        agreed = netbed_wait(bed.agreed_leader)
        if not agreed:
            print("FAIL: no agreed leader before run %d" % run)
            return 1
        leader = agreed[0]
        if leader != bed.ids[0]:
            # n1 leads: it dials both of its links, so both followers see its hello inbound (a
            # follower that dials the leader's link takes a hello from it for a dial request).
            netbed.request(bed.addr[leader], "POST", "/transfer-leadership?to=" + bed.ids[0],
                           bed.token)
            agreed = netbed_wait(lambda: (lambda a: a if a and a[0] == bed.ids[0] else None)(
                bed.agreed_leader()))
            if not agreed:
                print("FAIL: %s does not take over before run %d" % (bed.ids[0], run))
                return 1
            leader = agreed[0]
        followers = [n for n in bed.ids if n != leader]
        netbed_wait(lambda: (bed.status(leader) or {}).get("lease", {}) and
                    bed.status(leader)["lease"].get("valid"))
        tag = "cut%d" % run
        bed.drop(leader, tag, "ip saddr { %s }" % ", ".join(bed.addr[f] for f in followers))
        forger = Forger([bed.addr[f] for f in followers], "netns", leader)
        forger.start()
        try:
            old_end, new_start, new_leader = poll_leases(bed, leader, until_s=30)
        finally:
            forger.stopped.set()
            forger.join()
            bed.undrop(tag)
        if new_start is None or old_end is None:
            print("  run %d: FAIL: no new leader with a valid lease within 30 s" % run)
            failed += 1
            continue
        overlap = max(0.0, old_end - new_start)
        overlaps.append(overlap)
        bad = overlap > within_s
        failed += bad
        print("  run %d: %s cut off, %d forged hellos; %s leads; old lease ends %+.0f ms from "
              "the new one's start: overlap %.0f ms%s" %
              (run, leader, forger.sent, new_leader, (old_end - new_start) * 1000,
               overlap * 1000, " (FAIL)" if bad else ""), flush=True)
    if overlaps:
        print("overlap of valid leases over %d runs: max %.0f ms" % (runs, max(overlaps) * 1000))
    return 1 if failed else 0


def netbed_wait(pred, timeout_s=30.0, step_s=0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(step_s)
    return None
