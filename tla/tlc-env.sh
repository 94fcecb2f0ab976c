# Sourced by check.sh and validate-trace.sh: finds TLC.
# Sets the array TLC_CMD, or prints the skip line and exits 77.
if [[ -n "${TLA2TOOLS_JAR:-}" && -f "${TLA2TOOLS_JAR}" ]]; then
  TLC_CMD=(java -XX:+UseParallelGC -cp "${TLA2TOOLS_JAR}" tlc2.TLC)
elif command -v tlc >/dev/null 2>&1; then
  TLC_CMD=(tlc)
else
  echo "TLC not found: set TLA2TOOLS_JAR or put tlc on PATH; skipping"
  exit 77
fi
# TLC workers: the machine is shared; override with TLC_WORKERS.
TLC_WORKERS=${TLC_WORKERS:-2}
