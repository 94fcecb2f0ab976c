#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Whether a program carries the names of planted bugs: planted_names_test.sh present|absent
# 'Name1|Name2' PROGRAM. The names are enumerators' (core/enum_names.hpp prints them from their
# BOOST_DESCRIBE_ENUM lists), so the program is searched stripped of its symbols and debug
# information (which name every enumerator of every enum it includes), for a name standing as a
# whole string of its own; the text of a failed check that mentions `PlantedBug::X` is no match.
set -eu
want=$1 names=$2 program=$3
stripped=$(mktemp)
trap 'rm -f "$stripped"' EXIT
objcopy --strip-all "$program" "$stripped"
if grep -a -q -P "(?<![A-Za-z0-9_:])($names)\\x00" "$stripped"; then found=present; else found=absent; fi
if [ "$found" != "$want" ]; then
  echo "planted_names_test: $program: planted-bug names $found, expected $want" >&2
  exit 1
fi
