#!/usr/bin/env bash
# Install what building ebb needs and is missing: libclang (the rocksdb crate
# runs bindgen), a C compiler, clang++ (RocksDB's C++; .cargo/config.toml
# says why), and the wasm32 target for plugins. With
# --test, also what the tests drive: tmux (the terminal prompt) and headless
# Chromium with ChromeDriver (the web console).
# Idempotent; safe to run on every `make run` / `make test`.
set -euo pipefail

tests=false
[ "${1:-}" = "--test" ] && tests=true

need_apt=()
# bindgen needs the unversioned libclang.so that libclang-dev provides.
if ! ls /usr/lib/llvm-*/lib/libclang.so >/dev/null 2>&1 && ! ls /usr/lib/*/libclang.so >/dev/null 2>&1; then
  need_apt+=(libclang-dev)
fi
command -v c++ >/dev/null 2>&1 || need_apt+=(g++)
# RocksDB's C++ compiles with clang++ (.cargo/config.toml): a quarter less
# CPU than g++ for the largest part of a cold build.
command -v clang++ >/dev/null 2>&1 || need_apt+=(clang)
command -v make >/dev/null 2>&1 || need_apt+=(make)
if $tests; then
  command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
  [ -x /usr/bin/chromium ] || need_apt+=(chromium)
  [ -x /usr/bin/chromedriver ] || need_apt+=(chromium-driver)
fi

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "prereqs: installing ${need_apt[*]} with apt-get"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  # Without recommends: Chromium's pull in a desktop (printing, power
  # management) that headless tests do not use.
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
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
