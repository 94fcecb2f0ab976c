#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Mutation check of the specs and of the C++ cores (docs/mutation.md).

Applies each listed mutant to the work tree (one exact text replacement), runs the checks that
must kill it, restores the file, and reports killed / survived per mutant. A mutant is killed
when one of its checks fails. Before the mutants, the same checks run on the unmutated tree and
must pass (a check that fails anyway kills nothing).

  scripts/mutation-check.py                 every mutant
  scripts/mutation-check.py --list          the kill list (mutant, file, checks)
  scripts/mutation-check.py ID...           only these mutants
  scripts/mutation-check.py --kind spec     only the spec (or cpp) mutants
  scripts/mutation-check.py --no-baseline   skip the unmutated run

Spec checks run tla/check.sh on entries that must pass (TLA2TOOLS_JAR, as for tla/check.sh);
C++ checks build the release flavour (scripts/build.sh) and run CTest tests. Exit 0 when every
mutant has its expected verdict (killed, or for an equivalent mutant survived), 1 otherwise.
The file is restored after each mutant, also on Ctrl-C; the release build is rebuilt from the
restored sources at the end.
"""
import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Mutant:
    id: str
    kind: str  # "spec" or "cpp"
    path: str  # relative to the repository
    old: str  # exact text, must occur once
    new: str
    what: str
    checks: list = field(default_factory=list)  # spec: check.sh entries; cpp: CTest names
    targets: list = field(default_factory=list)  # cpp: CMake targets to build
    equivalent: str = ""  # an equivalent mutant: where the argument why it is safe is written


def planted(cfg, bug, what, checks, equivalent=""):
    """A spec mutant switched on in a must-pass model's cfg (PlantedBug = "None" -> bug)."""
    return Mutant(f"spec:{bug}", "spec", f"tla/{cfg}", 'PlantedBug = "None"',
                  f'PlantedBug = "{bug}"', what, checks, [], equivalent)


def switch(cfg, const, what, checks):
    """A spec mutant that turns a rule of a must-pass model off (CONST = TRUE -> FALSE)."""
    return Mutant(f"spec:{const}", "spec", f"tla/{cfg}", f"{const} = TRUE", f"{const} = FALSE",
                  what, checks)


ELECTOR = "elector/src/elector.cpp"
ELECTOR_CHECKS = dict(checks=["elector_tests"], targets=["elector_tests"])

MUTANTS = [
    # ---- the specs: each rule off in the must-pass model that must catch it ----
    planted("ElectorTransfer.cfg", "KeepLeadingOnHeartbeatResponse",
            "a leader keeps leading after a HeartbeatResponse of a higher term",
            ["ElectorTransfer.cfg"]),
    planted("ElectorTransfer.cfg", "KeepLeadingOnNewerHeartbeat",
            "a leader keeps leading after a heartbeat of a higher term", ["ElectorTransfer.cfg"]),
    planted("ElectorSafety.cfg", "DoubleVote", "a follower votes twice in a term",
            ["ElectorSafety.cfg"]),
    planted("ElectorSafety.cfg", "MinorityQuorum", "a minority elects", ["ElectorSafety.cfg"]),
    planted("ElectorSafety.cfg", "SkipStickyLeader", "a follower with a leader votes",
            ["ElectorSafety.cfg"]),
    planted("ElectorRounds.cfg", "CountStaleScoutingReplies",
            "replies of an older scouting round are counted", ["ElectorRounds.cfg"]),
    planted("LogSafety.cfg", "CommitWithoutQuorum", "the log commits without a quorum",
            ["LogSafety.cfg"]),
    planted("LogSafety.cfg", "SkipSync", "a new leader skips its sync", ["LogSafety.cfg"]),
    planted("LeaseSafety.cfg", "IgnoreDrift", "the lease lasts E, not shortened by the drift",
            ["LeaseSafety.cfg"]),
    planted("LeaseSafety.cfg", "VoteInsidePromise", "a follower votes inside its promise",
            ["LeaseSafety.cfg"]),
    planted("LeaseSafety.cfg", "KeepPromiseOnPeerDown",
            "the leader keeps a closed connection's promise", ["LeaseSafety.cfg"]),
    planted("LeaseSafety.cfg", "ForgetPromiseOnRestart", "a restarted node promises nothing",
            ["LeaseSafety.cfg"]),
    planted("LeaseSafety.cfg", "GrantAnyTransfer",
            "a follower grants every transfer proposal inside its promise", ["LeaseSafety.cfg"],
            equivalent="docs/tla-lease.md, \"Transfer proposals inside a promise\""),
    planted("ElectorLeaseLinkLoss.cfg", "PromiseEndsOnLocalClose",
            "a follower's own closure of its leader's link ends its promise",
            ["ElectorLeaseLinkLoss.cfg"]),
    planted("IdentitySafety.cfg", "AdmitAny", "peers admit any incarnation",
            ["IdentitySafety.cfg"]),
    switch("IdentitySafety.cfg", "FreshNeedsMajority", "the guard without quarantine",
           ["IdentitySafety.cfg"]),
    # ---- the C++ cores: lease and identity ----
    Mutant("cpp:lease-without-drift", "cpp", ELECTOR,
           "return planted(PlantedBug::LeaseIgnoresDrift) ? promise_duration_ : lease_duration_;",
           "return promise_duration_;", "the leader's lease not shortened by the drift bound",
           **ELECTOR_CHECKS),
    Mutant("cpp:no-start-promise", "cpp", ELECTOR,
           "return lease_.start_promise_until && now_ < *lease_.start_promise_until;",
           "return false;", "a started node promises nothing", **ELECTOR_CHECKS),
    Mutant("cpp:vote-inside-promise", "cpp", ELECTOR,
           "if (sticky && (PromiseHolds() || StartPromiseHolds())) {", "if (false) {",
           "a follower votes inside its promise", **ELECTOR_CHECKS),
    Mutant("cpp:promise-ended-by-every-peer-down", "cpp", ELECTOR,
           "((state_.leader == peer && proof) || state_.tentative_leader == peer)) {", "true) {",
           "every peer_down ends a follower's promise", **ELECTOR_CHECKS),
    Mutant("cpp:ack-before-peer-down-renews", "cpp", ELECTOR,
           "if (down && sent.sent_at <= *down) {", "if (false) {",
           "an ack of a round sent before the follower's peer_down renews the lease",
           **ELECTOR_CHECKS),
    Mutant("cpp:any-incarnation-admitted", "cpp", "node/src/identity.cpp",
           "if (it != known_.end() && !repaired) {", "if (false) {",
           "a peer of a new incarnation is admitted without repair",
           checks=["node_tests"], targets=["node_tests"]),
]


