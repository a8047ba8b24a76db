#!/usr/bin/env bash
# Measure what a purge gives back: load N records with a short TTL into a
# fresh `ebb serve`, then watch tombstones, resident memory, live SST bytes
# and the data dir's size until the records expired, were purged and
# compacted away. Usage: scripts/measure-purge.sh [EBB_BINARY] [RECORDS]
set -euo pipefail
ebb=${1:-target/release/ebb}
records=${2:-300000}
port=7991
dir=$(mktemp -d)
work=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir" "$work"
}
trap cleanup EXIT
"$ebb" serve --listen 127.0.0.1:$port --data-dir "$dir/data" --tombstone-retention 1s >"$work/log" 2>&1 &
pid=$!
until curl -sf http://127.0.0.1:$port/health >/dev/null; do sleep 0.2; done
python3 - "$work" "$records" <<'PY'
import sys
work, n = sys.argv[1], int(sys.argv[2])
for b in range(0, n, 10000):
    with open(f"{work}/b{b:09}.ndjson", "w") as f:
        for i in range(b, min(b + 10000, n)):
            f.write('{"key":"session:%d","value":"%s","ttl_ms":3000}\n' % (i, ("value:%d" % i).ljust(100, "x")))
PY
sample() {
  local m; m=$(curl -s http://127.0.0.1:$port/metrics)
  printf '%-28s live %8s tombstones %8s rss %6s MiB sst %7s KiB dir %7s KiB\n' "$1" \
    "$(grep -oP 'ebb_table_records\{table="t",state="live"\} \K\d+' <<<"$m" || echo 0)" \
    "$(grep -oP 'ebb_table_records\{table="t",state="tombstone"\} \K\d+' <<<"$m" || echo 0)" \
    "$(( $(grep -oP '^ebb_process_resident_bytes \K\d+' <<<"$m") >> 20 ))" \
    "$(( $(grep -oP '^ebb_rocksdb_live_sst_bytes \K\d+' <<<"$m") >> 10 ))" \
    "$(du -sk "$dir/data" | cut -f1)"
}
sample "before"
ls "$work"/*.ndjson | xargs -P 4 -I{} curl -s -o /dev/null -X POST -H 'content-type: application/x-ndjson' --data-binary @{} "http://127.0.0.1:$port/v1/tables/t/batch"
sample "loaded ($records, 3 s TTL)"
for t in 5 10 20 40 60 90; do
  sleep $(( t - ${last:-0} )); last=$t
  sample "after ${t} s"
done
