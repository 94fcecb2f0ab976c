#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""HTTPS admin API, end to end with real processes (python3 stdlib).

    admin_https_test.py CONCLAVED CONCLAVECTL CONCLAVE_CERTS

Certificates from conclave-certs; one conclaved (a one-node cluster with a secret, a token and
"admin": {"tls": true}) on 127.0.0.1: /healthz answers over https and verifies against the
cluster CA, plain http gets no answer, a POST still needs the token, conclavectl talks to it
with --cacert and with --config; half-configured TLS admin configs are refused (exit 2). Every
wait is bounded; a few seconds in all.
"""
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from conclaved_test import free_ports  # noqa: E402  (the same helper)

DAEMON, CTL, CERTS = sys.argv[1], sys.argv[2], sys.argv[3]
WAIT_S = 15.0
failures = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def https(port, method, path, ca, headers=None, body=None):
    context = ssl.create_default_context(cafile=ca)  # verifies the chain and the name
    c = http.client.HTTPSConnection("127.0.0.1", port, timeout=3, context=context)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return r.status, data


def pipelined(port, ca, token, n):
    """n writes of keys pk0.. sent in one TLS write (HTTP/1.1 pipelining): (status, body) each."""
    context = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        requests = b""
        for i in range(n):
            body = json.dumps({"key": "pk%d" % i, "value": str(i)}).encode()
            requests += (b"POST /metadata HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Authorization: Bearer " + token.encode() + b"\r\n"
                         b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                         % len(body)) + body
        tls.sendall(requests)
        reader = tls.makefile("rb")
        answers = []
        for _ in range(n):
            status = int(reader.readline().split()[1])
            length = 0
            for line in iter(reader.readline, b"\r\n"):
                name, _, value = line.decode().partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            answers.append((status, json.loads(reader.read(length))))
        return answers


def plain_http(port):
    """The status of a plain-HTTP GET, or None when no HTTP answer came."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
        c.request("GET", "/healthz")
        return c.getresponse().status
    except (OSError, http.client.HTTPException):
        return None


def secret_file(path):
    with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    return path


