#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Merges the per-node traces of real daemons (conclaved --trace-elector FILE) into one trace in
the simulator's format (docs/tla-traces.md), for tla/validate-trace.sh.

    merge_daemon_traces.py OUT.ndjson TRACE.ndjson...

Each input file holds the processes of one node, each a `header` line then its `step` lines; a
node's processes are taken in the order of the arguments, then of the file (one file per node,
appended to by every process, is the usual shape). The merged order:

* each node's steps in its own order; between two processes of a node, a `Crash` step (what the
  process leaves behind: its term and vote; Elector.tla's Crash), and the new process's first
  `Start` becomes `Restart` when it is the process's first step (Elector.tla's Restart: a core
  built from the durable state, then start());
* every receive after its send. The mesh delivers each ordered link (sender, receiver) in order
  and a link's reset drops what was in flight, so the messages a node received from a peer are a
  subsequence of those the peer sent it: each receive is matched to the first unmatched send with
  the same fields after the previous match (a message sent but never received stays in flight,
  which the spec's network allows). A receive that matches no send is refused (exit 1), naming
  it.
* among the steps that may go next, the earliest by the recorded wall clock (only a tie-break:
  the order is a valid interleaving whatever the clocks say).

A line that is not JSON is refused, unless it is the last line of a file and incomplete (no
newline after it): a process killed while it wrote a line (the daemon writes each line in one
write(2), so only a stopped machine or a full disk leaves one). Exit 0 merged, 1 refused (a
receive with no send, steps that cannot be ordered), 2 bad input.
"""
import heapq
import json
import sys

HEADER_KEYS = ("nodes", "quorum", "scouting", "check_quorum", "heartbeat_check_misses")


class MergeError(Exception):
    def __init__(self, message, status=2):
        super().__init__(message)
        self.status = status


def read_lines(path):
    """The JSON records of a file with their line numbers; an incomplete last line is dropped."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise MergeError(f"{path}: cannot read: {e.strerror}")
    lines = text.split("\n")
    torn = lines.pop()  # after the last newline: "" unless the last line is incomplete
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append((number, json.loads(line)))
        except json.JSONDecodeError as e:
            raise MergeError(f"{path}:{number}: not JSON ({e})")
    if torn.strip():
        print(f"merge_daemon_traces: {path}:{len(lines) + 1}: incomplete last line dropped "
              "(the process ended while writing it)", file=sys.stderr)
    return records


def crash_state(last, nodes):
    """What a crashed process leaves behind: its term and vote (Elector.tla's Restored)."""
    return {
        "role": "stopped", "term": last["term"] if last else 0,
        "voted_for": last["voted_for"] if last else None, "leader": None,
        "tentative_leader": None, "supporters": [], "refusals": [], "heard_since_check": [],
        "peers_up": [], "missed_checks": 0, "round": {"id": 0, "term": 0, "yes": [], "no": []},
        "last_round_id": 0, "lsn": {"term": 0, "counter": 0}, "armed_timers": [],
        "voters": last.get("voters", list(range(nodes))) if last else list(range(nodes)),
        "config_version": last.get("config_version", 0) if last else 0,
    }


class Merger:
    def __init__(self):
        self.header = None
        self.steps = {}       # node -> [step record], its own order
        self.last = {}        # node -> last state seen
        self.processes = {}   # node -> number of processes seen

    def check_header(self, h, where):
        for key in HEADER_KEYS:
            if key not in h:
                raise MergeError(f"{where}: header without {key}")
        if h.get("version") != 1:
            raise MergeError(f"{where}: header version {h.get('version')!r}, expected 1")
        if self.header is None:
            self.header = h
        elif any(h[k] != self.header[k] for k in HEADER_KEYS):
            raise MergeError(f"{where}: header disagrees with the first one on "
                             f"{[k for k in HEADER_KEYS if h[k] != self.header[k]]}")
        node = h.get("node")
        if not isinstance(node, int) or isinstance(node, bool) or not 0 <= node < h["nodes"]:
            raise MergeError(f"{where}: header.node: expected a node index, got {node!r}")
        return node

    def begin_process(self, node, h, where):
        count = self.processes.get(node, 0)
        self.processes[node] = count + 1
        restored = h.get("restored", {"term": 0, "voted_for": None})
        steps = self.steps.setdefault(node, [])
        if count == 0:
            if restored.get("term") != 0 or restored.get("voted_for") is not None:
                raise MergeError(f"{where}: the node's first process restored term "
                                 f"{restored.get('term')}: a trace starts from empty data "
                                 "directories (Elector.tla's InitFresh)")
            return
        state = crash_state(self.last.get(node), self.header["nodes"])
        if (restored.get("term"), restored.get("voted_for")) != (state["term"],
                                                                 state["voted_for"]):
            print(f"merge_daemon_traces: {where}: the process restored term "
                  f"{restored.get('term')} vote {restored.get('voted_for')}, its predecessor's "
                  f"last step held term {state['term']} vote {state['voted_for']} (killed "
                  "between a step and its state write?)", file=sys.stderr)
        steps.append({"kind": "step", "node": node, "action": "Crash", "sent": [],
                      "state": state, "wall_ms": h.get("wall_ms", 0), "src": f"{where} (crash)"})
        self.last[node] = state

    def add_file(self, path):
        node = None
        first = False
        for number, rec in read_lines(path):
            where = f"{path}:{number}"
            kind = rec.get("kind") if isinstance(rec, dict) else None
            if kind == "header":
                node = self.check_header(rec, where)
                self.begin_process(node, rec, where)
                first = True
                continue
            if kind != "step":
                raise MergeError(f"{where}: expected a header or step record, got {kind!r}")
            if node is None:
                raise MergeError(f"{where}: a step before any header")
            if rec.get("node") != node:
                raise MergeError(f"{where}: step of node {rec.get('node')!r} in a process of "
                                 f"node {node}")
            if not isinstance(rec.get("sent"), list) or not isinstance(rec.get("state"), dict):
                raise MergeError(f"{where}: a step needs `sent` (array) and `state` (object)")
            step = dict(rec, src=where)
            if first and step.get("action") == "Start" and self.processes[node] > 1:
                step["action"] = "Restart"
            first = False
            self.steps[node].append(step)
            self.last[node] = rec["state"]

    def match(self):
        """For each receive, the (node, index) of its send; per-link FIFO."""
        sends = {}  # (from, to) -> [(index, message)] in the sender's order
        for node, steps in self.steps.items():
            for i, step in enumerate(steps):
                for m in step["sent"]:
                    sends.setdefault((node, m.get("to")), []).append((i, m))
        cursor = {}
        source = {}
        for node, steps in self.steps.items():
            for i, step in enumerate(steps):
                if not str(step.get("action", "")).startswith("Handle"):
                    continue
                msg = step.get("msg")
                if not isinstance(msg, dict):
                    raise MergeError(f"{step['src']}: a receive without `msg`")
                link = (msg.get("from"), node)
                queue = sends.get(link, [])
                k = cursor.get(link, 0)
                while k < len(queue) and queue[k][1] != msg:
                    k += 1
                if k == len(queue):
                    raise MergeError(
                        f"{step['src']}: node {node} received {json.dumps(msg)} from node "
                        f"{msg.get('from')}, which sent no such message on that link after "
                        "the one matched before (per-link FIFO)", status=1)
                source[(node, i)] = (link[0], queue[k][0])
                cursor[link] = k + 1
        return source

    def order(self):
        source = self.match()
        done = {node: 0 for node in self.steps}  # steps of each node already placed
        merged = []
        ready = []

        def offer(node):
            i = done[node]
            if i >= len(self.steps[node]):
                return
            dep = source.get((node, i))
            if dep is None or done[dep[0]] > dep[1]:
                heapq.heappush(ready, (self.steps[node][i].get("wall_ms", 0), node, i))

        for node in self.steps:
            offer(node)
        waiting = {}  # (sender, index) -> [receiving node] blocked on that send
        for (node, i), dep in source.items():
            waiting.setdefault(dep, []).append((node, i))
        while ready:
            _, node, i = heapq.heappop(ready)
            merged.append(self.steps[node][i])
            done[node] = i + 1
            offer(node)
            for other, j in waiting.get((node, i), []):
                if done[other] == j:
                    offer(other)
        left = [(n, done[n]) for n in self.steps if done[n] < len(self.steps[n])]
        if left:
            n, i = left[0]
            raise MergeError(f"{self.steps[n][i]['src']}: steps that cannot be ordered (a "
                             "receive waits for a send that comes after it)", status=1)
        return merged

    def output(self):
        if self.header is None:
            raise MergeError("no header in any input")
        head = {"kind": "header", "version": 1}
        head.update({k: self.header[k] for k in HEADER_KEYS})
        head["source"] = "conclaved --trace-elector, merged by tla/merge_daemon_traces.py"
        lines = [json.dumps(head)]
        for k, step in enumerate(self.order(), start=1):
            out = {"kind": "step", "step": k}
            out.update({key: v for key, v in step.items()
                        if key not in ("kind", "seq")})
            lines.append(json.dumps(out))
        return "\n".join(lines) + "\n", len(lines) - 1


def main(argv):
    if len(argv) < 3:
        print("usage: merge_daemon_traces.py OUT.ndjson TRACE.ndjson...", file=sys.stderr)
        return 2
    merger = Merger()
    try:
        for path in argv[2:]:
            merger.add_file(path)
        text, count = merger.output()
    except MergeError as e:
        print(f"merge_daemon_traces: {e}", file=sys.stderr)
        return e.status
    with open(argv[1], "w", encoding="utf-8") as f:
        f.write(text)
    print(f"merge_daemon_traces: {count} steps of {len(merger.steps)} nodes "
          f"({sum(merger.processes.values())} processes) -> {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
