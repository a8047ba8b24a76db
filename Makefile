# ebb: two commands to remember.
#   make run   install what is missing, build, and run
#   make test  install what is missing and run every test
#
# Every target builds with the release profile so the heavy C++ dependencies
# (RocksDB) are compiled once and shared by run, test and bench.

CARGO ?= cargo
PROFILE := --release
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)

.PHONY: run cluster example test fuzz-soak bench bench-all bench-sql bench-plugins bench-expiry bench-http bench-triggers bench-cluster bench-isolation bench-memory bench-boot bench-purge build plugins lint fmt prereqs prereqs-test screenshots clean-data

prereqs:
	@./scripts/prereqs.sh

# What the tests drive besides: tmux and headless Chromium with ChromeDriver.
prereqs-test:
	@./scripts/prereqs.sh --test

build: prereqs
	$(CARGO) build $(PROFILE) --workspace --bins --examples

WASM_DIR := $(TARGET_DIR)/wasm32-unknown-unknown/release
BUNDLED_DIR := $(TARGET_DIR)/bundled-plugins

# The bundled example plugins and the test plugin, compiled to wasm32 (tests
# upload them). The bundled ones are also copied to $(BUNDLED_DIR), the
# directory `make run` installs from.
# Link-time optimized into one code unit: about 12 % less code for the
# server to compile at upload (docs/plugins.md). Only this wasm32 build
# uses these settings; the host build keeps its own.
PLUGIN_PROFILE := $(PROFILE) --config profile.release.lto=true --config profile.release.codegen-units=1 --config profile.release.incremental=false

plugins: prereqs
	$(CARGO) build $(PLUGIN_PROFILE) --target wasm32-unknown-unknown -p ebb-plugin-json -p ebb-plugin-stats -p ebb-plugin-archive -p ebb-test-flaky
	@mkdir -p $(BUNDLED_DIR)
	@cp $(WASM_DIR)/ebb_plugin_json.wasm $(WASM_DIR)/ebb_plugin_stats.wasm $(WASM_DIR)/ebb_plugin_archive.wasm $(BUNDLED_DIR)/

# Binaries and examples are built together so dependency features match the
# test build exactly and neither target rebuilds the other's dependencies.
run: prereqs plugins
	$(CARGO) build $(PROFILE) --workspace --bins --examples
	@./scripts/hints.sh
	$(TARGET_DIR)/release/ebb serve --data-dir ebb-data \
		--plugin-dir $(BUNDLED_DIR) --demo

# Three local nodes of one cluster (client ports 7071-7073); see
# docs/cluster.md. Ctrl-C stops them.
cluster: prereqs
	$(CARGO) build $(PROFILE) --workspace --bins --examples
	EBB_BIN=$(TARGET_DIR)/release/ebb ./scripts/cluster3.sh

example: prereqs
	$(CARGO) run $(PROFILE) --workspace --example embedded

# Every target but the examples: the embedded API's two are compiled into
# and run by ebb-host's integration tests (tests/examples.rs), and the HTTP
# floor is built by the benchmark that needs it.
test: prereqs-test plugins
	$(CARGO) test $(PROFILE) --workspace --lib --bins --tests --benches
	$(CARGO) test $(PROFILE) --workspace --doc

# Refresh the console's screenshots in docs/img from its browser test.
screenshots: prereqs-test plugins
	EBB_SCREENSHOT_DIR=$(CURDIR)/docs/img $(CARGO) test $(PROFILE) --workspace --test server console::

# A longer fuzz run than `make test`: every fuzz test repeats rounds of
# cases for FUZZ_SECONDS (default 600) each, all at once, then the plugin
# decoders' properties run FUZZ_LIB_CASES cases each. See docs/testing.md.
FUZZ_SECONDS ?= 600
FUZZ_LIB_CASES ?= 200000
fuzz-soak: prereqs plugins
	@echo "fuzz soak: $(FUZZ_SECONDS) s per fuzz test at $$(git rev-parse --short HEAD)"
	EBB_FUZZ_SECONDS=$(FUZZ_SECONDS) $(CARGO) test $(PROFILE) --workspace --test fuzz -- --nocapture --test-threads 8
	EBB_FUZZ_LIB_CASES=$(FUZZ_LIB_CASES) $(CARGO) test $(PROFILE) --workspace --lib -- --nocapture ::fuzz::
	@echo "fuzz soak: clean after $(FUZZ_SECONDS) s per fuzz test and $(FUZZ_LIB_CASES) cases per decoder property at $$(git rev-parse --short HEAD)"

bench: prereqs
	$(CARGO) bench --workspace --bench engine -- kv

# Every benchmark with a headline goal, then one table of goal, anchor and
# measured ratio (SKIP="cluster memory" to leave some out).
bench-all: prereqs plugins
	./scripts/bench-all.sh

bench-sql: prereqs
	$(CARGO) bench --workspace --bench engine -- sql

bench-plugins: prereqs plugins
	$(CARGO) bench --workspace --bench engine -- plugins

bench-expiry: prereqs plugins
	$(CARGO) bench --workspace --bench engine -- expiry

bench-http: prereqs
	./scripts/bench-http.sh

# Write throughput of a table with a change handler against an unbound one.
bench-triggers: prereqs plugins
	./scripts/bench-triggers.sh

# Three members against one node and a three-member etcd, and failover time.
bench-cluster: prereqs
	./scripts/bench-cluster.sh

# Point-read latency and server memory while heavy queries run.
bench-isolation: prereqs
	$(CARGO) bench --workspace --bench isolation

# Server memory per record, side by side with Redis (installed when missing).
bench-memory: prereqs
	@./scripts/bench-prereqs.sh
	$(CARGO) bench --workspace --bench memory

# Boot time of `ebb serve` on 1 M records (EBB_BENCH_RECORDS=1000000,10000000).
bench-boot: prereqs
	$(CARGO) bench --workspace --bench boot

# What a purge gives back: tombstones, RSS and SST bytes after 300 k records expire.
bench-purge: build
	./scripts/measure-purge.sh $(TARGET_DIR)/release/ebb 300000

lint: prereqs
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy $(PROFILE) --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

clean-data:
	rm -rf ebb-data
