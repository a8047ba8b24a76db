#!/usr/bin/env bash
# Write throughput of a table with a change handler against an unbound one:
# wrk PUTs at `wal` on one `ebb serve`, in three runs of DURATION each:
#   1. table `plain`, nothing bound anywhere;
#   2. table `plain` again, while table `bound` has a change handler (what
#      an unbound table pays for another table's binding);
#   3. table `bound`, whose every write writes a change event that the test
#      plugin's `record` handler turns into one more write (to `bound_seen`).
# After run 3 it waits for the outbox to drain and checks that every event
# was handled, so the bound side did all its work, not only the writes.
# Loopback only; needs the plugins (`make plugins`).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}

./scripts/need-wrk.sh

cargo build --release -q --workspace --bin ebb
target="${CARGO_TARGET_DIR:-target}"
bin="$target/release"
wasm="$target/wasm32-unknown-unknown/release/ebb_test_flaky.wasm"
[ -f "$wasm" ] || { echo "bench-triggers: $wasm missing; run make plugins" >&2; exit 1; }
work=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  rm -rf "$work" || true
}
trap cleanup EXIT

export RUST_LOG=warn
"$bin/ebb" serve --listen 127.0.0.1:0 --data-dir "$work/data" >"$work/ebb.out" 2>"$work/ebb.err" &
pid=$!
url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://[0-9.:]*' "$work/ebb.out" | head -1 || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "bench-triggers: ebb did not start" >&2; cat "$work/ebb.err" >&2; exit 1; }

cat >"$work/put.lua" <<'LUA'
local prefix
init = function(args) prefix = args[1] end
wrk.method = "PUT"
wrk.body = string.rep("x", 100)
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, prefix .. (n % 100000) .. "?durability=wal")
end
LUA

# "requests/s non-2xx" of one wrk run.
rps() {
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" -s "$work/put.lua" "$url" -- "$1" |
    awk '/Requests\/sec/ {r=$2} /Non-2xx or 3xx responses/ {e=$NF} END {printf "%s %d\n", r, e}'
}

read -r plain plain_err < <(rps "/v1/tables/plain/keys/k")
curl -fsS -X PUT --data-binary @"$wasm" "$url/v1/plugins/flaky" >/dev/null
curl -fsS -X PUT -d '{"plugin": "flaky", "function": "record", "config": {"table": "bound_seen"}}' \
  "$url/v1/tables/bound/change-handler" >/dev/null
read -r plain_other plain_other_err < <(rps "/v1/tables/plain/keys/k2")
read -r bound bound_err < <(rps "/v1/tables/bound/keys/k")

# Every event of the bound run handled: the outbox drains and the handler
# counted as many events as the table took winning writes.
status() { curl -fsS "$url/v1/tables/bound/change-handler"; }
drained=""
for _ in $(seq 600); do
  depth=$(status | sed -E 's/.*"outbox_depth":([0-9]+).*/\1/')
  [ "$depth" = "0" ] && { drained=yes; break; }
  sleep 0.1
done
handled=$(status | sed -E 's/.*"handled":([0-9]+).*/\1/')
[ -n "$drained" ] || { echo "bench-triggers: the outbox did not drain in 60 s" >&2; exit 1; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo
echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION, PUT 100-byte values at wal, loopback, $(nproc) cores shared by wrk, the server and its handler, commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- 2>/dev/null || echo +changes)"
printf '%-52s %12s %10s %10s\n' "table" "req/s" "vs plain" "non-2xx"
printf '%-52s %12s %10s %10s\n' "plain (nothing bound)" "$plain" "1.00" "$plain_err"
printf '%-52s %12s %10s %10s\n' "plain (another table has a change handler)" "$plain_other" "$(ratio "$plain_other" "$plain")" "$plain_other_err"
printf '%-52s %12s %10s %10s\n' "bound (change handler record: 1 write per event)" "$bound" "$(ratio "$bound" "$plain")" "$bound_err"
echo "bound: $handled events handled, outbox drained"
met=$(awk -v r="$(ratio "$bound" "$plain")" -v e="$bound_err" 'BEGIN { print (r >= 0.5 && e == 0) ? "met" : "not met" }')
echo "headline: writes to a table with a change handler | unbound table (bound req/s / plain req/s) | $(ratio "$bound" "$plain") | >= 0.5 | $met"
