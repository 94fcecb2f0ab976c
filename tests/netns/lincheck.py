# SPDX-License-Identifier: Apache-2.0
"""Linearizability of a history of register operations, key by key (stdlib only).

The model: each key is a register holding a value or nothing (absent). Operations:

- ``put``: writes ``value``; its answer says nothing else.
- ``cas``: a conditional put: writes ``value`` only if the register holds ``expect`` (``None``:
  only if the key is absent). ``ok`` True: it wrote; False: the condition failed, nothing written.
- ``get``: reads; ``value`` is what it returned (``None``: absent).

Every written value must be unique in the history (the harness makes them so); a conditional put
on an LSN is then a compare on the value the LSN was read with. An operation has an invocation
time and a completion time; ``complete`` None means indeterminate (a timeout, a lost connection,
an "outcome unknown" answer): it may have taken effect at any point after its invocation, or
never. An indeterminate read tells nothing and is dropped; an indeterminate write may be
linearized anywhere after its invocation or left out. Completion at the same instant as another
operation's invocation counts as overlapping (never a false alarm from clock resolution).

The search is Wing & Gong's with Lowe's refinements (the "WGL" algorithm, as in Knossos'
``wgl`` and Porcupine): a list of call and return entries in time order; at each call entry try
to linearize that operation next (its model step must accept it), remembering (set of linearized
operations, register state) pairs already explored so that no configuration is searched twice;
a return entry reached for an operation not yet linearized means backtracking. Keys are checked
independently (a history is linearizable iff each key's sub-history is: linearizability is
local). The cost is exponential in the number of overlapping operations in the worst case, but the
memo keeps the usual histories (a few clients, one operation outstanding each) small.

Writes whose answer was lost would each double the search if tried both ways. Those whose value
was read (or was the condition of a successful conditional put) took effect before that read
completed, so they get that completion; the rest are first left out, and only if that fails are
they tried, as interchangeable writes of one value nobody reads (see check_key).

``check(ops)`` returns a ``Verdict``; ``python3 lincheck.py HISTORY.jsonl`` checks a file of one
JSON operation per line (the fields of ``Op``) and exits 1 when it is not linearizable.
"""
import collections
import json
import sys

Op = collections.namedtuple("Op", "process kind key value expect ok invoke complete",
                            defaults=(None, None, None))

Verdict = collections.namedtuple("Verdict", "linearizable key detail explored")

_ABSENT_NAME = "absent"


def describe(op):
    """One line naming an operation (for a verdict's detail)."""
    def v(x):
        return _ABSENT_NAME if x is None else repr(x)

    when = "[%.6f, %s]" % (op.invoke, "?" if op.complete is None else "%.6f" % op.complete)
    if op.kind == "put":
        what = "put %s" % v(op.value)
    elif op.kind == "cas":
        outcome = "?" if op.complete is None else ("ok" if op.ok else "failed")
        what = "cas %s -> %s %s" % (v(op.expect), v(op.value), outcome)
    else:
        what = "get -> %s" % v(op.value)
    return "p%s %s %s %s" % (op.process, op.key, what, when)


def _step(state, op):
    """(accepted, next state) of the register in `state` applying `op`."""
    if op.kind == "put":
        return True, op.value
    if op.kind == "cas":
        if op.complete is None:  # took effect or not: whichever the state allows
            return True, (op.value if state == op.expect else state)
        if op.ok:
            return state == op.expect, op.value
        return state != op.expect, state
    return state == op.value, state


class _Entry:
    __slots__ = ("op", "index", "call", "match", "prev", "next")

    def __init__(self, op, index, call):
        self.op, self.index, self.call = op, index, call
        self.match = self.prev = self.next = None


def _entries(ops):
    """The head of a doubly linked list of call and return entries in time order (calls before
    returns at equal times); indeterminate operations have no return entry."""
    events = []
    for i, op in enumerate(ops):
        call = _Entry(op, i, True)
        events.append((op.invoke, 0, i, call))
        if op.complete is not None:
            ret = _Entry(op, i, False)
            call.match, ret.match = ret, call
            events.append((op.complete, 1, i, ret))
    events.sort(key=lambda e: e[:3])
    head = _Entry(None, -1, False)
    prev = head
    for *_, e in events:
        prev.next, e.prev = e, prev
        prev = e
    return head


