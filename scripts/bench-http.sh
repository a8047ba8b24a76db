#!/usr/bin/env bash
# HTTP load benchmark: wrk against `ebb serve` and against a bare axum server
# (the HTTP floor) in the same run, printed side by side with ratios.
# Loopback only; each run is bounded by DURATION.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}

./scripts/need-wrk.sh

cargo build --release -q --workspace --bin ebb --example http_floor
bin="${CARGO_TARGET_DIR:-target}/release"
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  # The server may still be writing its data dir as it stops.
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work" || true
}
trap cleanup EXIT

wait_url() { # name: echoes the base URL the process printed
  for _ in $(seq 100); do
    url=$(grep -o 'http://[0-9.:]*' "$work/$1.out" | head -1 || true)
    [ -n "$url" ] && { echo "$url"; return; }
    sleep 0.1
  done
  echo "bench-http: $1 did not start" >&2; cat "$work/$1.err" >&2; exit 1
}

export RUST_LOG=warn
"$bin/ebb" serve --listen 127.0.0.1:0 --data-dir "$work/data" >"$work/ebb.out" 2>"$work/ebb.err" &
pids+=($!)
"$bin/examples/http_floor" >"$work/floor.out" 2>"$work/floor.err" &
pids+=($!)
ebb_url=$(wait_url ebb)
floor_url=$(wait_url floor)

cat >"$work/put.lua" <<'LUA'
local prefix, suffix
init = function(args) prefix = args[1]; suffix = args[2] or "" end
wrk.method = "PUT"
wrk.body = string.rep("x", 100)
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, prefix .. (n % 100000) .. suffix)
end
LUA

value=$(printf 'x%.0s' $(seq 100))
curl -fsS -X PUT --data-binary "$value" "$ebb_url/v1/tables/bench/keys/hot" >/dev/null

# "requests/s non-2xx": wrk prints "Non-2xx or 3xx responses: N" only when
# there were some; those are not successful requests and are reported.
rps() {
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" "$@" |
    awk '/Requests\/sec/ {r=$2} /Non-2xx or 3xx responses/ {e=$NF} END {printf "%s %d\n", r, e}'
}

read -r floor_get floor_get_err < <(rps "$floor_url/v1/tables/bench/keys/hot")
read -r ebb_get ebb_get_err < <(rps "$ebb_url/v1/tables/bench/keys/hot")
read -r floor_put floor_put_err < <(rps -s "$work/put.lua" "$floor_url" -- "/v1/tables/bench/keys/k")
read -r ebb_put_memory ebb_put_memory_err < <(rps -s "$work/put.lua" "$ebb_url" -- "/v1/tables/bench/keys/k" "?durability=memory")
read -r ebb_put_wal ebb_put_wal_err < <(rps -s "$work/put.lua" "$ebb_url" -- "/v1/tables/bench/keys/k" "?durability=wal")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo
echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION, 100-byte values, loopback, $(nproc) cores shared by wrk and the server, commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- 2>/dev/null || echo +changes), load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-28s %14s %14s %8s %16s\n' "request" "floor req/s" "ebb req/s" "ebb/floor" "non-2xx (ebb)"
printf '%-28s %14s %14s %8s %16s\n' "GET one key" "$floor_get" "$ebb_get" "$(ratio "$ebb_get" "$floor_get")" "$ebb_get_err"
printf '%-28s %14s %14s %8s %16s\n' "PUT, durability memory" "$floor_put" "$ebb_put_memory" "$(ratio "$ebb_put_memory" "$floor_put")" "$ebb_put_memory_err"
printf '%-28s %14s %14s %8s %16s\n' "PUT, durability wal" "$floor_put" "$ebb_put_wal" "$(ratio "$ebb_put_wal" "$floor_put")" "$ebb_put_wal_err"
if [ "$((floor_get_err + floor_put_err))" -ne 0 ]; then
  echo "bench-http: the floor answered $((floor_get_err + floor_put_err)) non-2xx responses" >&2
fi

# Headlines for `make bench-all`; a run with non-2xx answers meets no goal.
headline() { # goal ratio target errors
  met=$(awk -v r="$2" -v t="$3" -v e="$4" 'BEGIN { print (r >= t && e == 0) ? "met" : "not met" }')
  note=""; [ "$4" -ne 0 ] && note=" ($4 non-2xx)"
  echo "headline: $1$note | bare axum floor (ebb req/s / floor req/s) | $2 | >= $3 | $met"
}
headline "GET one key near the HTTP floor" "$(ratio "$ebb_get" "$floor_get")" 0.8 "$ebb_get_err"
headline "PUT, durability memory, near the HTTP floor" "$(ratio "$ebb_put_memory" "$floor_put")" 0.7 "$ebb_put_memory_err"
headline "PUT, durability wal, near the HTTP floor" "$(ratio "$ebb_put_wal" "$floor_put")" 0.6 "$ebb_put_wal_err"
