#!/usr/bin/env bash
# Install what building ebb needs and is missing: libclang (the rocksdb crate
# runs bindgen), a C/C++ compiler, and the wasm32 target for plugins.
# Idempotent; safe to run on every `make run` / `make test`.
set -euo pipefail

need_apt=()
# bindgen needs the unversioned libclang.so that libclang-dev provides.
if ! ls /usr/lib/llvm-*/lib/libclang.so >/dev/null 2>&1 && ! ls /usr/lib/*/libclang.so >/dev/null 2>&1; then
  need_apt+=(libclang-dev)
fi
command -v c++ >/dev/null 2>&1 || need_apt+=(g++)
command -v make >/dev/null 2>&1 || need_apt+=(make)
# The terminal prompt's test drives `ebb sql` in tmux.
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "prereqs: installing ${need_apt[*]} with apt-get"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "prereqs: cargo not found; install Rust with rustup (https://rustup.rs) first" >&2
  exit 1
fi

if command -v rustup >/dev/null 2>&1; then
  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    echo "prereqs: adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
fi
