#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""After every real-process test (CTest fixture real_processes): the test beds left nothing on
the machine. A network namespace, bridge or veth of a test bed (netbed.py's names) whose run has
ended is reported with that run's pid, removed, and fails the test: a test that leaks them
changes the network of the machine it ran on. Those of a run still going (another test run on
the same machine) are named and left alone.

--plant: the canary. Leaves a namespace of a run that has ended, then checks: passes only if
the check reports it (exit 1) and removed it. Needs root.

Exit 0: nothing left (--plant: the planted one caught); 1: something was left (and is now
removed); 77: no `ip` on PATH (--plant: or not root).
"""
import os
import re
import shutil
import subprocess
import sys

import netbed


def leftovers():
    """(kind, name, runner pid) of every test-bed object on the machine."""
    found = []
    for line in netbed.run("ip", "netns", "list", check=False).stdout.split("\n"):
        m = re.match(re.escape(netbed.PREFIX) + r"(\d+)-\S*", line)
        if m:
            found.append(("namespace", m.group(0), int(m.group(1))))
    links = netbed.run("ip", "-o", "link", "show", check=False).stdout
    for prefix, kind in ((netbed.BRIDGE_PREFIX, "bridge"), (netbed.VETH_PREFIX, "veth")):
        for m in re.finditer(r"^\d+: (%s(\d+)[-a-z0-9]*)[:@]" % prefix, links, re.M):
            found.append((kind, m.group(1), int(m.group(2))))
    return found


def check():
    left = []
    for kind, name, pid in leftovers():
        if netbed.pid_alive(pid):
            print("in use: %s %s (its run, pid %d, is still going): left alone" % (kind, name, pid))
        else:
            print("left behind: %s %s (its run, pid %d, has ended)" % (kind, name, pid))
            left.append(pid)
    for pid in sorted(set(left)):
        netbed.delete_run(pid)
    if left:
        print("FAIL: %d test-bed objects left after the real-process tests (now removed)" %
              len(left))
        return 1
    print("nothing left behind by the real-process tests")
    return 0


def plant():
    """The canary: a namespace named for a run that has ended must be reported and removed."""
    if os.geteuid() != 0:
        print("SKIP: the canary creates a network namespace: run as root")
        return 77
    ended = subprocess.Popen(["true"])
    ended.wait()  # reaped: its pid names no process now
    ns = "%s%d-n1" % (netbed.PREFIX, ended.pid)
    netbed.run("ip", "netns", "add", ns)
    status = check()
    still_there = ns in netbed.run("ip", "netns", "list", check=False).stdout
    if still_there:
        netbed.run("ip", "netns", "delete", ns, check=False)
    if status != 1 or still_there:
        print("CANARY FAILED: a planted leftover %s was %s" %
              (ns, "not reported" if status != 1 else "reported but not removed"))
        return 1
    print("canary: the planted leftover was reported and removed")
    return 0


def main():
    if not shutil.which("ip"):
        print("SKIP: no `ip` on PATH (apt-get install -y iproute2)")
        return 77
    return plant() if sys.argv[1:] == ["--plant"] else check()


if __name__ == "__main__":
    sys.exit(main())
