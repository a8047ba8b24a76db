#!/usr/bin/env bash
# Install wrk with apt-get when missing (the HTTP load benchmarks drive
# `ebb serve` with it). Idempotent; a failed install fails the bench.
set -euo pipefail
if ! command -v wrk >/dev/null 2>&1; then
  echo "installing wrk"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq wrk >/dev/null
fi