def main():
    root = tempfile.mkdtemp(prefix="conclave-https-")
    certs = os.path.join(root, "certs")
    for args in (["create-ca", "--dir", certs],
                 ["create-node", "--dir", certs, "--id", "n1", "--host", "127.0.0.1"],
                 ["create-ca", "--dir", os.path.join(root, "other")]):
        r = subprocess.run([CERTS] + args, capture_output=True, text=True, timeout=WAIT_S)
        check(r.returncode == 0, "conclave-certs %s (%s)" % (args[0], r.stderr.strip()))
    ca = os.path.join(certs, "ca.pem")
    token_path = secret_file(os.path.join(root, "token"))
    token = open(token_path).read().strip()
    peer, port = free_ports(2)
    base = {"cluster": "https", "profile": "fast", "data_dir": os.path.join(root, "{id}"),
            "nodes": [{"id": "n1", "peer": "127.0.0.1:%d" % peer, "http": "127.0.0.1:%d" % port}],
            "secret_file": secret_file(os.path.join(root, "secret")),
            "tls": {"ca": ca, "cert": os.path.join(certs, "n1.pem"),
                    "key": os.path.join(certs, "n1.key")},
            "admin": {"token_file": token_path, "tls": True}}

    def write(name, doc):
        path = os.path.join(root, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    # Half-configured TLS admin configs are refused before anything starts, naming the field.
    no_tls = dict(base)
    del no_tls["tls"]
    no_key = dict(base, admin={"token_file": token_path,
                               "tls": {"cert": os.path.join(certs, "n1.pem")}})
    missing = dict(base, admin={"token_file": token_path,
                                "tls": {"cert": os.path.join(root, "nope.pem"),
                                        "key": os.path.join(certs, "n1.key")}})
    for name, doc, expected in [("no-tls.json", no_tls, "admin.tls: true serves HTTPS"),
                                ("no-key.json", no_key, "admin.tls.key: missing"),
                                ("missing.json", missing, "admin.tls.cert: cannot read")]:
        r = subprocess.run([DAEMON, "--config", write(name, doc), "--node-id", "n1"],
                           capture_output=True, text=True, timeout=WAIT_S)
        check(r.returncode == 2 and expected in r.stderr,
              "%s refused: exit 2 naming the field (%d, %r)" % (name, r.returncode,
                                                                 r.stderr.strip()))

    config = write("cluster.json", base)
    log = open(os.path.join(root, "n1.log"), "w")
    daemon = subprocess.Popen([DAEMON, "--config", config, "--node-id", "n1"], stderr=log)
    try:
        deadline = time.monotonic() + WAIT_S
        status = None
        while time.monotonic() < deadline and status != 200:
            try:
                status, _ = https(port, "GET", "/healthz", ca)
            except (OSError, http.client.HTTPException):
                time.sleep(0.05)
        check(status == 200, "GET /healthz over https, verified with the cluster CA: 200")
        check(plain_http(port) is None, "plain http to the https port gets no HTTP answer")
        other_ca = os.path.join(root, "other", "ca.pem")
        try:
            https(port, "GET", "/healthz", other_ca)
            check(False, "a client trusting another CA refuses the node's certificate")
        except ssl.SSLError:
            check(True, "a client trusting another CA refuses the node's certificate")
        json_type = {"Content-Type": "application/json"}
        status, body = https(port, "POST", "/step-down", ca, json_type, "{}")
        check(status == 401, "POST over https without the token: 401 (%s)" % body.strip())
        status, body = https(port, "POST", "/step-down", ca,
                             dict(json_type, Authorization="Bearer " + token), "{}")
        check(status != 401 and status != 403, "POST with the token passes the checks (%d)" % status)

        endpoint = "127.0.0.1:%d" % port
        r = subprocess.run([CTL, "--endpoints", endpoint, "--cacert", ca, "--token-file",
                            token_path, "-o", "json", "status"],
                           capture_output=True, text=True, timeout=WAIT_S)
        check(r.returncode == 0 and '"id": "n1"' in r.stdout,
              "conclavectl --cacert status over https (%d, %r)" % (r.returncode, r.stderr.strip()))
        # The node may still be electing itself or syncing its log: conclavectl put retries the
        # 503s that appended nothing (no_leader, not_active) until its --timeout.
        r = subprocess.run([CTL, "--config", config, "--token-file", token_path, "--timeout", "10",
                            "put", "k", "1"], capture_output=True, text=True, timeout=WAIT_S + 10)
        check(r.returncode == 0,
              "conclavectl --config (its tls.ca) put over https (%d, %r)" % (r.returncode,
                                                                             r.stderr.strip()))
        answers = pipelined(port, ca, token, 4)
        lsns = [(a[1]["lsn"]["term"], a[1]["lsn"]["counter"]) for a in answers if a[0] == 200]
        check(len(lsns) == 4 and lsns == sorted(set(lsns)),
              "4 writes pipelined over https in one write: 4 answers in order (%r)" % answers)
        for extra in ([], ["--token-file", token_path]):
            r = subprocess.run([CTL, "--endpoints", endpoint, "--timeout", "2", *extra, "status"],
                               capture_output=True, text=True, timeout=WAIT_S)
            check(r.returncode == 2 and "this endpoint speaks HTTPS: pass --cacert" in r.stderr,
                  "conclavectl over plain http to it %s: exit 2, says it speaks HTTPS (%d, %r)"
                  % (" ".join(extra), r.returncode, r.stderr.strip()))
        r = subprocess.run([CTL, "--endpoints", endpoint, "--cacert", other_ca, "--timeout", "2",
                            "status"], capture_output=True, text=True, timeout=WAIT_S)
        check(r.returncode == 4 and "certificate verify failed" in r.stdout + r.stderr,
              "conclavectl trusting another CA: refused (%d, %r)" % (r.returncode,
                                                                     r.stderr.strip()))
    finally:
        daemon.terminate()
        try:
            code = daemon.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            daemon.kill()
            code = daemon.wait()
        check(code == 0, "conclaved stops cleanly on SIGTERM (exit %s)" % code)
        log.close()
        shutil.rmtree(root, ignore_errors=True)
    if failures:
        print("%d FAILED:\n  %s" % (len(failures), "\n  ".join(failures)))
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