def _lift(e):
    """Takes the call entry e and its return entry (if any) out of the list."""
    e.prev.next = e.next
    if e.next:
        e.next.prev = e.prev
    r = e.match
    if r:
        r.prev.next = r.next
        if r.next:
            r.next.prev = r.prev


def _unlift(e):
    r = e.match
    if r:
        r.prev.next = r
        if r.next:
            r.next.prev = r
    e.prev.next = e
    if e.next:
        e.next.prev = e


def _pin_observed(ops):
    """The operations with each indeterminate write whose value was observed made determinate,
    and the indeterminate writes nobody observed. A read that returned a written value, or a
    conditional put that succeeded on it, shows that the write took effect before that operation
    completed: the write then completes at the earliest such completion (the same constraint). A
    pinned conditional put succeeded, so its own condition is an observation too (to a fixpoint)."""
    pinned = {}  # index of an indeterminate write -> its completion
    changed = True
    while changed:
        changed = False
        seen_by = {}
        for i, op in enumerate(ops):
            complete = op.complete if op.complete is not None else pinned.get(i)
            if complete is None:
                continue
            observed = op.value if op.kind == "get" else (
                op.expect if op.kind == "cas" and (op.ok or i in pinned) else None)
            if observed is not None:
                seen_by[observed] = min(seen_by.get(observed, complete), complete)
        for i, op in enumerate(ops):
            if op.complete is None and op.kind != "get" and op.value in seen_by:
                if pinned.get(i) != seen_by[op.value]:
                    pinned[i] = seen_by[op.value]
                    changed = True
    # An indeterminate conditional put that was observed took effect: its condition held.
    ops = [op._replace(complete=pinned[i], ok=True if op.kind == "cas" else None)
           if i in pinned else op for i, op in enumerate(ops)]
    return ops, [op for op in ops if op.complete is None and op.kind != "get"]


def check_key(ops, initial=None, budget=None):
    """Verdict for the operations of one key (a list of Op; reads without an answer dropped).

    Indeterminate writes whose value someone observed are pinned (see _pin_observed). The others
    (their value never read) matter only to explain a failed conditional put: they are first all
    left out (a legal choice: they may never have taken effect); only when that
    history is not linearizable is the search run again with them, each free to take effect or
    not. Each such write doubles the worst case, so leaving them out first keeps the usual case
    (they never took effect, or were overwritten unseen) as cheap as a history without them."""
    ops = [op for op in ops if not (op.kind == "get" and op.complete is None)]
    ops, unobserved = _pin_observed(ops)
    # An unobserved write can only explain a failed conditional put linearized after it: one
    # invoked after every such failure has completed is left out for good.
    last_failure = max((op.complete for op in ops if op.kind == "cas" and op.complete is not None
                        and not op.ok), default=None)
    useless = set(id(op) for op in unobserved
                  if last_failure is None or op.invoke > last_failure)
    if useless:
        ops = [op for op in ops if id(op) not in useless]
        unobserved = [op for op in unobserved if id(op) not in useless]
    if unobserved:
        without = set(map(id, unobserved))
        first = _search([op for op in ops if id(op) not in without], initial, budget)
        if first.linearizable:
            return first
        # All unobserved writes have one effect: the register holds a value nobody reads or
        # compares with. One token stands for all of them, so that taking a second one while the
        # first is in place is a step that changes nothing (never taken, see _search).
        unseen = object()
        second = _search([op._replace(value=unseen) if id(op) in without else op for op in ops],
                         initial, budget, unseen)
        return second._replace(explored=first.explored + second.explored)
    return _search(ops, initial, budget)


