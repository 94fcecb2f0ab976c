#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that tla/trace_to_tla.py's BODY_FIELDS names every elector message body and field, in
the order of the C++ Describe lists, so that a field the trace mapping misses fails CI.

    check-message-fields.py MESSAGE_FIELDS_EXE TLA_DIR [--forget Body.field]

--forget drops one field from the Python table first (the canary): exit 0 only when the check
then reports exactly that body.
"""
import json
import subprocess
import sys


def main(argv):
    if len(argv) not in (3, 5) or (len(argv) == 5 and argv[3] != "--forget"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    cpp = json.loads(subprocess.run([argv[1]], check=True, capture_output=True,
                                    text=True).stdout)
    sys.path.insert(0, argv[2])
    import trace_to_tla  # noqa: E402 (the path is an argument)
    table = {body: list(fields) for body, fields in trace_to_tla.BODY_FIELDS.items()}
    if len(argv) == 5:
        body, field = argv[4].split(".")
        table[body].remove(field)
    differ = [b for b in sorted(set(cpp) | set(table)) if cpp.get(b) != table.get(b)]
    for body in differ:
        print(f"{body}: C++ {cpp.get(body)}, trace_to_tla.py {table.get(body)}")
    if len(argv) == 5:
        return 0 if differ == [argv[4].split(".")[0]] else 1
    if not differ:
        print(f"trace_to_tla.py BODY_FIELDS matches the C++ lists ({len(cpp)} bodies)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
