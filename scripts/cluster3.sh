#!/usr/bin/env bash
# Start a three-node ebb cluster on this machine: node N listens for
# clients on 127.0.0.1:707N and for its peers on 127.0.0.1:717N, with its
# own data dir under $EBB_CLUSTER_DIR (default ./ebb-cluster/nodeN) and its
# log in nodeN.log there. Ctrl-C stops all three cleanly (each hands its
# leaderships to the others first).
#
#   scripts/cluster3.sh [extra `ebb serve` flags...]
#   EBB_BIN=target/release/ebb EBB_CLUSTER_DIR=/tmp/c scripts/cluster3.sh --replication 3
set -euo pipefail

bin="${EBB_BIN:-${CARGO_TARGET_DIR:-target}/release/ebb}"
dir="${EBB_CLUSTER_DIR:-ebb-cluster}"
peers="1=127.0.0.1:7171,2=127.0.0.1:7172,3=127.0.0.1:7173"
if [ ! -x "$bin" ]; then
  echo "no ebb binary at $bin: run 'make build' first (or set EBB_BIN)" >&2
  exit 1
fi
mkdir -p "$dir"
pids=()
stop() {
  echo "stopping the cluster"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
}
trap stop INT TERM
for n in 1 2 3; do
  "$bin" serve --data-dir "$dir/node$n" --listen "127.0.0.1:707$n" \
    --node-id "$n" --cluster-listen "127.0.0.1:717$n" --peers "$peers" "$@" \
    >"$dir/node$n.log" 2>&1 &
  pids+=("$!")
  echo "node $n: http://127.0.0.1:707$n (log $dir/node$n.log, pid $!)"
done
echo "status: ${bin} --url http://127.0.0.1:7071 cluster status"
wait "${pids[@]}"
