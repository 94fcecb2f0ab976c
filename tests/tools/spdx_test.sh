#!/bin/sh
# Every source file carries the licence tag "SPDX-License-Identifier: Apache-2.0" in its first
# three lines (C++, shell, Python, CMake, TLA+ and TLC configs, systemd and maintainer scripts).
#   spdx_test.sh <source root>   the check (CTest: spdx_headers); prints each file without it
#   spdx_test.sh --canary        runs the check on a scratch tree with one untagged file and
#                                passes only if that file is reported (CTest: spdx_canary)
set -u
tag="SPDX-License-Identifier: Apache-2.0"
if [ "${1:-}" = "--canary" ]; then
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  printf '// %s\nint a;\n' "$tag" >"$dir/tagged.cpp"
  printf 'int b;\n' >"$dir/untagged.hpp"
  out=$(sh "$0" "$dir")
  if [ $? -ne 0 ] && echo "$out" | grep -q 'untagged.hpp' && ! echo "$out" | grep -q 'tagged.cpp:'; then
    echo "canary: the untagged file was found"
    exit 0
  fi
  echo "canary: the check did not report the untagged file: $out"
  exit 1
fi
root=${1:?usage: spdx_test.sh [--canary] <source root>}
cd "$root" || exit 2
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files)
else
  files=$(find . -type f -not -path './build/*' -not -path './.git/*' | sed 's|^\./||')
fi
bad=0
for f in $files; do
  case $f in
    *.cpp|*.hpp|*.h|*.c|*.sh|*.py|*.cmake|*.cmake.in|*.pc.in|*.service|*.tla|*.cfg|*CMakeLists.txt|\
    tools/packaging/postinst|tools/packaging/prerm|tools/packaging/postrm|.ci/run) ;;
    *) continue ;;
  esac
  [ -f "$f" ] || continue
  if ! head -n 3 "$f" | grep -q "$tag"; then
    echo "$f: no '$tag' in its first three lines"
    bad=1
  fi
done
[ $bad -eq 0 ] && echo "every source file carries the licence tag"
exit $bad
