#!/usr/bin/env bash
# Install what the comparison benchmarks need and is missing: Debian's
# `redis-server` (the memory bench measures it side by side with ebb).
# Never fails: when the install does not work it prints a warning and the
# bench reports ebb's figures alone. Idempotent.
set -uo pipefail

if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "bench-prereqs: warning: redis-server missing and no apt-get; the memory bench measures ebb alone" >&2
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  sudo=""
elif command -v sudo >/dev/null 2>&1; then
  sudo="sudo"
else
  echo "bench-prereqs: warning: redis-server missing, not root and no sudo; the memory bench measures ebb alone" >&2
  exit 0
fi
echo "bench-prereqs: installing redis-server with apt-get"
if $sudo apt-get update -qq &&
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends redis-server >/dev/null; then
  echo "bench-prereqs: installed $(redis-server --version | head -n1)"
else
  echo "bench-prereqs: warning: installing redis-server failed; the memory bench measures ebb alone" >&2
fi
exit 0
