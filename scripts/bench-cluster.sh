#!/usr/bin/env bash
# Cluster benchmark, loopback only, every run bounded by DURATION:
#  1. PUT throughput and latency (wrk, CONNECTIONS connections, 100-byte
#     values, unique keys) at `memory`, `wal` and `sync`, and GETs of 64
#     keys, of one ebb node and of three ebb members (the load to member
#     1, which forwards to the leaders), each as a ratio to one node; and
#     the PUTs of a three-member etcd
#     (Debian's etcd-server, through its HTTP/JSON gateway /v3/kv/put),
#     side by side with ratios. Every side acknowledges a write once a
#     majority has it (etcd and ebb `sync`: fsynced; ebb `wal`: in the
#     write-ahead log). The headline (three ebb members at `sync` against
#     etcd) is the median of ROUNDS (default 3) interleaved rounds, a load
#     of each cluster seconds apart, both clusters up all along: single
#     5 s runs of the same binary spread from 2.4 k to 4.4 k writes/s
#     here (BENCHMARKS.md, 2026-12-05), so one pair of runs can land
#     anywhere in that range. Each side's CPU per write is printed too
#     (the three servers' user and system time over the load, per write
#     answered): on shared cores it says what a write costs each design.
#     The same rounds run first at HIGH_CONNECTIONS (default 256, 0 skips
#     them), measured and printed but not the goal's setting (CONNECTIONS).
#  2. Failover: FAILOVERS times, kill -9 the member leading fragment 0 and
#     time until the first write to a key of fragment 0 is acknowledged by
#     another member; p50 and p99.
#  3. Fan-out scans: SCAN_RECORDS records in one node and in three members
#     with R = 1 (each fragment on one member, so member 1 reads two thirds
#     of the pages from the other members over the cluster port); the same
#     filtering query (every record visited, no count shortcut) SCAN_QUERIES
#     times on each, records scanned per second side by side, and the
#     answers compared.
# FRAGMENTS (default 16, the data dir default) is the fragment count of
# the write-throughput part's node and members: one Raft group per
# fragment, so fewer fragments put more writes in each group's rounds.
# Installs wrk and etcd-server when missing. Both sides share the machine's
# cores (stated in the output).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
FAILOVERS=${FAILOVERS:-10}
SCAN_RECORDS=${SCAN_RECORDS:-200000}
SCAN_QUERIES=${SCAN_QUERIES:-10}
FRAGMENTS=${FRAGMENTS:-16}
ROUNDS=${ROUNDS:-3}
HIGH_CONNECTIONS=${HIGH_CONNECTIONS:-256}

need=()
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
if [ "${#need[@]}" -gt 0 ]; then
  echo "bench-cluster: installing ${need[*]}"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# With the examples, dependency features match the test build (see the
# Makefile), so this reuses its artifacts instead of recompiling.
cargo build --release -q --workspace --bins --examples
bin="${CARGO_TARGET_DIR:-target}/release/ebb"
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
export RUST_LOG=warn

wait_ok() { # url
  for _ in $(seq 200); do curl -fsS "$1" >/dev/null 2>&1 && return; sleep 0.05; done
  echo "bench-cluster: $1 never answered" >&2; exit 1
}

cat >"$work/put.lua" <<'LUA'
-- PUT unique keys; the path prefix is args[1], the query args[2]. With
-- several URLs (args[3..]) each connection picks one round robin.
local prefix, query
local counter = 0
init = function(args)
  prefix = args[1]; query = args[2] or ""
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
  counter = math.random(1, 1e9)
end
wrk.method = "PUT"
wrk.body = string.rep("x", 100)
request = function()
  counter = counter + 1
  return wrk.format(nil, prefix .. counter .. query)
end
LUA
cat >"$work/get.lua" <<'LUA'
-- GET 64 keys round robin; the path prefix is args[1], the query args[2].
local prefix, query
local counter = 0
init = function(args) prefix = args[1]; query = args[2] or "" end
request = function()
  counter = counter + 1
  return wrk.format("GET", prefix .. (counter % 64) .. query)
end
LUA
cat >"$work/etcd.lua" <<'LUA'
-- etcd v3 JSON gateway: PUT unique keys with 100-byte values (base64).
local counter = 0
local value = "eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eA=="
init = function(args)
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
  counter = math.random(1, 1e9)