def _search(ops, initial, budget, unseen=None):
    """WGL over `ops`. Writes of the value `unseen` are interchangeable (the same effect, no
    answer): only the earliest one not yet taken is ever tried."""
    determinate = sum(1 for op in ops if op.complete is not None)
    interchangeable = sorted((i for i, op in enumerate(ops) if op.value is unseen is not None),
                             key=lambda i: (ops[i].invoke, i))

    def first_untaken(linearized):
        return next((i for i in interchangeable if not linearized >> i & 1), None)

    head = _entries(ops)
    state, linearized, done = initial, 0, 0
    seen, stack = set(), []
    entry, explored, deepest = head.next, 0, (0, None)
    while done < determinate:
        explored += 1
        if budget is not None and explored > budget:
            return Verdict(None, None, "search budget of %d steps exhausted" % budget, explored)
        if entry is not None and entry.call:
            accepted, nxt = _step(state, entry.op)
            # An indeterminate write that leaves the register as it is (a conditional put whose
            # condition does not hold) has no answer to explain: taking it is the same as
            # leaving it out, so it is never taken (each one would double the search).
            if accepted and (entry.op.complete is not None or nxt != state) and (
                    entry.op.value is not unseen or unseen is None
                    or entry.index == first_untaken(linearized)):
                key = (linearized | (1 << entry.index), nxt)
                if key not in seen:
                    seen.add(key)
                    stack.append((entry, state))
                    state, linearized = nxt, key[0]
                    done += entry.op.complete is not None
                    _lift(entry)
                    entry = head.next
                    continue
            entry = entry.next
            continue
        # A return entry of an operation not linearized yet (or the end of the list): backtrack.
        if entry is not None and done >= deepest[0]:
            deepest = (done, entry.op)
        if not stack:
            return Verdict(False, ops[0].key if ops else None, _explain(ops, deepest), explored)
        entry, state = stack.pop()
        linearized &= ~(1 << entry.index)
        done -= entry.op.complete is not None
        _unlift(entry)
        entry = entry.next
    return Verdict(True, None, "", explored)


def _explain(ops, deepest):
    done, stuck = deepest
    lines = ["no linearization: at most %d of the %d determinate operations of this key can be "
             "ordered; it fails at the completion of" % (
                 done, sum(1 for op in ops if op.complete is not None))]
    if stuck is not None:
        lines.append("  " + describe(stuck))
    lines.append("operations of the key, by invocation:")
    lines += ["  " + describe(op) for op in sorted(ops, key=lambda o: o.invoke)]
    return "\n".join(lines)


def by_key(ops):
    keys = collections.OrderedDict()
    for op in ops:
        keys.setdefault(op.key, []).append(op)
    return keys


def check(ops, budget=None):
    """Verdict for a whole history: the first key that is not linearizable, or True. With a
    budget (steps per key), a key whose search exceeds it gives linearizable None (unknown)."""
    explored, unknown = 0, None
    for key, key_ops in by_key(ops).items():
        v = check_key(key_ops, budget=budget)
        explored += v.explored
        if v.linearizable is False:
            return v._replace(explored=explored)
        if v.linearizable is None:
            unknown = v._replace(key=key)
    if unknown is not None:
        return unknown._replace(explored=explored)
    return Verdict(True, None, "", explored)


def unique_writes(ops):
    """Values written twice (the model needs each written value to be unique)."""
    counts = collections.Counter(op.value for op in ops if op.kind in ("put", "cas"))
    return sorted(repr(v) for v, n in counts.items() if n > 1)


def load(path):
    with open(path) as f:
        return [Op(**json.loads(line)) for line in f if line.strip()]


def dump(ops, path):
    with open(path, "w") as f:
        for op in ops:
            f.write(json.dumps(op._asdict()) + "\n")


def main(argv):
    if len(argv) != 2:
        print("usage: lincheck.py HISTORY.jsonl", file=sys.stderr)
        return 2
    ops = load(argv[1])
    v = check(ops)
    print("%d operations, %d search steps: %s" % (
        len(ops), v.explored, {True: "linearizable", False: "NOT linearizable",
                               None: "unknown"}[v.linearizable]))
    if v.detail:
        print(v.detail)
    return 0 if v.linearizable else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
