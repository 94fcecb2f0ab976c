# SPDX-License-Identifier: Apache-2.0
"""Idle-connection floods against the mesh (netns_faults.py --measure-rejoin RUNS --flood).

From SOURCES extra addresses of the bridge, a flooder holds PER_SOURCE silent TCP connections to
every node's peer port (as many as the mesh lets one address keep in its handshake), more in all
than the mesh's 64 handshakes in progress, and opens a new one as soon as the node closes one:
each new one makes the node evict the oldest handshake in progress (net/README.md)."""
import selectors
import socket
import subprocess
import threading
import time

import netbed

SOURCES = 9
PER_SOURCE = 8


class Flooder(threading.Thread):
    def __init__(self, bed, targets):
        super().__init__(daemon=True)
        self.bed = bed
        self.targets = list(targets)
        self.sources = ["%s.%d" % (bed.subnet, 200 + i) for i in range(SOURCES)]
        self.stopped = threading.Event()
        self.reopened = 0
        self.selector = selectors.DefaultSelector()

    def __enter__(self):
        for source in self.sources:
            subprocess.run(["ip", "addr", "add", source + "/24", "dev", self.bed.bridge],
                           capture_output=True, timeout=10)
        self.start()
        return self

    def __exit__(self, *exc):
        self.stopped.set()
        self.join(timeout=10)
        for source in self.sources:
            subprocess.run(["ip", "addr", "del", source + "/24", "dev", self.bed.bridge],
                           capture_output=True, timeout=10)

    def open(self, source, host):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((source, 0))
            s.connect_ex((host, netbed.PEER_PORT))
        except OSError:
            s.close()
            return
        self.selector.register(s, selectors.EVENT_READ, (source, host))

    def run(self):
        for host in self.targets:
            for source in self.sources:
                for _ in range(PER_SOURCE):
                    self.open(source, host)
        later = []  # (when, source, host): a refused connect is retried after 50 ms, not in a spin
        while not self.stopped.is_set():
            now = time.monotonic()
            for item in [i for i in later if i[0] <= now]:
                later.remove(item)
                self.open(item[1], item[2])
            for key, _ in self.selector.select(timeout=0.02):
                s = key.fileobj
                refused = False
                try:
                    data = s.recv(4096)
                except OSError:
                    data, refused = b"", True
                if data:
                    continue  # never answered: the node's refusal or nothing
                self.selector.unregister(s)
                s.close()
                self.reopened += 1
                if refused:
                    later.append((time.monotonic() + 0.05,) + key.data)
                else:
                    self.open(*key.data)  # closed by the node: at once, as an attacker would
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()
        self.selector.close()
