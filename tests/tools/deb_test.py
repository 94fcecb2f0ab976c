#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The Debian packages, end to end (python3 stdlib).

    deb_test.py BUILD_DIR CONSUMER_SOURCE_DIR

Builds the packages with `cpack -G DEB` from BUILD_DIR (already built): conclave (daemon, CLI, cert
tool, unit, example config, maintainer scripts) and conclave-dev (headers, static libraries and
CMake package in /usr/lib/<multiarch>), both versioned <version>-<Debian revision>; checks their
names and contents, installs both with `dpkg -i`, runs `systemd-analyze verify` on the installed
unit (when systemd-analyze exists), starts three conclaved processes from the INSTALLED binaries
with the unit's own ExecStart line (%i = the node id) as the unit's User=, checks that exactly one
of them leads with the installed `conclavectl status`, builds a find_package(Conclave) consumer
against /usr, then `dpkg -r conclave-dev` (headers gone), `dpkg -r conclave` with the nodes still
running (the prerm stops them, without systemd here: each exits 0; binaries gone, data kept) and
`dpkg --purge` of both (data, configs and the system user gone).

It changes the machine (a package, a system user, /etc/conclave, /var/lib/conclave), so it runs
only as root on a machine where none of those exist (CI's container); otherwise it prints why and
exits 77, which ctest reports as skipped. Loopback only, free ports, every wait bounded.
"""
import glob
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conclaved_test import free_ports  # noqa: E402  (the same helper)

SKIP = 77
UNIT = "/usr/lib/systemd/system/conclaved@.service"
IDS = ["n1", "n2", "n3"]
PACKAGES = ["conclave", "conclave-dev"]
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def skip(why):
    print("SKIPPED: deb_test: " + why, flush=True)
    sys.exit(SKIP)


def run(*args, timeout_s=120, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout_s, **kw)


def installed(package):
    r = run("dpkg-query", "-W", "-f=${Status}", package)
    return r.returncode == 0 and "install ok installed" in r.stdout


def known(package):
    """Installed, or removed with its configuration left (dpkg still knows it)."""
    r = run("dpkg-query", "-W", "-f=${Status}", package)
    return r.returncode == 0 and "not-installed" not in r.stdout


def exec_start():
    """The unit's ExecStart= line, as an argument list with %i left in."""
    with open(UNIT) as f:
        lines = [line.strip() for line in f if line.strip().startswith("ExecStart=")]
    if not check(len(lines) == 1, "the unit has one ExecStart= line (%r)" % lines):
        return None
    return shlex.split(lines[0][len("ExecStart="):])


def unit_value(key):
    with open(UNIT) as f:
        for line in f:
            if line.strip().startswith(key + "="):
                return line.strip()[len(key) + 1:]
    return None


def deb_of(debs, name, arch):
    """The one file in `debs` named <name>_<version>-<revision>_<arch>.deb, or None."""
    pattern = re.compile(r"%s_\d+\.\d+\.\d+-\d+_%s\.deb" % (re.escape(name), re.escape(arch)))
    found = [d for d in debs if pattern.fullmatch(os.path.basename(d))]
    return found[0] if len(found) == 1 else None


def holds(listing, path):
    return (" " + path + "\n") in (listing + "\n") or (" " + path + " ") in listing


def multiarch():
    r = run("dpkg-architecture", "-qDEB_HOST_MULTIARCH") if shutil.which("dpkg-architecture") \
        else run("gcc", "-print-multiarch")
    return r.stdout.strip()


def package(build, out):
    """cpack -G DEB: the runtime package and the -dev package, each checked. Returns both paths."""
    t0 = time.monotonic()
    r = run("cpack", "-G", "DEB", "-B", out, cwd=build, timeout_s=300)
    if not check(r.returncode == 0, "cpack -G DEB (%.1f s)" % (time.monotonic() - t0)):
        print(r.stdout + r.stderr)
        return None
    arch = run("dpkg", "--print-architecture").stdout.strip()
    debs = glob.glob(os.path.join(out, "*.deb"))
    names = sorted(os.path.basename(d) for d in debs)
    runtime, dev = deb_of(debs, "conclave", arch), deb_of(debs, "conclave-dev", arch)
    if not check(len(debs) == 2 and runtime and dev,
                 "two packages, conclave_<version>-<revision>_%s.deb and conclave-dev_..._%s.deb "
                 "(%r)" % (arch, arch, names)):
        return None
    for deb in (runtime, dev):
        version = run("dpkg-deb", "-f", deb, "Version").stdout.strip()
        check(re.fullmatch(r"\d+\.\d+\.\d+-\d+", version) is not None,
              "%s: the version has a Debian revision (%r)" % (os.path.basename(deb), version))
    listing = run("dpkg-deb", "-c", runtime).stdout
    for path in ["./usr/bin/conclaved", "./usr/bin/conclavectl", "./usr/bin/conclave-certs",
                 "./usr/lib/systemd/system/conclaved@.service",
                 "./usr/share/doc/conclave/examples/cluster.json",
                 "./usr/share/doc/conclave/copyright"]:
        check(holds(listing, path), "the conclave package holds " + path[1:])
    check(".a\n" not in listing + "\n" and "/usr/include/" not in listing,
          "the conclave package holds no headers or static libraries")
    listing = run("dpkg-deb", "-c", dev).stdout
    lib = "./usr/lib/" + multiarch()
    for path in ["./usr/include/conclave/node/node.hpp", lib + "/libconclave_node.a",
                 lib + "/cmake/conclave/conclave-config.cmake",
                 lib + "/cmake/conclave/conclave-config-version.cmake",
                 lib + "/pkgconfig/conclave.pc", "./usr/share/doc/conclave-dev/copyright"]:
        check(holds(listing, path), "the conclave-dev package holds " + path[1:])
    check("./usr/bin/" not in listing, "the conclave-dev package holds no programs")
    control = run("dpkg-deb", "-I", runtime).stdout
    check("postinst" in control and "postrm" in control and "prerm" in control,
          "the conclave package has postinst, prerm and postrm")
    return runtime, dev


def verify_unit():
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        print("note: systemd-analyze not found; the unit is not verified", flush=True)
        return
    # The template, instantiated: warnings (unknown keys, bad values) fail the test too.
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(UNIT, d)
        r = run(analyze, "verify", "--man=no", os.path.join(d, "conclaved@n1.service"))
    check(r.returncode == 0 and not (r.stdout + r.stderr).strip(),
          "systemd-analyze verify conclaved@n1.service: clean (%d, %r)" %
          (r.returncode, (r.stdout + r.stderr).strip()))


def write_configs(tmp):
    """The package's example config with free ports, as /etc/conclave/<id>.json for each node."""
    with open("/usr/share/doc/conclave/examples/cluster.json") as f:
        config = json.load(f)
    check(config["data_dir"] == "/var/lib/conclave/{id}" and
          config["secret_file"].startswith("/etc/conclave/") and
          config["admin"]["token_file"].startswith("/etc/conclave/"),
          "the example config keeps data in /var/lib/conclave/{id} and secrets in /etc/conclave")
    ports = free_ports(2 * len(IDS))
    config["nodes"] = [{"id": nid, "peer": "127.0.0.1:%d" % ports[2 * i],
                        "http": "127.0.0.1:%d" % ports[2 * i + 1]} for i, nid in enumerate(IDS)]
    config["profile"] = "fast"
    user = pwd.getpwnam("conclave")
    for path, text in [(config["secret_file"], os.urandom(32).hex() + "\n"),
                       (config["admin"]["token_file"], os.urandom(16).hex() + "\n")]:
        with open(path, "w") as f:
            f.write(text)
        os.chown(path, user.pw_uid, user.pw_gid)
        os.chmod(path, 0o600)
    for nid in IDS:
        path = "/etc/conclave/%s.json" % nid
        with open(path, "w") as f:
            json.dump(config, f, indent=2)
        os.chown(path, 0, user.pw_gid)  # root:conclave 0640, as the README says
        os.chmod(path, 0o640)
    return config


def start_nodes(argv_template, tmp):
    """One conclaved per id, as the unit would start it: ExecStart with %i, as User=."""
    user = unit_value("User")
    check(user == "conclave", "the unit runs as User=conclave (%r)" % user)
    procs = {}
    for nid in IDS:
        argv = [a.replace("%i", nid) for a in argv_template]
        # setpriv (util-linux) drops to the unit's user and group, as systemd would.
        cmd = ["setpriv", "--reuid=conclave", "--regid=conclave", "--init-groups", *argv]
        log = open(os.path.join(tmp, nid + ".log"), "w")
        procs[nid] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log)
    return procs


