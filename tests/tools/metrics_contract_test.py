#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The metrics contract against live /metrics of three real conclaved (python3 stdlib).

    metrics_contract_test.py promtool  CONCLAVED
        `promtool check metrics` (Prometheus' linter: naming conventions, _total, units, HELP)
        passes on every node's /metrics. promtool comes from Debian's prometheus package
        (scripts/install-deps.sh); without it the test says so and exits 77 (ctest: skipped).
    metrics_contract_test.py dashboard CONCLAVED DASHBOARD_JSON
        every metric name (and label name in a matcher) that an expression of the Grafana
        dashboard uses exists in the live /metrics output, and the panels the README promises are
        there: the dashboard cannot drift from the daemon.

Both modes first check that their checker bites (a canary it must reject), then run three nodes on
127.0.0.1 (free ports, "fast" profile), commit one metadata entry through the leader (so that the
commit-latency histogram has a sample), and read /metrics from each node. Every wait is bounded.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conclaved_test as ct  # noqa: E402

check = ct.check
SKIP = 77
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? ')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"')
# A metric selector in PromQL: name, optionally followed by {matchers}.
SELECTOR = re.compile(r'\b(conclave_[a-zA-Z0-9_]*)(\{([^}]*)\})?')
MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"')
# Labels Prometheus adds when it scrapes a target.
TARGET_LABELS = {"job", "instance"}
# Panels the README promises, each with a metric one of its expressions must use.
REQUIRED_PANELS = {
    "Role": "conclave_role",
    "Term": "conclave_term",
    "Leader changes": "conclave_leader_changes_total",
    "Failover time": "conclave_leaderless_periods_seconds_bucket",
    "Commit latency": "conclave_metadata_commit_latency_seconds_bucket",
    "Peer health": "conclave_peer_up",
}