end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local function b64(s)
  local b = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
  return ((s:gsub(".", function(x)
    local r, c = "", x:byte()
    for i = 8, 1, -1 do r = r .. (c % 2 ^ i - c % 2 ^ (i - 1) > 0 and "1" or "0") end
    return r
  end) .. "0000"):gsub("%d%d%d?%d?%d?%d?", function(x)
    if #x < 6 then return "" end
    local c = 0
    for i = 1, 6 do c = c + (x:sub(i, i) == "1" and 2 ^ (6 - i) or 0) end
    return b:sub(c + 1, c + 1)
  end) .. ({ "", "==", "=" })[#s % 3 + 1])
end
request = function()
  counter = counter + 1
  return wrk.format(nil, "/v3/kv/put", nil,
    '{"key":"' .. b64("k" .. counter) .. '","value":"' .. value .. '"}')
end
LUA

# wrk against one URL with a script and its arguments; prints
# "rps p50_ms p99_ms errors".
load() {
  local url=$1 script=$2; shift 2
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s "$script" "$url" -- "$@" >"$work/wrk.out"
  awk '
    /Requests\/sec/ {rps=$2}
    /^ +50%/ {p50=$2} /^ +99%/ {p99=$2}
    /Non-2xx/ {err=$NF} /Socket errors/ {err=err"+"$0}
    function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0; if (v ~ /s$/) return v*1000; return v }
    END {printf "%s %.2f %.2f %s\n", rps, ms(p50), ms(p99), (err==""?0:err)}' "$work/wrk.out"
}

# CPU time (user + system) the processes PIDS... have used, in µs.
cpu_us() {
  local tck; tck=$(getconf CLK_TCK)
  for pid in "$@"; do cut -d' ' -f14,15 "/proc/$pid/stat"; done |
    awk -v t="$tck" '{s += $1 + $2} END {printf "%.0f", s * 1000000 / t}'
}
# "N µs": CPU per request the last `load` got answered, from the CPU
# total BEFORE (of `cpu_us`) to now of the processes PIDS...
per_write() {
  local before=$1; shift
  awk -v b="$before" -v a="$(cpu_us "$@")" '/requests in/ {n = $1}
    END {printf "%.0f µs", (n > 0 ? (a - b) / n : 0)}' "$work/wrk.out"
}

start_ebb() { # name extra-args...: starts ebb serve, echoes nothing
  local name=$1; shift
  "$bin" serve --data-dir "$work/$name" "$@" >"$work/$name.out" 2>"$work/$name.err" &
  pids+=($!)
  echo $! >"$work/$name.pid"
}

echo "== write throughput: $CONNECTIONS connections, $DURATION, 100-byte values, unique keys, $FRAGMENTS fragments, $(nproc) cores shared by every process, commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- 2>/dev/null || echo +changes)"
start_ebb single --listen 127.0.0.1:7260 --fragments "$FRAGMENTS"
wait_ok http://127.0.0.1:7260/health
peers="1=127.0.0.1:7271,2=127.0.0.1:7272,3=127.0.0.1:7273"
for n in 1 2 3; do
  start_ebb "node$n" --listen "127.0.0.1:726$n" --node-id "$n" --cluster-listen "127.0.0.1:727$n" --peers "$peers" --fragments "$FRAGMENTS"
done
for n in 1 2 3; do wait_ok "http://127.0.0.1:726$n/health"; done
until curl -fsS -X PUT --data x "http://127.0.0.1:7261/v1/tables/warm/keys/k" >/dev/null 2>&1; do sleep 0.1; done

ratios=()
for level in memory wal sync; do
  single=$(load http://127.0.0.1:7260 "$work/put.lua" "/v1/tables/bench/keys/k" "?durability=$level")
  # The cluster load goes to member 1, which forwards what it does not lead.
  cluster=$(load http://127.0.0.1:7261 "$work/put.lua" "/v1/tables/bench/keys/k" "?durability=$level")
  echo "ebb 1 node   $level: $single (req/s p50 p99 non-2xx)"
  echo "ebb 3 nodes  $level: $cluster"
  ratios+=("PUT $level: $(awk -v c="${cluster%% *}" -v s="${single%% *}" 'BEGIN {printf "%.2f", c / s}')")
done
# GET of 64 keys round robin (spread over the fragments, so on the cluster
# some are led by member 1 and the rest are read through their leaders,
# linearizably), the same requests on both sides.
for base in http://127.0.0.1:7260 http://127.0.0.1:7261; do
  for i in $(seq 0 63); do curl -fsS -X PUT --data-binary "$(printf 'x%.0s' $(seq 100))" "$base/v1/tables/reads/keys/r$i" >/dev/null; done
done
single=$(load http://127.0.0.1:7260 "$work/get.lua" "/v1/tables/reads/keys/r")
cluster=$(load http://127.0.0.1:7261 "$work/get.lua" "/v1/tables/reads/keys/r")
echo "ebb 1 node   GET: $single (req/s p50 p99 non-2xx)"
echo "ebb 3 nodes  GET: $cluster"
ratios+=("GET: $(awk -v c="${cluster%% *}" -v s="${single%% *}" 'BEGIN {printf "%.2f", c / s}')")
# Follower reads: with R = 3 on three members, member 1 holds every
# fragment and answers from its replica when it lags by at most 1 s.
stale=$(load http://127.0.0.1:7261 "$work/get.lua" "/v1/tables/reads/keys/r" "?max_staleness_ms=1000")
echo "ebb 3 nodes  GET ?max_staleness_ms=1000: $stale"
ratios+=("GET with max_staleness_ms=1000: $(awk -v c="${stale%% *}" -v s="${single%% *}" 'BEGIN {printf "%.2f", c / s}')")
echo "3 members / 1 node (measured, not a goal): $(IFS=,; echo "${ratios[*]}" | sed 's/,/, /g')"
# Every member holds the same records (one read per member).
for n in 1 2 3; do
  curl -fsS -X POST "http://127.0.0.1:726$n/v1/sql" -d '{"sql":"SELECT count(*) FROM bench"}' | sed "s/^/member $n: /"; echo
done

etcd_pids=()
etcd_peers="e1=http://127.0.0.1:2381,e2=http://127.0.0.1:2382,e3=http://127.0.0.1:2383"
for n in 1 2 3; do
  etcd --name "e$n" --data-dir "$work/etcd$n" \
    --listen-client-urls "http://127.0.0.1:237$n" --advertise-client-urls "http://127.0.0.1:237$n" \
    --listen-peer-urls "http://127.0.0.1:238$n" --initial-advertise-peer-urls "http://127.0.0.1:238$n" \
    --initial-cluster "$etcd_peers" --initial-cluster-state new --log-level error \
    >"$work/etcd$n.log" 2>&1 &
  pids+=($!)
  etcd_pids+=($!)
done
for n in 1 2 3; do
  for _ in $(seq 200); do curl -fsS "http://127.0.0.1:237$n/health" 2>/dev/null | grep -q true && break; sleep 0.05; done
done
# Three ebb members at `sync` against etcd, ROUNDS interleaved rounds,
# with each side's CPU per write: the three servers' user and system time
# over the load (wrk's own not counted) divided by the writes answered.
ebb_pids=($(cat "$work/node1.pid" "$work/node2.pid" "$work/node3.pid"))
# Who leads: each side's load goes to its member 1. ebb's leadership
# follows a group's writes to the member they come through
# (docs/cluster.md, "Leadership balance"), so by now member 1 leads what
# the earlier loads wrote; etcd's leader is whichever member won its first
# election, and loaded at a follower etcd answers about a tenth fewer
# writes/s (forwarding each to its leader), so it is moved to member 1
# first (etcd's own leadership transfer): both sides lead where the load
# arrives.
etcd_leading_member() {
  local n status
  for n in 1 2 3; do
    status=$(curl -fsS -X POST "http://127.0.0.1:237$n/v3/maintenance/status" -d '{}' 2>/dev/null) || continue
    if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if d["header"]["member_id"] == d["leader"] else 1)' "$status"; then
      echo "$n"
      return
    fi
  done
  echo unknown
}
leader=$(etcd_leading_member)
etcd_leader="member $leader"
if [ "$leader" != 1 ] && [ "$leader" != unknown ]; then
  member_1=$(curl -fsS -X POST http://127.0.0.1:2371/v3/maintenance/status -d '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["member_id"])')
  curl -fsS -X POST "http://127.0.0.1:237$leader/v3/maintenance/transfer-leadership" -d "{\"targetID\": \"$member_1\"}" >/dev/null
  for _ in $(seq 100); do [ "$(etcd_leading_member)" = 1 ] && break; sleep 0.05; done
  etcd_leader="member $(etcd_leading_member) (moved there from member $leader, the winner of its election)"
fi
ebb_led=$(curl -fsS http://127.0.0.1:7261/v1/cluster | python3 -c 'import json,sys; f=json.load(sys.stdin)["fragments"]; print("%d of %d" % (sum(1 for x in f if x.get("leader") == 1), len(f)))')
echo "the load goes to member 1 of each: it leads $ebb_led ebb fragments; etcd's leader is $etcd_leader"
# etcd_rounds CONNS: ROUNDS interleaved rounds at CONNS connections; prints
# each round and sets etcd_ratio (the median ebb/etcd) and errors.
etcd_rounds() {
  local conns=$1 round ebb etcd before c_rps c_err e_rps e_err
  local -a ratios=()
  errors=""
  echo "ebb 3 members at sync against etcd 3 members (fsync, HTTP gateway), $conns connections, $ROUNDS interleaved rounds (req/s p50 p99 non-2xx, then the three servers' CPU per write):"
  for round in $(seq "$ROUNDS"); do
    before=$(cpu_us "${ebb_pids[@]}")
    ebb=$(CONNECTIONS=$conns load http://127.0.0.1:7261 "$work/put.lua" "/v1/tables/bench/keys/k" "?durability=sync")
    ebb="$ebb $(per_write "$before" "${ebb_pids[@]}")"
    before=$(cpu_us "${etcd_pids[@]}")
    etcd=$(CONNECTIONS=$conns load http://127.0.0.1:2371 "$work/etcd.lua")
    etcd="$etcd $(per_write "$before" "${etcd_pids[@]}")"
    read -r c_rps _ _ c_err _ <<<"$ebb"
    read -r e_rps _ _ e_err _ <<<"$etcd"
    [ "$c_err" = 0 ] || errors="$errors ebb:$c_err"
    [ "$e_err" = 0 ] || errors="$errors etcd:$e_err"
    ratios+=("$(awk -v c="$c_rps" -v e="$e_rps" 'BEGIN {printf "%.2f", c / e}')")
    echo "round $round: ebb $ebb; etcd $etcd; ebb/etcd ${ratios[-1]}"
  done
  etcd_ratio=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  echo "ebb/etcd at $conns connections, median of $ROUNDS rounds: $etcd_ratio (rounds ${ratios[*]})${errors:+; non-2xx:$errors}"
}
# Many clients (measured, not the goal's setting): with HIGH_CONNECTIONS
# writers over 16 groups each Raft round carries several writes instead of
# about two, on both sides the same load.
if [ "$HIGH_CONNECTIONS" -gt 0 ]; then
  etcd_rounds "$HIGH_CONNECTIONS"
fi
# The goal's setting last, so its figures are the ones the headline reads.
etcd_rounds "$CONNECTIONS"
# Headline for `make bench-all`; a run with non-2xx answers meets no goal.
awk -v r="$etcd_ratio" -v err="$errors" -v n="$ROUNDS" 'BEGIN {
  met = (r >= 2 && err == "") ? "met" : "not met"
  printf "headline: cluster writes (3 members, sync) twice etcd'"'"'s%s | etcd 3 members, fsync (ebb req/s / etcd req/s, median of %d interleaved rounds) | %.2f | >= 2 | %s\n", (err == "" ? "" : " (non-2xx:" err ")"), n, r, met
}'

echo "== failover: kill -9 of the member leading fragment 0, time until a write to every fragment (64 keys, one batch) is acknowledged by another member ($FAILOVERS times)"
# 64 keys: every fragment (16) holds some of them, with near certainty.
batch='['$(for i in $(seq 0 63); do printf '{"key":"f%d","value":"x"},' "$i"; done | sed 's/,$//')']'
all_written() { # member: whether one batch write of the 64 keys fully succeeded
  curl -fsS -m 5 -X POST -H 'content-type: application/json' --data "$batch" \
    "http://127.0.0.1:726$1/v1/tables/failover/batch" 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["results"]; sys.exit(0 if all(x["status"]==200 for x in r) else 1)'
}
times=()
for run in $(seq "$FAILOVERS"); do
  leader=$(curl -fsS http://127.0.0.1:7261/v1/cluster 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["fragments"][0]["leader"])' 2>/dev/null || \
           curl -fsS http://127.0.0.1:7262/v1/cluster | python3 -c 'import json,sys; print(json.load(sys.stdin)["fragments"][0]["leader"])')
  other=$(( leader % 3 + 1 ))
  kill -9 "$(cat "$work/node$leader.pid")"
  wait "$(cat "$work/node$leader.pid")" 2>/dev/null || true
  start=$(date +%s%N)
  until all_written "$other"; do sleep 0.01; done
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  times+=("$ms")
  echo "run $run: member $leader killed, every fragment written through member $other after $ms ms"
  start_ebb "node$leader" --listen "127.0.0.1:726$leader" --node-id "$leader" --cluster-listen "127.0.0.1:727$leader" --peers "$peers" --fragments "$FRAGMENTS"
  wait_ok "http://127.0.0.1:726$leader/health"
  sleep 2
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {p50=a[int((NR+1)/2)]; p99=a[NR]; printf "failover p50 %d ms, p99 (max of %d) %d ms\n", p50, NR, p99}'

echo "== fan-out scans: $SCAN_RECORDS records, the same query $SCAN_QUERIES times, $(nproc) cores shared by every process"
for n in 1 2 3; do kill -9 "$(cat "$work/node$n.pid")" 2>/dev/null || true; done
scan_peers="1=127.0.0.1:7281,2=127.0.0.1:7282,3=127.0.0.1:7283"
for n in 1 2 3; do
  start_ebb "scan$n" --listen "127.0.0.1:729$n" --node-id "$n" --cluster-listen "127.0.0.1:728$n" --peers "$scan_peers" --replication 1
done
for n in 1 2 3; do wait_ok "http://127.0.0.1:729$n/health"; done
until curl -fsS -X PUT --data x "http://127.0.0.1:7291/v1/tables/warm/keys/k" >/dev/null 2>&1; do sleep 0.1; done
python3 - "$SCAN_RECORDS" <<'PY'
import json, sys, urllib.request
records = int(sys.argv[1])
for base in ("http://127.0.0.1:7260", "http://127.0.0.1:7291"):
    for start in range(0, records, 5000):
        items = [{"key": f"s{i:08d}", "value": f"{i % 1000:04d}" + "x" * 96}
                 for i in range(start, min(records, start + 5000))]
        request = urllib.request.Request(f"{base}/v1/tables/scan/batch?durability=memory",
                                         data=json.dumps(items).encode(),
                                         headers={"content-type": "application/json"})
        answer = json.load(urllib.request.urlopen(request, timeout=60))
        assert all(r["status"] == 200 for r in answer["results"]), base
PY
held=$(curl -fsS http://127.0.0.1:7291/v1/cluster | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(1 for f in d["fragments"] if 1 in f["replicas"]), "of", len(d["fragments"]))')
echo "member 1 holds $held fragments; the others' pages come from members 2 and 3"
python3 - "$SCAN_RECORDS" "$SCAN_QUERIES" <<'PY'
import json, sys, time, urllib.request
records, queries = int(sys.argv[1]), int(sys.argv[2])
sql = "SELECT count(*), sum(CAST(substr(value, 1, 4) AS INTEGER)) FROM scan WHERE value LIKE '%x'"
results = {}
for name, base in (("ebb 1 node", "http://127.0.0.1:7260"), ("ebb 3 members, R = 1", "http://127.0.0.1:7291")):
    answers = set()
    started = time.monotonic()
    for _ in range(queries):
        request = urllib.request.Request(f"{base}/v1/sql", data=json.dumps({"sql": sql}).encode(),
                                         headers={"content-type": "application/json"})
        answers.add(json.dumps(json.load(urllib.request.urlopen(request, timeout=120))["rows"]))
    elapsed = time.monotonic() - started
    assert len(answers) == 1, answers
    results[name] = (answers.pop(), records * queries / elapsed, elapsed / queries * 1000)
    print(f"{name}: {results[name][1]:,.0f} records/s, {results[name][2]:.0f} ms per query, answer {results[name][0]}")
one, three = results["ebb 1 node"], results["ebb 3 members, R = 1"]
assert one[0] == three[0], "the two sides answered differently"
print(f"ratio 3 members / 1 node: {three[1] / one[1]:.2f}x (same answer on both)")
PY
