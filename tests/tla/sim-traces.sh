#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs conclave-sim for a few seeds (fault-free and faulty schedules), writes their NDJSON traces
# and validates each against tla/Elector.tla (with LeaseSteps: the leader lease's clock decisions
# as nondeterminism). The faulty seeds together must take the leader half of the protocol and the
# lease (tla/trace_leader_steps.py --require): a leader preempted by a higher-term heartbeat, an
# accepted transfer, a check-quorum step-down, a cession, a corroborated silence, a lease expiry
# and a start promise; a copy of a trace whose transfer was corrupted must be rejected. A
# membership run's trace must validate too, and a copy with a StaleConfig refusal turned into
# support be rejected. The lease traces must be rejected by Elector.tla without LeaseSteps
# (validate-trace.sh --no-lease-steps), which shows that the extension is what admits them.
#   tests/tla/sim-traces.sh CONCLAVE_SIM OUT_DIR
# Exit 77 (skipped) when TLC is not installed.
set -euo pipefail
sim=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
tla=$(cd "$here/../../tla" && pwd)
source "$tla/tlc-env.sh"   # exits 77 without TLC
mkdir -p "$out"
traces=()
# Seeds and extra options: fault-free, then with faults. Adjust the options to conclave-sim's
# command line (`conclave-sim --help`) if they change.
# seed 3 with all faults has a leader's lease expire (step 342); seed 5 includes a crash and a
# restart, and followers whose promise holds and has ended; seed 149 with transfers,
# open-connection blackholes and pauses takes an accepted transfer, cessions, a corroborated
# silence (a follower whose promise ended drops its paused leader on a scouting request, step 213)
# and a lease expiry (step 233); seed 48 with all faults has a restarted node refuse scouting
# support within its start promise (step 197). With scouting on, a leader's lease ends before
# its check-quorum can fail, so the check-quorum step-down and the preempted leader (a paused
# leader resumes to its successor's heartbeat) come from seed 37 without scouting (no lease).
runs=(
  "1:--faults none --steps 300"
  "3:--faults all --steps 600"
  "5:--faults all --steps 600"
  "6:--faults crash,cut,loss --steps 600"
  "149:--faults transfer,blackhole,pause --episodes 6 --steps 240"
  "48:--faults all --steps 210"
  "37:--no-scouting --faults transfer,blackhole,pause --episodes 6 --steps 230"
)
for run in "${runs[@]}"; do
  seed=${run%%:*}
  extra=${run#*:}
  trace="$out/seed-$seed.ndjson"
  # shellcheck disable=SC2086
  "$sim" --seed "$seed" --quiet $extra --trace "$trace" >"$out/seed-$seed.log" 2>&1 || {
    echo "conclave-sim failed for seed $seed (see $out/seed-$seed.log)"
    tail -5 "$out/seed-$seed.log"
    exit 1
  }
  traces+=("$trace")
done
python3 "$tla/trace_leader_steps.py" --require "${traces[@]}"
# A corrupted copy of the first trace with an accepted transfer: the leader's cession names
# another node than the transfer's target. TLC must reject it. (A cession that names nobody is a
# behaviour: a leader whose lease ended just before the transfer steps down and refuses it.)
corrupt="$out/corrupt-transfer.ndjson"
python3 - "$corrupt" "${traces[@]}" <<'PY'
import json, sys
out = sys.argv[1]
for path in sys.argv[2:]:
    lines = open(path).read().splitlines()
    for i, line in enumerate(lines):
        obj = json.loads(line)
        # accepted: its cession names the successor (a leader whose lease just ended cedes
        # to nobody and refuses the transfer)
        if (obj.get("kind") == "step" and obj["action"] == "TransferLeadership"
                and any(m.get("successor") is not None for m in obj["sent"])):
            other = next(x for x in range(json.loads(lines[0])["nodes"])
                         if x not in (obj["node"], obj["peer"]))
            for m in obj["sent"]:
                m["successor"] = other
            lines[i] = json.dumps(obj)
            open(out, "w").write("\n".join(lines[: i + 1]) + "\n")
            sys.exit(0)
sys.exit("no transfer with a cession to corrupt")
PY
# Membership: a membership run (voter sets change under faults; conclave-sim
# --membership), whose trace has SetVoters steps and StaleConfig / NotAVoter refusals, must
# validate; a copy whose first StaleConfig refusal is turned into support must be rejected.
mtrace="$out/membership-seed-7.ndjson"
"$sim" --membership --seed 7 --duration 1500 --tail 300 --quiet --trace "$mtrace" \
    >"$out/membership-seed-7.log" 2>&1 || {
  echo "conclave-sim --membership failed for seed 7 (see $out/membership-seed-7.log)"
  exit 1
}
traces+=("$mtrace")
mcorrupt="$out/corrupt-stale-config.ndjson"
python3 - "$mcorrupt" "$mtrace" <<'PY'
import json, sys
out, path = sys.argv[1], sys.argv[2]
lines = open(path).read().splitlines()
need = {"SetVoters"}
for i, line in enumerate(lines):
    obj = json.loads(line)
    if obj.get("kind") != "step":
        continue
    need.discard(obj["action"])
    for m in obj["sent"]:
        if m.get("refusal") == "stale-config" and not need:
            if m["type"] == "ScoutingResponse":
                del m["refusal"]
                m["will_vote"] = True
            else:
                m["refusal"], m["granted"] = "none", True
            lines[i] = json.dumps(obj)
            open(out, "w").write("\n".join(lines[: i + 1]) + "\n")
            sys.exit(0)
sys.exit("no stale-config refusal after a SetVoters step to corrupt")
PY
grep -q '"action": *"SetVoters"' "$mtrace" || { echo "membership trace without SetVoters"; exit 1; }
"$tla/validate-trace.sh" "${traces[@]}"
"$tla/validate-trace.sh" --expect-fail "$corrupt" "$mcorrupt"
# Without LeaseSteps, Elector.tla must reject the lease traces: seed 149 at its lease expiry,
# seed 48 at its start-promise refusal.
exec "$tla/validate-trace.sh" --expect-fail --no-lease-steps "$out/seed-149.ndjson" \
    "$out/seed-48.ndjson"