def series(text):
    """{sample name: set of label names} of a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m:
            out.setdefault(m.group(1), set()).update(LABEL.findall(m.group(3) or ""))
    return out


def sample_value(text, name, labels=""):
    for line in text.splitlines():
        if line.startswith(name + labels + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def live_metrics(root):
    """Three nodes, one committed entry; returns ({node: /metrics text}, leader) or (None, None)."""
    cluster = ct.Cluster(root)
    try:
        for nid in cluster.ids:
            cluster.start(nid)
        agreed = ct.wait_for(cluster.agreed_leader)
        if not check(agreed, "3 nodes agree on a leader"):
            return None, None
        leader = agreed[0]
        code = cluster.write("k", "v")  # resent while the leadership moves (bounded)
        check(code == 200, "a metadata entry commits (%r)" % code)

        def all_peers_up():
            texts = {}
            for nid in cluster.ids:
                code, text = ct.request(cluster.http_ports[nid], "GET", "/metrics")
                if code != 200 or sample_value(text, "conclave_peers_up") != 2:
                    return None
                texts[nid] = text
            return texts

        texts = ct.wait_for(all_peers_up)
        check(texts is not None, "every node serves /metrics with its two peers up")
        return texts, leader
    finally:
        cluster.stop_all()


def promtool_problems(promtool, text):
    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True,
                       timeout=60)
    return r.returncode, (r.stdout + r.stderr).strip()


def test_promtool(root):
    promtool = shutil.which("promtool")
    if not promtool:
        print("SKIPPED: promtool not found (Debian package prometheus; scripts/install-deps.sh "
              "puts its promtool in /usr/local/bin)", flush=True)
        return SKIP
    # The canary: a counter without _total and a camelCase gauge are refused.
    bad = ("# HELP conclave_bad_counter x\n# TYPE conclave_bad_counter counter\n"
           "conclave_bad_counter 1\n# HELP conclave_badGauge x\n# TYPE conclave_badGauge gauge\n"
           "conclave_badGauge 1\n")
    code, out = promtool_problems(promtool, bad)
    check(code != 0 and "_total" in out, "promtool check metrics bites on a bad exposition (%r)"
          % out)
    texts, _ = live_metrics(root)
    if texts is None:
        return 1
    for nid, text in sorted(texts.items()):
        code, out = promtool_problems(promtool, text)
        check(code == 0 and not out,
              "promtool check metrics: %s's /metrics is clean (%d, %r)" % (nid, code, out))
    return 0


def dashboard_problems(dashboard, live):
    """Names and label names the dashboard's expressions use that the live output lacks, and
    promised panels that are missing."""
    problems = []
    exprs = {}
    panels = list(dashboard.get("panels", []))
    while panels:
        panel = panels.pop()
        panels.extend(panel.get("panels", []))  # rows
        for target in panel.get("targets", []):
            exprs.setdefault(panel.get("title", ""), []).append(target.get("expr", ""))
    for var in dashboard.get("templating", {}).get("list", []):
        query = var.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if var.get("type") == "query" and isinstance(query, str):
            exprs.setdefault("$" + var["name"], []).append(query)
    for title, metric in REQUIRED_PANELS.items():
        if not any(metric in e for e in exprs.get(title, [])):
            problems.append("no panel %r using %s" % (title, metric))
    for title, texts in exprs.items():
        for expr in texts:
            for m in SELECTOR.finditer(expr):
                name = m.group(1)
                if name not in live:
                    problems.append("%s: %s not in /metrics" % (title, name))
                    continue
                for label in MATCHER.findall(m.group(3) or ""):
                    if label[0] not in live[name] and label[0] not in TARGET_LABELS:
                        problems.append("%s: %s has no label %s" % (title, name, label[0]))
    return problems, sum(len(v) for v in exprs.values())


def test_dashboard(root, path):
    with open(path) as f:
        dashboard = json.load(f)
    # The canary: a misspelt metric and a label the metric does not have are both reported.
    canary_live = {"conclave_term": set(), "conclave_role": {"role"}}
    canary = {"panels": [{"title": "Role", "targets": [
        {"expr": 'conclave_role{rol="leader"} + conclave_term + conclave_terms'}]}]}
    problems, _ = dashboard_problems(canary, canary_live)
    check(any("conclave_terms not in" in p for p in problems) and
          any("no label rol" in p for p in problems),
          "the dashboard check bites on a misspelt metric and label (%r)" % problems)
    texts, leader = live_metrics(root)
    if texts is None:
        return 1
    live = {}
    for text in texts.values():
        for name, labels in series(text).items():
            live.setdefault(name, set()).update(labels)
    problems, count = dashboard_problems(dashboard, live)
    check(count >= len(REQUIRED_PANELS) and not problems,
          "every one of the dashboard's %d expressions names live metrics and labels, and it has "
          "the panels %s (problems: %r)" % (count, sorted(REQUIRED_PANELS), problems))
    # The two histograms and the peer series the dashboard plots are fed.
    leader_text = texts[leader]
    check((sample_value(leader_text, "conclave_metadata_commit_latency_seconds_count") or 0) >= 1,
          "the leader's commit-latency histogram counts the committed proposal")
    check(all((sample_value(t, "conclave_leaderless_periods_seconds_count") or 0) >= 1
              for t in texts.values()),
          "every node's failover-time histogram counts the start-up period without a leader")
    for nid, text in texts.items():
        peers = [p for p in texts if p != nid]
        check(all(sample_value(text, "conclave_peer_up", '{peer="%s"}' % p) == 1 for p in peers),
              "%s: conclave_peer_up is 1 for each of its peers" % nid)
    return 0


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("promtool", "dashboard"):
        print(__doc__)
        return 2
    ct.DAEMON = sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="conclave-metrics-") as root:
        if sys.argv[1] == "promtool":
            status = test_promtool(root)
        else:
            status = test_dashboard(root, sys.argv[3])
        if ct.failures:
            for name in sorted(os.listdir(root)):
                if name.endswith(".log"):
                    print("--- %s ---" % name)
                    with open(os.path.join(root, name)) as f:
                        print(f.read()[-3000:])
    if status == SKIP:
        return SKIP
    print("%d failure(s)" % len(ct.failures))
    return 1 if ct.failures or status else 0


if __name__ == "__main__":
    sys.exit(main())
