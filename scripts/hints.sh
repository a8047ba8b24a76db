#!/usr/bin/env bash
# Printed by `make run` before the server starts: commands to try from another terminal.
cat <<'HINTS'

ebb is starting on http://127.0.0.1:7070 with data in ./ebb-data. In another terminal:

  curl -X PUT --data-binary '{"name":"Ada"}' http://127.0.0.1:7070/v1/tables/users/keys/user:1
  curl -i http://127.0.0.1:7070/v1/tables/users/keys/user:1
  curl -X PUT --data-binary 'token' 'http://127.0.0.1:7070/v1/tables/sessions/keys/s1?ttl_ms=10000'
  curl http://127.0.0.1:7070/v1/tables
  curl http://127.0.0.1:7070/health

  alias ebb=./target/release/ebb      # or $CARGO_TARGET_DIR/release/ebb
  ebb put users user:2 Grace
  ebb get users user:2
  ebb tables

Ctrl-C stops the server cleanly.

HINTS
