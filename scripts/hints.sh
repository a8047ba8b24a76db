#!/usr/bin/env bash
# Printed by `make run` before the server starts: commands to try from another terminal.
cat <<'HINTS'

ebb is starting on http://127.0.0.1:7070 with data in ./ebb-data. In another terminal:

  curl -X PUT --data-binary '{"name":"Ada"}' http://127.0.0.1:7070/v1/tables/users/keys/user:1
  curl -i http://127.0.0.1:7070/v1/tables/users/keys/user:1
  curl -X PUT --data-binary 'token' 'http://127.0.0.1:7070/v1/tables/sessions/keys/s1?ttl_ms=10000'
  curl http://127.0.0.1:7070/v1/tables
  curl http://127.0.0.1:7070/health

  The bundled plugins (json, stats, archive) and a demo table `requests` are loaded:

  curl -s http://127.0.0.1:7070/v1/sql -d '{"sql": "SELECT json.get(value, '"'"'$.path'"'"') AS path, count(*), stats.p95(json.get_float(value, '"'"'$.ms'"'"')) FROM requests GROUP BY path"}'

  alias ebb=./target/release/ebb      # or $CARGO_TARGET_DIR/release/ebb
  ebb put users user:2 Grace
  ebb get users user:2
  ebb tables
  ebb sql "SELECT json.get(value, '\$.path') AS path, stats.p95(json.get_float(value, '\$.ms')) AS p95 FROM requests GROUP BY path"
  ebb plugin ls

  Expiries of table `sessions` run the archive plugin (an expiry handler):

  ebb put sessions s9 alice --ttl 2s; sleep 3; ebb get sessions_archive s9
  ebb expiry status sessions

Ctrl-C stops the server cleanly.

HINTS