def one_leader(config):
    """Polls the installed conclavectl status until exactly one node leads (bounded)."""
    deadline = time.monotonic() + 30
    rows = None
    while time.monotonic() < deadline:
        # Reads need the token (admin.open_reads is false by default).
        r = run("/usr/bin/conclavectl", "--config", "/etc/conclave/n1.json", "--token-file",
                config["admin"]["token_file"], "-o", "json", "status", timeout_s=30)
        if r.returncode == 0:
            rows = json.loads(r.stdout)
            leaders = [row["id"] for row in rows if row.get("role") == "leader"]
            agreed = {row.get("leader") for row in rows}
            if len(leaders) == 1 and agreed == {leaders[0]}:
                return leaders[0]
        time.sleep(0.2)
    check(False, "conclavectl status: one leader within 30 s (last: %r)" % rows)
    return None


def stop_nodes(procs):
    for proc, _ in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    codes = {}
    for nid, (proc, log) in procs.items():
        try:
            codes[nid] = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            codes[nid] = proc.wait()
        log.close()
    return codes


def build_consumer(consumer, tmp):
    t0 = time.monotonic()
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    b = os.path.join(tmp, "consumer")
    r = run("cmake", "-S", consumer, "-B", b, *generator, "-DCONSUMER_PACKAGE_NAME=Conclave")
    if r.returncode == 0:
        r = run("cmake", "--build", b, timeout_s=300)
    if r.returncode == 0:
        r = run(os.path.join(b, "consumer"))
    check(r.returncode == 0 and "consumer ok" in r.stdout,
          "find_package(Conclave) against the installed package: configure, build, run (%.1f s)"
          % (time.monotonic() - t0))
    if r.returncode != 0:
        print(r.stdout + r.stderr)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build, consumer = sys.argv[1], sys.argv[2]
    if os.geteuid() != 0:
        skip("needs root (dpkg -i, a system user); run it as root in a throw-away container")
    for tool in ["dpkg", "dpkg-deb", "cpack", "cmake", "setpriv"]:
        if not shutil.which(tool):
            skip(tool + " not found")
    for name in PACKAGES:
        if known(name):
            skip("a %s package is already on this machine; not touching it" % name)
    for path in ["/etc/conclave", "/var/lib/conclave"]:
        if os.path.exists(path):
            skip(path + " exists; not touching it")
    try:
        pwd.getpwnam("conclave")
        skip("a user named conclave exists; not touching it")
    except KeyError:
        pass

    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="conclave-deb-")
    procs = {}
    try:
        debs = package(build, os.path.join(tmp, "out"))
        if debs is None:
            return 1
        r = run("dpkg", "-i", *debs)
        if not check(r.returncode == 0 and all(installed(p) for p in PACKAGES),
                     "dpkg -i: conclave and conclave-dev installed"):
            print(r.stdout + r.stderr)
            return 1
        try:
            user = pwd.getpwnam("conclave")
            check(user.pw_uid < 1000 and user.pw_shell.endswith("nologin"),
                  "postinst: system user conclave without a login shell")
        except KeyError:
            check(False, "postinst: system user conclave")
        for path, owner, mode in [("/var/lib/conclave", "conclave", 0o750),
                                  ("/etc/conclave", "root", 0o750)]:
            st = os.stat(path) if os.path.isdir(path) else None
            check(st is not None and pwd.getpwuid(st.st_uid).pw_name == owner and
                  (st.st_mode & 0o777) == mode,
                  "postinst: %s owned by %s, mode %o" % (path, owner, mode))
        unit = open(UNIT).read()
        for line in ["Restart=on-failure", "User=conclave", "NoNewPrivileges=yes",
                     "ProtectSystem=strict", "ReadWritePaths=/var/lib/conclave/%i"]:
            check(line in unit.splitlines(), "the unit says " + line)
        verify_unit()

        argv = exec_start()
        check(argv is not None and argv[0] == "/usr/bin/conclaved" and
              "/etc/conclave/%i.json" in argv, "ExecStart runs /usr/bin/conclaved with "
              "/etc/conclave/%%i.json (%r)" % argv)
        config = write_configs(tmp)
        procs = start_nodes(argv, tmp)
        leader = one_leader(config)
        check(leader in IDS, "installed conclavectl status: exactly one leader (%r)" % leader)
        for nid in IDS:
            st = os.stat("/var/lib/conclave/" + nid) if os.path.isdir(
                "/var/lib/conclave/" + nid) else None
            check(st is not None and pwd.getpwuid(st.st_uid).pw_name == "conclave",
                  "node %s keeps its data in /var/lib/conclave/%s, owned by conclave" % (nid, nid))
        if failures:
            for nid in IDS:
                print("--- %s.log" % nid)
                print(open(os.path.join(tmp, nid + ".log")).read()[-3000:])

        build_consumer(consumer, tmp)

        r = run("dpkg", "-r", "conclave-dev")
        check(r.returncode == 0 and not installed("conclave-dev") and installed("conclave") and
              not any(os.path.exists(p) for p in
                      ["/usr/include/conclave", "/usr/lib/%s/cmake/conclave" % multiarch()]),
              "dpkg -r conclave-dev: headers and CMake files gone, conclave stays")
        # The nodes still run: the prerm stops them (SIGTERM, graceful) with or without systemd.
        r = run("dpkg", "-r", "conclave")
        check(r.returncode == 0 and not installed("conclave"), "dpkg -r conclave: removed")
        codes = {nid: proc.poll() for nid, (proc, _) in procs.items()}
        check(all(c == 0 for c in codes.values()),
              "dpkg -r conclave: prerm stopped every running node, each exited 0 (%r)" % codes)
        stop_nodes(procs)
        procs = {}
        check(not any(os.path.exists(p) for p in
                      ["/usr/bin/conclaved", "/usr/bin/conclavectl", "/usr/bin/conclave-certs",
                       UNIT]),
              "dpkg -r: binaries and unit gone")
        check(os.path.isdir("/var/lib/conclave/n1") and os.path.isfile("/etc/conclave/n1.json"),
              "dpkg -r: data and configs kept")
        r = run("dpkg", "--purge", *PACKAGES)
        check(r.returncode == 0 and not any(known(p) for p in PACKAGES),
              "dpkg --purge conclave conclave-dev: purged")
        gone = not os.path.exists("/var/lib/conclave") and not os.path.exists("/etc/conclave")
        check(gone, "dpkg --purge: /var/lib/conclave and /etc/conclave gone")
        try:
            pwd.getpwnam("conclave")
            check(False, "dpkg --purge: user conclave gone")
        except KeyError:
            check(True, "dpkg --purge: user conclave gone")
    finally:
        if procs:
            stop_nodes(procs)
        leftover = [p for p in PACKAGES if known(p)]
        if leftover:
            run("dpkg", "--purge", *leftover)
        shutil.rmtree(tmp, ignore_errors=True)
    print("deb test: %s in %.1f s" % ("FAILED" if failures else "ok", time.monotonic() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
