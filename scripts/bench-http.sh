#!/usr/bin/env bash
# HTTP load benchmark: wrk against `ebb serve` and against a bare axum server
# (the HTTP floor) in the same run, printed side by side with ratios.
# Loopback only; each run is bounded by DURATION. The floor and ebb run
# interleaved, ROUNDS times (default 5): each round's ratio compares runs
# seconds apart, and the table reports the median round, so a slow spell
# of the machine during one run moves one round, not the headline. (With
# three rounds, single rounds of one run spread from 0.58 to 0.80 and the
# median with them: BENCHMARKS.md, 2026-12-05.)
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-5}
CONNECTIONS=${CONNECTIONS:-32}
# Two wrk threads: one could not load the floor's GETs on a 2-core EPYC
# (14-21 % of the CPU idle, 94-100 k req/s against 112-123 k with two),
# which squeezed every ratio toward 1 (BENCHMARKS.md, 2026-12-05).
THREADS=${THREADS:-2}

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

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
# median VALUES...: the middle value (the lower middle of an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

declare -a get_ratios put_memory_ratios put_wal_ratios
get_errors=0
memory_errors=0
wal_errors=0
floor_errors=0
echo
echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION per run, $ROUNDS rounds of floor and ebb interleaved, 100-byte values, loopback, $(nproc) cores shared by wrk and the server, commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- 2>/dev/null || echo +changes), load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-24s %14s %14s %8s %8s\n' "round" "request" "floor req/s" "ebb req/s" "ebb/floor" "non-2xx"
for round in $(seq "$ROUNDS"); do
  read -r floor_get e < <(rps "$floor_url/v1/tables/bench/keys/hot"); floor_errors=$((floor_errors + e))
  read -r ebb_get e < <(rps "$ebb_url/v1/tables/bench/keys/hot"); get_errors=$((get_errors + e))
  get_ratios+=("$(ratio "$ebb_get" "$floor_get")")
  printf '%-6s %-24s %14s %14s %8s %8s\n' "$round" "GET one key" "$floor_get" "$ebb_get" "${get_ratios[-1]}" "$e"
  read -r floor_put e < <(rps -s "$work/put.lua" "$floor_url" -- "/v1/tables/bench/keys/k"); floor_errors=$((floor_errors + e))
  read -r ebb_put e < <(rps -s "$work/put.lua" "$ebb_url" -- "/v1/tables/bench/keys/k" "?durability=memory"); memory_errors=$((memory_errors + e))
  put_memory_ratios+=("$(ratio "$ebb_put" "$floor_put")")
  printf '%-6s %-24s %14s %14s %8s %8s\n' "$round" "PUT, durability memory" "$floor_put" "$ebb_put" "${put_memory_ratios[-1]}" "$e"
  read -r ebb_put e < <(rps -s "$work/put.lua" "$ebb_url" -- "/v1/tables/bench/keys/k" "?durability=wal"); wal_errors=$((wal_errors + e))
  put_wal_ratios+=("$(ratio "$ebb_put" "$floor_put")")
  printf '%-6s %-24s %14s %14s %8s %8s\n' "$round" "PUT, durability wal" "$floor_put" "$ebb_put" "${put_wal_ratios[-1]}" "$e"
done
get_ratio=$(median "${get_ratios[@]}")
put_memory_ratio=$(median "${put_memory_ratios[@]}")
put_wal_ratio=$(median "${put_wal_ratios[@]}")
echo "median ratio of $ROUNDS rounds: GET $get_ratio (rounds ${get_ratios[*]}), PUT memory $put_memory_ratio (${put_memory_ratios[*]}), PUT wal $put_wal_ratio (${put_wal_ratios[*]}); ebb answered $((get_errors + memory_errors + wal_errors)) non-2xx"
if [ "$floor_errors" -ne 0 ]; then
  echo "bench-http: the floor answered $floor_errors non-2xx responses" >&2
fi

# Headlines for `make bench-all`; a run with non-2xx answers meets no goal.
headline() { # goal ratio target errors
  met=$(awk -v r="$2" -v t="$3" -v e="$4" 'BEGIN { print (r >= t && e == 0) ? "met" : "not met" }')
  note=""; [ "$4" -ne 0 ] && note=" ($4 non-2xx)"
  echo "headline: $1$note | bare axum floor (ebb req/s / floor req/s, median of $ROUNDS interleaved rounds) | $2 | >= $3 | $met"
}
headline "GET one key near the HTTP floor" "$get_ratio" 0.8 "$get_errors"
headline "PUT, durability memory, near the HTTP floor" "$put_memory_ratio" 0.7 "$memory_errors"
headline "PUT, durability wal, near the HTTP floor" "$put_wal_ratio" 0.6 "$wal_errors"
