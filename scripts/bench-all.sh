#!/usr/bin/env bash
# `make bench-all`: every benchmark that has a headline goal, one after the
# other (so none shares the cores with another), each bounded to a few
# minutes on 2 cores; then one table of every goal, its anchor and the
# measured ratio, in markdown for BENCHMARKS.md. Each bench's whole output
# stays in $OUT (default $CARGO_TARGET_DIR/bench-all-<commit>/NAME.log).
#
# SKIP="cluster memory" skips benches by name (sql plugins http memory
# cluster). A bench that fails is reported and the others still run; the
# script then exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."

commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- 2>/dev/null || commit="$commit+changes"
out=${OUT:-${CARGO_TARGET_DIR:-target}/bench-all-$commit}
mkdir -p "$out"
skip=" ${SKIP:-} "
failed=()

run() { # name command...: run one bench into $out/name.log
  local name=$1
  shift
  if [[ "$skip" == *" $name "* ]]; then
    echo "== $name: skipped"
    return
  fi
  echo "== $name: $*"
  local started=$SECONDS
  if "$@" >"$out/$name.log" 2>&1; then
    echo "   done in $((SECONDS - started)) s"
  else
    echo "   FAILED after $((SECONDS - started)) s: see $out/$name.log"
    failed+=("$name")
  fi
}

echo "bench-all at $commit, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); logs in $out"
run sql env ROWS=1000000 make -s bench-sql
run plugins env ROWS=1000000 RUNS=5 make -s bench-plugins
run http env DURATION=5s make -s bench-http
run triggers env DURATION=5s make -s bench-triggers
run memory env EBB_BENCH_RECORDS=1000000 make -s bench-memory
run cluster env DURATION=5s FAILOVERS=3 SCAN_QUERIES=5 make -s bench-cluster

echo
echo "Headline goals at $commit ($(date -u +%Y-%m-%d), $(nproc) cores, \`make bench-all\`):"
echo
echo "| goal | anchor (ratio) | measured | goal | met |"
echo "| --- | --- | --- | --- | --- |"
for name in sql plugins http triggers memory cluster; do
  [ -f "$out/$name.log" ] || continue
  grep -h '^headline: ' "$out/$name.log" | sed 's/^headline: //' |
    awk -F' [|] ' '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }'
done
if [ "${#failed[@]}" -ne 0 ]; then
  echo
  echo "bench-all: failed: ${failed[*]} (their goals are missing above)" >&2
  exit 1
fi