def run(cmd, log):
    with open(log, "a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        return subprocess.call(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def checks_pass(m, log):
    """True when every check of m passes on the tree as it is."""
    if m.kind == "spec":
        return run([os.path.join(ROOT, "tla", "check.sh")] + m.checks, log) == 0
    if run([os.path.join(ROOT, "scripts", "build.sh"), "release"] + m.targets, log) != 0:
        return False  # a mutant that does not compile is killed by the compiler
    regex = "^(" + "|".join(m.checks) + ")$"
    return run(["ctest", "--test-dir", "build/release", "-R", regex, "--output-on-failure"],
               log) == 0


def apply(m):
    path = os.path.join(ROOT, m.path)
    with open(path) as f:
        text = f.read()
    if text.count(m.old) != 1:
        raise SystemExit(f"{m.id}: '{m.old}' occurs {text.count(m.old)} times in {m.path}: "
                         "the source changed, update the mutant in scripts/mutation-check.py")
    with open(path, "w") as f:
        f.write(text.replace(m.old, m.new))
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ids", nargs="*")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--kind", choices=["spec", "cpp"])
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--log", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                 "conclave-mutation.log"))
    a = ap.parse_args()
    chosen = [m for m in MUTANTS if (not a.ids or m.id in a.ids) and
              (not a.kind or m.kind == a.kind)]
    unknown = set(a.ids) - {m.id for m in MUTANTS}
    if unknown:
        raise SystemExit(f"unknown mutant(s): {' '.join(sorted(unknown))} (see --list)")
    if a.list:
        for m in chosen:
            verdict = f"survives (equivalent: {m.equivalent})" if m.equivalent else "killed"
            print(f"{m.id:44} {m.path:28} {' '.join(m.checks):24} {verdict}\n    {m.what}")
        return 0
    open(a.log, "w").close()
    print(f"log: {a.log}")
    failed = 0
    if not a.no_baseline:
        seen = set()
        for m in chosen:
            key = (m.kind, tuple(m.checks), tuple(m.targets))
            if key in seen:
                continue
            seen.add(key)
            if not checks_pass(m, a.log):
                print(f"baseline: {' '.join(m.checks)} fails without any mutant; see the log")
                return 1
        print("baseline: every check passes unmutated")
    for m in chosen:
        start = time.time()
        text = apply(m)
        try:
            killed = not checks_pass(m, a.log)
        finally:
            with open(os.path.join(ROOT, m.path), "w") as f:
                f.write(text)
        want_killed = not m.equivalent
        ok = killed == want_killed
        failed |= not ok
        verdict = "killed" if killed else "SURVIVED"
        if m.equivalent:
            verdict += " (equivalent: expected to survive)" if not killed else \
                " (UNEXPECTED: an equivalent mutant was killed)"
        print(f"{m.id:44} {verdict:10} {time.time() - start:6.0f}s  {m.what}", flush=True)
    cpp_targets = sorted({t for m in chosen if m.kind == "cpp" for t in m.targets})
    if cpp_targets:  # the release build back to the unmutated sources
        run([os.path.join(ROOT, "scripts", "build.sh"), "release"] + cpp_targets, a.log)
    print("mutation check:", "every mutant has its expected verdict" if not failed else "FAILED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
